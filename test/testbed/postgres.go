package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/test/proc"
)

const pgInstallHint = "apt-get install -y postgresql"

// findPGBin returns the directory holding the postgres, initdb and pg_ctl
// binaries: the highest version under /usr/lib/postgresql/*/bin (Debian's
// layout), else `pg_config --bindir`, else the directory of postgres in PATH.
func findPGBin() (string, error) {
	ok := hasServerBinaries
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(matches, func(a, b string) int { // highest version first
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, dir := range matches {
		if ok(dir) {
			return dir, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); ok(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries (postgres, initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin, pg_config --bindir or PATH: %s", pgInstallHint)
}

// compareVersions compares dotted numeric versions such as "15" and "9.6".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// startPostgres initdbs a cluster of major version major ("": the machine's
// newest, see pgBinFor) under dir/pg and starts it on a free port; with sec
// set it takes TLS connections with SCRAM passwords only.
func startPostgres(ctx context.Context, dir string, detached bool, sec *PGSecurity, major string, logf func(string, ...any)) (*pgState, error) {
	bin, cached, err := pgBinFor(ctx, major, logf)
	if err != nil {
		return nil, err
	}
	u, err := postgresUser()
	if err != nil {
		return nil, err
	}
	pgDir := filepath.Join(dir, "pg")
	if cached && u.isSet() {
		// N.B. the cache is in root's home, which the postgres OS user
		// cannot traverse: it runs a hard-linked tree of the build instead.
		install := filepath.Join(pgDir, "install")
		if err := linkTree(filepath.Dir(bin), install); err != nil {
			return nil, fmt.Errorf("link PostgreSQL build into the bed: %w", err)
		}
		bin = filepath.Join(install, "bin")
	}
	st := &pgState{
		BinDir:    bin,
		DataDir:   filepath.Join(pgDir, "data"),
		SocketDir: filepath.Join(pgDir, "sock"),
		LogPath:   filepath.Join(pgDir, "postgres.log"),
		OSUser:    u.name,
	}
	if err := os.MkdirAll(st.SocketDir, 0o700); err != nil {
		return nil, err
	}
	if err := u.chown(pgDir, st.SocketDir); err != nil {
		return nil, err
	}

	auth := []string{"-A", "trust"}
	if sec != nil {
		pwFile, err := sec.writePasswordFile(pgDir, u)
		if err != nil {
			return nil, err
		}
		defer os.Remove(pwFile)
		auth = []string{"-A", "scram-sha-256", "--pwfile", pwFile}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		append([]string{"-D", st.DataDir, "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"}, auth...)...)
	initdb.Dir = pgDir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: u.credential()}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}

	if st.Port, err = proc.FreePort(); err != nil {
		return nil, err
	}
	st.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", st.Port)
	var secArgs []string
	if sec != nil {
		if secArgs, err = sec.serverFiles(pgDir, st.DataDir, u); err != nil {
			return nil, err
		}
		st.URL = sec.url(pgDir, st.Port)
	}
	st.Args = []string{
		"-D", st.DataDir,
		"-p", strconv.Itoa(st.Port),
		"-k", st.SocketDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "wal_level=logical",
		"-c", "max_replication_slots=64",
		"-c", "max_wal_senders=64",
		"-c", "max_connections=200",
		// N.B. fsync=off only skips flushing to disk; synchronous_commit stays
		// on, so a commit is in the WAL (and visible to walsenders) when it returns.
		"-c", "fsync=off",
		"-c", "wal_sender_timeout=60s",
		"-c", "logging_collector=off",
	}
	st.Args = append(st.Args, secArgs...)
	if err := st.launch(ctx, detached); err != nil {
		return nil, err
	}
	if st.Version, err = pgServerVersion(ctx, st.URL); err != nil {
		return nil, errors.Join(err, st.stop())
	}
	if got := pgMajor(st.Version); major != "" && got != major {
		return nil, errors.Join(fmt.Errorf("%s in %s is PostgreSQL %s, want %s", filepath.Join(bin, "postgres"), bin, st.Version, major), st.stop())
	}
	return st, nil
}

// launch starts postgres with st.Args and waits until it accepts connections.
func (st *pgState) launch(ctx context.Context, detached bool) error {
	u, err := lookupUser(st.OSUser)
	if err != nil {
		return err
	}
	p, err := proc.Start(proc.Options{
		Name: "postgres", Path: filepath.Join(st.BinDir, "postgres"), Args: st.Args,
		Dir: filepath.Dir(st.DataDir), Log: st.LogPath,
		Detached: detached, Group: true, Credential: u.credential(),
		// N.B. SIGQUIT is PostgreSQL's immediate shutdown: the postmaster
		// takes its backends down with it.
		DeathSignal: syscall.SIGQUIT,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var lastErr error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgconn.Connect(cctx, st.URL)
		ccancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		lastErr = err
		select {
		case <-p.Done():
			return fmt.Errorf("postgres exited during startup (%v); last lines of %s:\n%s", p.Err(), st.LogPath, proc.Tail(st.LogPath, 30))
		case <-ctx.Done():
			_ = p.Signal(syscall.SIGQUIT)
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("wait for postgres: %w", ctx.Err())
			}
			return fmt.Errorf("postgres did not accept connections on port %d within 60s (%v); last lines of %s:\n%s", st.Port, lastErr, st.LogPath, proc.Tail(st.LogPath, 30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop shuts the server down (fast mode: disconnect clients, checkpoint).
// A server that is not running is not an error.
func (st *pgState) stop() error {
	if _, err := os.Stat(filepath.Join(st.DataDir, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	u, err := lookupUser(st.OSUser)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(st.BinDir, "pg_ctl"), "stop", "-D", st.DataDir, "-m", "fast", "-w", "-t", "60")
	cmd.Dir = filepath.Dir(st.DataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.credential()}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// pgServerVersion asks the server for its version, e.g. "15.18".
func pgServerVersion(ctx context.Context, dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var v, walLevel string
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('wal_level')").Scan(&v, &walLevel); err != nil {
		return "", fmt.Errorf("query server_version: %w", err)
	}
	if walLevel != "logical" {
		return "", fmt.Errorf("PostgreSQL at %s has wal_level=%s; the tests need wal_level=logical", redactDSN(dsn), walLevel)
	}
	// "15.18 (Debian 15.18-0+deb12u1)" -> "15.18"
	v, _, _ = strings.Cut(v, " ")
	return v, nil
}

// pgMajor returns the major version of a server version such as "15.18" or
// "18beta1".
func pgMajor(version string) string {
	end := strings.IndexFunc(version, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		return version
	}
	return version[:end]
}

// redactDSN hides the password of a URL-style DSN.
func redactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
