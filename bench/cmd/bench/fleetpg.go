package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/proc"
)

// fleetPG is a PostgreSQL of the fleet workload's own: the bed's (64 slots
// and walsenders, 200 connections, test/testbed/postgres.go) takes ~43
// pipelines, and the bed's defaults stay as every test expects them. It
// runs the bed's binaries as the bed's server's OS user, with the same
// settings but the replication and connection limits.
type fleetPG struct {
	url  string
	bin  string
	data string
	cred *syscall.Credential
	p    *proc.Proc
}

// fleetPostgresFor starts a PostgreSQL for n pipelines and d drains: a
// slot and a walsender per pipeline (and three per drain: walrelay's,
// walrelay-before's and pg_recvlogical's), four connections per pipeline
// (walrelay's three and a writer's) and room for the bench's own.
func (b *bench) fleetPostgresFor(ctx context.Context, n, d int) (*fleetPG, error) {
	bin := b.env.PGBinDir
	if bin == "" {
		p, err := exec.LookPath("postgres")
		if err != nil {
			return nil, fmt.Errorf("fleet postgres: find postgres: %w", err)
		}
		bin = filepath.Dir(p)
	}
	cred, err := pgCredential(b.env.PGPID)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "walrelay-fleet-pg-")
	if err != nil {
		return nil, err
	}
	f := &fleetPG{bin: bin, data: filepath.Join(dir, "data"), cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", f.data, "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C", "-A", "trust")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fleet postgres: initdb: %w\n%s", err, out)
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	slots := n + 3*d + 10
	f.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	args := []string{"-D", f.data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "wal_level=logical",
		"-c", "max_replication_slots=" + strconv.Itoa(slots),
		"-c", "max_wal_senders=" + strconv.Itoa(slots),
		"-c", "max_connections=" + strconv.Itoa(4*n+3*d+60),
		"-c", "fsync=off", "-c", "wal_sender_timeout=60s", "-c", "logging_collector=off"}
	f.p, err = proc.Start(proc.Options{Name: "postgres (fleet)", Path: filepath.Join(bin, "postgres"), Args: args,
		Dir: dir, Log: filepath.Join(b.logDir("logs"), "fleet-postgres.log"), Group: true, Credential: cred, DeathSignal: syscall.SIGQUIT})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		conn, err := pgconn.Connect(wctx, f.url)
		if err == nil {
			conn.Close(ctx)
			logf("fleet: own PostgreSQL on port %d: max_replication_slots and max_wal_senders %d, max_connections %d", port, slots, 4*n+3*d+60)
			return f, nil
		}
		select {
		case <-f.p.Done():
			return nil, fmt.Errorf("fleet postgres exited: %v\n%s", f.p.Err(), f.p.Tail(20))
		case <-wctx.Done():
			f.stop()
			return nil, fmt.Errorf("fleet postgres: not accepting connections: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop shuts the server down and removes its directory.
func (f *fleetPG) stop() {
	cmd := exec.Command(filepath.Join(f.bin, "pg_ctl"), "stop", "-D", f.data, "-m", "fast", "-w", "-t", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		logf("fleet postgres: pg_ctl stop: %v\n%s", err, out)
		_ = f.p.Kill()
	}
	_ = os.RemoveAll(filepath.Dir(f.data))
}

// pgCredential is the OS user the bed's postmaster (pid) runs as, when
// this process is root (PostgreSQL refuses to run as root); nil otherwise.
func pgCredential(pid int) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if pid == 0 {
		return nil, errors.New("fleet postgres: the bed's postmaster pid is unknown, and PostgreSQL refuses to run as root")
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("fleet postgres: read the bed's postmaster's user: %w", err)
	}
	var uid, gid uint64
	for _, l := range strings.Split(string(st), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		switch fs[0] {
		case "Uid:":
			uid, err = strconv.ParseUint(fs[1], 10, 32)
		case "Gid:":
			gid, err = strconv.ParseUint(fs[1], 10, 32)
		}
		if err != nil {
			return nil, fmt.Errorf("fleet postgres: parse %s: %w", fs[0], err)
		}
	}
	if uid == 0 {
		return nil, errors.New("fleet postgres: the bed's postmaster runs as root")
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
