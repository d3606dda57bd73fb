package rig

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/internal/procstat"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

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
	return float64(ut+st) / clockTicks
}

// PeakRSSKB is VmHWM, the process's peak resident set size in kB.
func PeakRSSKB(pid int) int64 { return procstat.StatusKB(pid, "VmHWM") }

// ResetPeakRSS sets VmHWM back to the current RSS (clear_refs 5).
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

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
func BusySeconds(a, b MachineCPU) float64 { return float64(b.Busy-a.Busy) / clockTicks }

// LoadAvg returns /proc/loadavg's first three fields.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Proc is a started process whose peak RSS is sampled (VmHWM, read every
// 100 ms and at the end, so a process that exits keeps its figure).
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	Started time.Time

	done chan struct{}
	err  error

	mu      sync.Mutex
	peakKB  int64
	lastCPU float64
}

// StartProc starts args with stdout and stderr appended to logPath.
func StartProc(name, logPath string, env []string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = env
	}
	// Its own process group, so a terminal's ^C reaches only the harness,
	// which stops its children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Proc{Name: name, Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	go p.sample()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

func (p *Proc) sample() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
			p.Sample()
		}
	}
}

// Sample reads VmHWM and CPU time now.
func (p *Proc) Sample() {
	kb := PeakRSSKB(p.Pid())
	cpu := CPUSeconds(p.Pid())
	p.mu.Lock()
	defer p.mu.Unlock()
	if kb > p.peakKB {
		p.peakKB = kb
	}
	if cpu >= 0 {
		p.lastCPU = cpu
	}
}

// ResetPeak forgets the peak so far (VmHWM is reset to the current RSS).
func (p *Proc) ResetPeak() {
	_ = ResetPeakRSS(p.Pid())
	p.mu.Lock()
	p.peakKB = 0
	p.mu.Unlock()
	p.Sample()
}

// PeakRSSMB is the largest VmHWM seen, in MiB.
func (p *Proc) PeakRSSMB() float64 {
	p.Sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.peakKB) / 1024
}

// CPU is the process's CPU seconds so far (the last reading if it has exited).
func (p *Proc) CPU() float64 {
	p.Sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastCPU
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error once Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to timeout, then SIGKILL. It returns the exit
// error (nil for a clean exit).
func (p *Proc) Stop(timeout time.Duration) error {
	if p.Exited() {
		return p.err
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
	}
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.Name, p.Pid())
	}
	return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, timeout)
}

// Kill kills the process and waits for it.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string { return Tail(p.LogPath, n) }

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ErrTimeout is wrapped by waits that ran out of time.
var ErrTimeout = errors.New("timed out")
