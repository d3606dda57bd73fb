//go:build !linux

package residency

// TrimOnce does nothing here: the trim is Linux's (madvise on the
// mappings /proc/self/maps lists).
func TrimOnce() (before, after int64, ok bool, err error) { return 0, 0, false, nil }
