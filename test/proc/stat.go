package proc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat and
// of /proc/stat; it is 100 on every Linux architecture Go supports.
const ClockTicks = 100

// StatusKB reads a kB field of /proc/PID/status, such as VmRSS or VmHWM (the
// peak resident set size); 0 when it cannot.
func StatusKB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// PeakRSSKB is VmHWM, the process's peak resident set size in kB; 0 when it
// cannot be read.
func PeakRSSKB(pid int) int64 { return StatusKB(pid, "VmHWM") }

// ResetPeakRSS sets VmHWM back to the current RSS (clear_refs 5).
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// CPUSeconds returns utime+stime of pid (all its threads) in seconds, or -1
// when the process is gone.
func CPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces; fields restart after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(ut+st) / ClockTicks
}

// ExecReadOnlyKB sums, over the read-only private mappings of pid's
// executable (code, read-only data, the function tables), their size and
// what of them is resident (Size and Rss of /proc/PID/smaps), in kB; 0s
// when it cannot read them.
func ExecReadOnlyKB(pid int) (rss, size int64) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// a mapping's line: address perms offset dev inode pathname
			in = len(fields) >= 6 && strings.Join(fields[5:], " ") == exe &&
				strings.HasPrefix(fields[1], "r-") && strings.HasSuffix(fields[1], "p")
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			rss += n
		case "Size:":
			size += n
		}
	}
	return rss, size
}
