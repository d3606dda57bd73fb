package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/test/testbed"
)

func main() { os.Exit(run()) }

func run() int {
	keep := flag.Bool("keep", false, "start the servers, print the environment to export and exit, leaving them running")
	stopDir := flag.String("stop", "", "stop the servers of the bed in `dir` (one left by -keep) and remove it")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testbed [-keep] [-stop dir] [--] command [args...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	if *stopDir != "" {
		b, err := testbed.Open(*stopDir)
		if err == nil {
			err = b.Stop()
		}
		if err != nil {
			logf("testbed: %v", err)
			return 1
		}
		logf("testbed: stopped and removed %s", *stopDir)
		return 0
	}
	args := flag.Args()
	if len(args) == 0 && !*keep {
		flag.Usage()
		return 2
	}

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interrupted atomic.Int32 // the signal that stopped the start
	go func() {
		select {
		case s := <-signals: // stop starting
			interrupted.Store(int32(s.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()

	brokers, err := testbed.ParseKafkaBrokersN(os.Getenv(testbed.EnvKafkaBrokersN))
	if err != nil {
		logf("testbed: %v", err)
		return 2
	}
	begin := time.Now()
	b, err := testbed.Start(ctx, testbed.Options{PG: true, Kafka: true, KafkaBrokers: brokers, Keep: *keep, Logf: logf})
	if err != nil {
		logf("testbed: %v", err)
		if sig := interrupted.Load(); sig != 0 {
			return 128 + int(sig)
		}
		return 2
	}
	logf("testbed: PostgreSQL %s and Kafka %s ready in %.1fs", b.PGVersion(), b.KafkaVersion(), time.Since(begin).Seconds())
	if *keep {
		for _, kv := range b.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Printf("export %s='%s'\n", k, v)
		}
		logf("testbed: servers left running; stop them with: go run ./test/cmd/testbed -stop %s", b.Dir())
		return 0
	}
	cancel() // from here on, signals go to the command

	code := runCommand(args, append(os.Environ(), b.Environ()...), signals, logf)
	stopBegin := time.Now()
	if err := b.Stop(); err != nil {
		logf("testbed: stop: %v", err)
		if code == 0 {
			code = 1
		}
	} else {
		logf("testbed: servers stopped in %.1fs (%.1fs in all)", time.Since(stopBegin).Seconds(), time.Since(begin).Seconds())
	}
	return code
}

// runCommand runs args with env, passing signals on, and returns its exit
// code (128+signal when a signal ended it).
func runCommand(args, env []string, signals <-chan os.Signal, logf func(string, ...any)) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		logf("testbed: %v", err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		forwarded := false
		for {
			select {
			case s := <-signals:
				// A second signal kills the command: a child that inherited an
				// ignored SIGINT (a background job of a script) would keep
				// the servers up indefinitely.
				if forwarded {
					logf("testbed: second signal: killing %s", args[0])
					_ = cmd.Process.Kill()
				} else {
					_ = cmd.Process.Signal(s)
					forwarded = true
				}
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exitErr.ExitCode()
	default:
		logf("testbed: %v", err)
		return 1
	}
}
