// Package procstat reads a process's figures from /proc, for the tests and
// the benchmarks.
//
// Input: a process id (and a field of /proc/PID/status). Output: its peak or
// current memory in kB, its CPU seconds. Invariant: it never fails a caller:
// 0 (memory) or -1 (CPU) when the figure cannot be read (no /proc, the
// process gone); it is never used by walrelay itself.
package procstat
