package procstat

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
