package testbed

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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/proc"
)

// StandbySlot is the physical slot the standby of a PGPair streams from; on
// 17+ the primary's synchronized_standby_slots names it.
const StandbySlot = "walrelay_standby"

// PGPair is a PostgreSQL primary and a physical standby of it, started for
// one test, independent of the bed's server: on 17+ the standby synchronizes
// failover slots (sync_replication_slots = on, hot_standby_feedback = on,
// primary_slot_name, dbname in primary_conninfo) and the primary waits for it
// before logical walsenders send a transaction (synchronized_standby_slots).
type PGPair struct {
	Major            string
	Primary, Standby *pgState
	dir              string
	base             []string // the servers' arguments before a role's
	sync             bool     // 17+: slot synchronization
	async            bool     // no synchronized_standby_slots (Asynchronous)
	settings         []string // both servers' -c arguments (Setting)
}

// PairOption changes how StartPGPair sets the pair up.
type PairOption func(*PGPair)

// Asynchronous leaves synchronized_standby_slots unset on the primary: its
// logical walsenders send transactions the standby has not received, so a
// consumer can get ahead of the standby (a configuration users run; walrelay
// only warns about it). The standby still synchronizes failover slots.
func Asynchronous() PairOption { return func(p *PGPair) { p.async = true } }

// Setting sets name = value on both servers of the pair, from their first
// start as a pair (e.g. track_commit_timestamp, which needs a restart).
func Setting(name, value string) PairOption {
	return func(p *PGPair) { p.settings = append(p.settings, "-c", name+"="+value) }
}

// StartPGPair starts a primary and a standby of PostgreSQL major (the
// machine's build, else the pinned build fetched into the cache) on free
// ports, seeded by copying the data directory of the cleanly stopped
// primary. Both are stopped when the test ends. It fails the test when a
// server cannot be had.
func StartPGPair(t testing.TB, major string, opts ...PairOption) *PGPair {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "walrelay-pgpair-")
	if err != nil {
		t.Fatal(err)
	}
	// N.B. the postgres OS user must reach its directories under it.
	for _, d := range []string{dir, filepath.Join(dir, "primary"), filepath.Join(dir, "standby")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &PGPair{Major: major, dir: dir}
	for _, o := range opts {
		o(p)
	}
	t.Cleanup(func() {
		for _, st := range []*pgState{p.Standby, p.Primary} {
			if st != nil {
				_ = st.stop()
				st.kill()
			}
		}
		if t.Failed() {
			for name, st := range map[string]*pgState{"primary": p.Primary, "standby": p.Standby} {
				if st != nil {
					t.Logf("testbed: last lines of the %s's log %s:\n%s", name, st.LogPath, proc.Tail(st.LogPath, 40))
				}
			}
		}
		os.RemoveAll(dir)
	})
	primary, err := startPostgres(ctx, filepath.Join(dir, "primary"), false, nil, major, func(f string, a ...any) { t.Logf(f, a...) })
	if err != nil {
		t.Fatalf("testbed: start PostgreSQL %s primary: %v", major, err)
	}
	p.Primary = primary
	sync := pgMajorNum(primary.Version) >= 17
	p.base = append(append([]string(nil), primary.Args...), p.settings...)
	p.sync = sync
	sdir := filepath.Join(dir, "standby", "pg")
	standby := *primary
	standby.DataDir = filepath.Join(sdir, "data")
	standby.SocketDir = filepath.Join(sdir, "sock")
	standby.LogPath = filepath.Join(sdir, "postgres.log")
	if standby.Port, err = proc.FreePort(); err != nil {
		t.Fatal(err)
	}
	standby.URL = strings.Replace(primary.URL, ":"+strconv.Itoa(primary.Port)+"/", ":"+strconv.Itoa(standby.Port)+"/", 1)
	u, err := lookupUser(primary.OSUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(standby.SocketDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := u.chown(sdir, standby.SocketDir); err != nil {
		t.Fatal(err)
	}
	p.Standby = &standby
	p.seed(t)
	t.Logf("testbed: PostgreSQL %s primary on port %d, standby on port %d (slot sync: %v)", primary.Version, primary.Port, standby.Port, sync)
	return p
}

// seed makes p.Standby a fresh standby of p.Primary, which runs and is
// stopped cleanly for the copy of its data directory, and starts both.
func (p *PGPair) seed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	primary, standby := p.Primary, p.Standby
	conn := connectPG(t, primary.URL)
	_, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true)
		WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, StandbySlot)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("testbed: create the standby's physical slot: %v", err)
	}
	if err := primary.stop(); err != nil {
		t.Fatalf("testbed: stop the primary to copy its data directory: %v", err)
	}
	u, err := lookupUser(primary.OSUser)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(standby.DataDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", primary.DataDir, standby.DataDir).CombinedOutput(); err != nil {
		t.Fatalf("testbed: copy the primary's data directory: %v\n%s", err, out)
	}
	// N.B. the primary's slots are not the standby's: it synchronizes the
	// failover slots itself.
	slots, _ := filepath.Glob(filepath.Join(standby.DataDir, "pg_replslot", "*"))
	for _, s := range slots {
		if err := os.RemoveAll(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeOwned(filepath.Join(standby.DataDir, "standby.signal"), nil, 0o600, u); err != nil {
		t.Fatal(err)
	}
	primary.Args = replaceArgs(p.base, map[string]string{"-D": primary.DataDir, "-p": strconv.Itoa(primary.Port), "-k": primary.SocketDir})
	standby.Args = replaceArgs(p.base, map[string]string{"-D": standby.DataDir, "-p": strconv.Itoa(standby.Port), "-k": standby.SocketDir})
	standby.Args = append(standby.Args,
		"-c", fmt.Sprintf("primary_conninfo=host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=standby", primary.Port),
		"-c", "primary_slot_name="+StandbySlot,
		"-c", "hot_standby=on",
		"-c", "hot_standby_feedback=on",
	)
	if p.sync {
		// N.B. in postgresql.auto.conf rather than on the command line, so
		// that StopSlotSync can turn it off with ALTER SYSTEM.
		auto := filepath.Join(standby.DataDir, "postgresql.auto.conf")
		f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY, 0o600)
		if err == nil {
			_, err = f.WriteString("sync_replication_slots = 'on'\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Fatalf("testbed: turn on slot synchronization on the standby: %v", err)
		}
		// N.B. only the primary waits for the standby: after a promotion
		// the new primary has no standby until one is seeded again.
		if !p.async {
			primary.Args = append(primary.Args, "-c", "synchronized_standby_slots="+StandbySlot)
		}
	}
	if err := primary.launch(ctx, false); err != nil {
		t.Fatalf("testbed: start the primary: %v", err)
	}
	if err := standby.launch(ctx, false); err != nil {
		t.Fatalf("testbed: start the standby: %v", err)
	}
	p.WaitReplayed(t)
}

// Rebuild makes the old primary (killed, its standby promoted) the standby
// of the new one: the new primary is stopped cleanly (clients see a
// restart), its data directory copied over the old one's, and both started.
func (p *PGPair) Rebuild(t testing.TB) {
	t.Helper()
	p.Primary.kill()
	p.Primary, p.Standby = p.Standby, p.Primary
	if err := os.Remove(filepath.Join(p.Primary.DataDir, "standby.signal")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	p.seed(t)
}

// replaceArgs returns args with the value after each flag in vals replaced.
func replaceArgs(args []string, vals map[string]string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if v, ok := vals[out[i]]; ok {
			out[i+1] = v
		}
	}
	return out
}

func pgMajorNum(version string) int {
	n, _ := strconv.Atoi(pgMajor(version))
	return n
}

func connectPG(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("testbed: connect to %s: %v", redactDSN(dsn), err)
	}
	return conn
}

// URL returns the multi-host connection string of database db on both
// servers that connects to whichever is the primary
// (target_session_attrs=read-write).
func (p *PGPair) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write", p.Primary.Port, p.Standby.Port, db)
}

// PrimaryURL and StandbyURL are the servers' own connection strings of db.
func (p *PGPair) PrimaryURL(db string) string { return mustWithDB(p.Primary.URL, db) }
func (p *PGPair) StandbyURL(db string) string { return mustWithDB(p.Standby.URL, db) }

func mustWithDB(dsn, db string) string {
	s, err := WithDatabase(dsn, db)
	if err != nil {
		panic(err)
	}
	return s
}

// WaitReplayed waits until the standby has replayed the primary's current
// WAL position.
func (p *PGPair) WaitReplayed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	pc := connectPG(t, p.Primary.URL)
	var lsn string
	err := pc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn)
	pc.Close(ctx)
	if err != nil {
		t.Fatalf("testbed: read the primary's WAL position: %v", err)
	}
	sc := connectPG(t, p.Standby.URL)
	defer sc.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		var done bool
		if err := sc.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)`, lsn).Scan(&done); err != nil {
			t.Fatalf("testbed: read the standby's replay position: %v", err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbed: the standby did not replay %s within a minute; its log:\n%s", lsn, proc.Tail(p.Standby.LogPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopSlotSync turns slot synchronization off on the standby
// (sync_replication_slots = off, reloaded): the standby keeps the slots it
// has synchronized, at the positions they have.
func (p *PGPair) StopSlotSync(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	conn := connectPG(t, p.Standby.URL)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER SYSTEM SET sync_replication_slots = off`); err != nil {
		t.Fatalf("testbed: turn off slot synchronization: %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatalf("testbed: reload the standby's configuration: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'slot sync worker'`).Scan(&n); err != nil {
			t.Fatalf("testbed: look for the slot sync worker: %v", err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testbed: the standby's slot sync worker still runs 30 s after sync_replication_slots was turned off")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopStandby stops the standby cleanly (what it received is flushed): the
// primary goes on without it and the standby falls behind.
func (p *PGPair) StopStandby(t testing.TB) {
	t.Helper()
	if err := p.Standby.stop(); err != nil {
		t.Fatalf("testbed: stop the standby: %v", err)
	}
}

// StartStandby starts the stopped standby again and waits until it takes
// connections; it streams from the primary when that runs.
func (p *PGPair) StartStandby(t testing.TB) {
	t.Helper()
	if err := p.Standby.launch(context.Background(), false); err != nil {
		t.Fatalf("testbed: start the standby: %v", err)
	}
}

// KillPrimary kills the primary's postmaster and every backend of it at once
// (SIGKILL to its process group): a crash, nothing flushed or sent after it.
func (p *PGPair) KillPrimary(t testing.TB) {
	t.Helper()
	if !p.Primary.kill() {
		t.Fatalf("testbed: kill the primary: no running postmaster in %s", p.Primary.DataDir)
	}
}

// Promote promotes the standby and waits until it takes writes.
func (p *PGPair) Promote(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	conn := connectPG(t, p.Standby.URL)
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil || !ok {
		t.Fatalf("testbed: promote the standby: %v (promoted: %v)", err, ok)
	}
}

// kill sends SIGKILL to the postmaster's process group, if it runs, and
// waits until the postmaster is gone; it reports whether one ran.
func (st *pgState) kill() bool {
	b, err := os.ReadFile(filepath.Join(st.DataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || !proc.Alive(pid, "postgres") {
		return false
	}
	// N.B. the postmaster leads its process group (procAttr): the group is
	// the server.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	proc.WaitGone(pid, "postgres", 10*time.Second)
	return true
}
