// Package residency drops from the process's resident set the pages of
// its executable that only start-up used.
//
// Input: none (the process's own /proc/self/maps and executable). Output:
// TrimOnce, which asks the kernel (madvise MADV_DONTNEED) to unmap the
// pages of the executable's read-only mappings (code, read-only data,
// the function tables) from the process, once. Invariant: only mappings of
// the executable that are not writable, whose contents the file gives
// back unchanged: the pages stay in the page cache, and code or data used
// again is mapped again by a minor fault; nothing writable (.data, .bss,
// the heap) is ever touched. On systems other than Linux it does nothing.
//
// Why: the kernel maps the pages around each one a process touches
// (fault-around, 64 KiB), and start-up runs the initialisation of every
// package in the executable, spread over all of it: after start-up nearly
// all of a 40 MB executable's code was resident (11 of 12.7 MiB), though
// steady relaying uses a fraction of it.
package residency
