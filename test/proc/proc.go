package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Options say what to start and how.
type Options struct {
	// Name names the process in errors ("walrelay", "kafka-connect").
	Name string
	// Path is the executable, Args its arguments (without argv[0]).
	Path string
	Args []string
	// Env is the whole environment; nil is this process's.
	Env []string
	// Dir is the working directory; "" is this process's.
	Dir string
	// Log receives stdout and stderr, appended (created if missing).
	Log string
	// Detached gives the process a session of its own: it outlives its
	// starter (a server of a kept bed, or one a test binary restarted on a
	// bed it does not own), so it gets no death signal.
	Detached bool
	// Group gives a process that is not detached a process group of its
	// own: a terminal's ^C reaches only the starter, which stops its
	// children in order.
	Group bool
	// DeathSignal is what a process that is not detached receives when its
	// starter dies (0: SIGKILL), so a test binary killed by -timeout takes
	// its children with it.
	DeathSignal syscall.Signal
	// Credential runs the process as another user (nil: this one).
	Credential *syscall.Credential
	// Sample reads the process's peak RSS (VmHWM) and CPU time every
	// 100 ms, for PeakRSSMB and CPU.
	Sample bool
}

// Proc is a started process.
type Proc struct {
	Name    string
	LogPath string
	Started time.Time

	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited, set before done is closed

	mu      sync.Mutex
	peakKB  int64
	lastCPU float64
}

// ErrTimeout is wrapped by waits that ran out of time.
var ErrTimeout = errors.New("timed out")

// Start starts the process described by o.
func Start(o Options) (*Proc, error) {
	name := o.Name
	if name == "" {
		name = o.Path
	}
	f, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// N.B. an *os.File is handed to the child as is (no copying goroutine):
	// the child holds its own descriptor once started.
	defer f.Close()
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env, cmd.Dir = o.Env, o.Dir
	cmd.Stdout, cmd.Stderr = f, f
	if o.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		sig := o.DeathSignal
		if sig == 0 {
			sig = syscall.SIGKILL
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.Group, Pdeathsig: sig}
	}
	cmd.SysProcAttr.Credential = o.Credential
	p := &Proc{Name: name, LogPath: o.Log, cmd: cmd, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if o.Sample {
		go p.sample()
	}
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended: nil while it runs or after exit code 0, an
// *exec.ExitError after another exit code or a signal.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode is the exit code of a process that has exited (-1 when a signal
// ended it); the error says why there is none (it runs, or waiting for it
// failed).
func (p *Proc) ExitCode() (int, error) {
	if !p.Exited() {
		return -1, fmt.Errorf("%s (pid %d) is running", p.Name, p.Pid())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

// Wait waits up to timeout for the exit; it reports whether the process has
// exited.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Signal sends sig to the process (not its group). A process that has
// exited is not an error.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits up to 10 s until the process is gone.
func (p *Proc) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	if !p.Wait(10 * time.Second) {
		return fmt.Errorf("%s (pid %d) still running 10s after SIGKILL: %w", p.Name, p.Pid(), ErrTimeout)
	}
	return nil
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL. It returns how the
// process ended (nil for exit code 0), or an error saying it was killed.
func (p *Proc) Stop(grace time.Duration) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if p.Wait(grace) {
		return p.err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, grace)
}

// Log returns the whole log so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string { return Tail(p.LogPath, n) }

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

// Sample reads the peak RSS and CPU time now (nothing once the process has
// exited: its pid may be another process's).
func (p *Proc) Sample() {
	if p.Exited() {
		return
	}
	kb := PeakRSSKB(p.Pid())
	cpu := CPUSeconds(p.Pid())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peakKB = max(p.peakKB, kb)
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

// CPU is the process's CPU seconds so far (the last reading once it has
// exited).
func (p *Proc) CPU() float64 {
	p.Sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastCPU
}
