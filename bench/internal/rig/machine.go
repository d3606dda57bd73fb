package rig

import (
	"os"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/test/proc"
)

// MachineCPU is the machine's busy and total jiffies from /proc/stat.
type MachineCPU struct{ Busy, Total int64 }

// ReadMachineCPU reads the aggregate cpu line of /proc/stat.
func ReadMachineCPU() MachineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var m MachineCPU
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		m.Total += n
		if i != 3 && i != 4 { // idle, iowait
			m.Busy += n
		}
	}
	return m
}

// BusyShare is the share of all cores busy between a and b (0..1).
func BusyShare(a, b MachineCPU) float64 {
	if b.Total <= a.Total {
		return 0
	}
	return float64(b.Busy-a.Busy) / float64(b.Total-a.Total)
}

// BusySeconds is the CPU seconds all cores spent busy between a and b.
func BusySeconds(a, b MachineCPU) float64 {
	return float64(b.Busy-a.Busy) / proc.ClockTicks
}

// LoadAvg returns /proc/loadavg's first three fields.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
