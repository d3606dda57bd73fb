package residency

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var once sync.Once

// TrimOnce drops the executable's read-only pages from the resident set,
// the first time it is called, and says how much resident file memory the
// process had before and after (RssFile of /proc/self/status, bytes); ok is
// false when it did nothing (a later call, or an error: err says which).
func TrimOnce() (before, after int64, ok bool, err error) {
	once.Do(func() {
		before, _ = rssFile()
		if err = trim(); err == nil {
			after, _ = rssFile()
			ok = true
		}
	})
	return before, after, ok, err
}

// trim advises MADV_DONTNEED on every read-only mapping of the executable.
func trim() error {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("find the executable: %w", err)
	}
	ranges, err := readOnlyMappings("/proc/self/maps", exe)
	if err != nil {
		return err
	}
	if len(ranges) == 0 {
		return fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	for _, r := range ranges {
		// N.B. uintptrs, not a slice over the mapping: the memory is the
		// program's own code and constants, and nothing here reads it.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %x-%x: %w", r[0], r[1], errno)
		}
	}
	return nil
}

// readOnlyMappings lists the [start, end) of each mapping in the maps file
// that maps path and is neither writable nor anything but private.
func readOnlyMappings(maps, path string) ([][2]uintptr, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode pathname
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || strings.Join(fields[5:], " ") != path {
			continue
		}
		perms := fields[1]
		if len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("%s: mapping %q", maps, fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("%s: mapping %q", maps, fields[0])
		}
		out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

// rssFile reads RssFile from /proc/self/status, in bytes.
func rssFile() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no RssFile in /proc/self/status")
}
