package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The inbox workload's flags, here with the workload (not in config).
var (
	inboxConsumer = flag.String("inbox-consumer", envOr("BENCH_INBOX_CONSUMER", ""), "inbox: the bench/cmd/inboxbench binary (default: built from ./bench/cmd/inboxbench) (BENCH_INBOX_CONSUMER)")
	inboxBefore   = flag.String("inbox-before", envOr("BENCH_INBOX_BEFORE", ""), "inbox: a second inboxbench binary built against an older package inbox (make bench: INBOX_BEFORE=<rev>), run side by side (BENCH_INBOX_BEFORE)")
	inboxRecords  = flag.Int("inbox-records", atoiOr(envOr("BENCH_INBOX_RECORDS", ""), 6000), "inbox: records in each backlog (BENCH_INBOX_RECORDS)")
	inboxDelays   = flag.String("inbox-delays", envOr("BENCH_INBOX_DELAYS", "0ms,2ms"), "inbox: the Handler's own work per record, one backlog each (BENCH_INBOX_DELAYS)")
	inboxKeys     = flag.String("inbox-keys", envOr("BENCH_INBOX_KEYS", "even,skewed"), "inbox: how the 60 keys spread over the 6 partitions, one set of backlogs each: even (10 keys a partition, chosen with Kafka's murmur2 partitioner) or skewed (k0..k59 as they hash) (BENCH_INBOX_KEYS)")
)

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}

// inboxPartitions is the topics' partitions: the 6.
const inboxPartitions = 6

// InboxRun is one consumer binary over one backlog of the inbox workload.
type InboxRun struct {
	Consumer   string  `json:"consumer"` // "after" (this tree) or "before" (-inbox-before)
	Kind       string  `json:"kind"`     // "backlog" or "kill -9"
	HandlerMS  float64 `json:"handler_ms"`
	Records    int     `json:"records"`
	Partitions int     `json:"partitions"`
	// Keys is the keys' spread (inboxKeyNames), PerPartition the records
	// each partition got, as the producer reported them.
	Keys         string `json:"keys"`
	PerPartition []int  `json:"records_per_partition"`
	// Seconds is from the first record applied to the last (the group's
	// join is not the consumer's throughput).
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_s"`
	// Kill -9 runs: the consumer killed with half the backlog applied and
	// started again at once.
	RestartS        float64 `json:"kill_to_applying_again_s,omitempty"`
	Duplicates      int64   `json:"duplicates_absorbed"`
	AppliedTwice    int64   `json:"effects_applied_twice"`
	Missing         int64   `json:"effects_missing"`
	Error           string  `json:"error,omitempty"`
	ConsumerVersion string  `json:"consumer_binary"`
}

// runInbox runs the inbox workload: for each consumer binary (before,
// after) and each handler delay, a backlog of records on 6 partitions
// consumed by one member (records/s); then, per binary, a backlog with a
// kill -9 of the consumer halfway (the duplicates the inbox table absorbed,
// effects applied twice and missing).
func (b *bench) runInbox(ctx context.Context) error {
	bins := []struct{ label, bin string }{}
	if *inboxBefore != "" {
		bins = append(bins, struct{ label, bin string }{"before", *inboxBefore})
	}
	after := *inboxConsumer
	if after == "" {
		after = filepath.Join(b.work, "inboxbench")
		logf("building bench/cmd/inboxbench")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", after, "./bench/cmd/inboxbench").CombinedOutput(); err != nil {
			return fmt.Errorf("build inboxbench: %w: %s", err, out)
		}
	}
	bins = append(bins, struct{ label, bin string }{"after", after})
	var delays []time.Duration
	for _, s := range strings.Split(*inboxDelays, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-inbox-delays %q: %w", s, err)
		}
		delays = append(delays, d)
	}
	var spreads []string
	for _, s := range strings.Split(*inboxKeys, ",") {
		s = strings.TrimSpace(s)
		if inboxKeyNames(s) == nil {
			return fmt.Errorf("-inbox-keys %q: want even or skewed", s)
		}
		spreads = append(spreads, s)
	}
	run := time.Now().Format("150405")
	var errs []error
	for _, k := range spreads {
		for _, d := range delays {
			for _, x := range bins {
				r := b.inboxBacklog(ctx, x.label, x.bin, k, d, false, run)
				b.res.Inbox = append(b.res.Inbox, r)
				if r.Error != "" {
					errs = append(errs, fmt.Errorf("inbox %s %s %s keys: %s", x.label, d, k, r.Error))
				}
			}
		}
	}
	// N.B. the kill with the first spread's keys (even by default) and the
	// last delay.
	for _, x := range bins {
		r := b.inboxBacklog(ctx, x.label, x.bin, spreads[0], delays[len(delays)-1], true, run)
		b.res.Inbox = append(b.res.Inbox, r)
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("inbox %s kill: %s", x.label, r.Error))
		}
	}
	return errors.Join(errs...)
}

func (b *bench) inboxBacklog(ctx context.Context, label, bin, keys string, delay time.Duration, kill bool, run string) InboxRun {
	n := *inboxRecords
	res := InboxRun{Consumer: label, Kind: "backlog", HandlerMS: float64(delay) / float64(time.Millisecond), Records: n, Partitions: inboxPartitions,
		Keys: keys, ConsumerVersion: bin}
	if kill {
		res.Kind = "kill -9"
	}
	name := fmt.Sprintf("inbox_%s_%s_%s_%dms_%v", run, label, keys, delay.Milliseconds(), kill)
	if err := b.inboxRun(ctx, &res, bin, name, delay, kill); err != nil {
		res.Error = err.Error()
		logf("inbox %s: %v", name, err)
	} else {
		logf("inbox %s: %d records in %.2f s: %.0f records/s; duplicates absorbed %d, applied twice %d, missing %d",
			name, n, res.Seconds, res.RecordsPerSec, res.Duplicates, res.AppliedTwice, res.Missing)
	}
	return res
}

func (b *bench) inboxRun(ctx context.Context, res *InboxRun, bin, name string, delay time.Duration, kill bool) error {
	n := res.Records
	topic, group := name, name
	if err := b.adm.CreateTopics(ctx, inboxPartitions, nil, topic); err != nil {
		return err
	}
	per, err := inboxProduce(ctx, b.env.Brokers, topic, n, inboxKeyNames(res.Keys))
	if err != nil {
		return err
	}
	res.PerPartition = per
	db, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	// N.B. the consumer's sessions are named, so that a kill's count is
	// read once they ended (a commit sent before the kill may land after
	// it, and is not the restart's).
	u, err := url.Parse(b.dsn)
	if err != nil {
		return fmt.Errorf("parse the database URL: %w", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	pgURL := u.String()
	logPath := filepath.Join(b.logDir("inbox"), name+".log")
	start := func() (*exec.Cmd, error) {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--pg-url", pgURL, "--brokers", strings.Join(b.env.Brokers, ","), "--group", group, "--topics", topic,
			"--delay", delay.String())
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Start()
		f.Close()
		return cmd, err
	}
	applied := func() (int64, error) {
		var k int64
		err := db.QueryRow(ctx, `SELECT count(*) FROM inbox_bench_effects WHERE grp = $1`, group).Scan(&k)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // the first consumer has not created it yet
			return 0, nil
		}
		return k, err
	}
	// wait polls applied every 5 ms until it reaches at least want.
	wait := func(want int64, timeout time.Duration) (time.Time, error) {
		deadline := time.Now().Add(timeout)
		for {
			k, err := applied()
			if err != nil {
				return time.Time{}, err
			}
			if k >= want {
				return time.Now(), nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("%d of %d records applied after %s (log %s)", k, want, timeout, logPath)
			}
			if err := ctx.Err(); err != nil {
				return time.Time{}, err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cmd, err := start()
	if err != nil {
		return err
	}
	stop := func(c *exec.Cmd) {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
	first, err := wait(1, 2*time.Minute)
	if err != nil {
		stop(cmd)
		return err
	}
	if kill {
		if _, err := wait(int64(n/2), b.cfg.drainTimeout); err != nil {
			stop(cmd)
			return err
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		killed := time.Now()
		for sessions := 1; sessions > 0; time.Sleep(5 * time.Millisecond) {
			if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&sessions); err != nil {
				return err
			}
		}
		at, err := applied()
		if err != nil {
			return err
		}
		if cmd, err = start(); err != nil {
			return err
		}
		again, err := wait(at+1, 3*time.Minute)
		if err != nil {
			stop(cmd)
			return err
		}
		res.RestartS = again.Sub(killed).Seconds()
	}
	last, err := wait(int64(n), b.cfg.drainTimeout)
	stop(cmd)
	if err != nil {
		return err
	}
	res.Seconds = last.Sub(first).Seconds()
	res.RecordsPerSec = float64(n) / res.Seconds
	var distinct, total int64
	if err := db.QueryRow(ctx, `SELECT count(DISTINCT id), count(*) FROM inbox_bench_effects WHERE grp = $1`, group).Scan(&distinct, &total); err != nil {
		return err
	}
	res.AppliedTwice, res.Missing = total-distinct, int64(n)-distinct
	if err := db.QueryRow(ctx, `SELECT coalesce((SELECT n FROM inbox_bench_duplicates WHERE grp = $1), 0)`, group).Scan(&res.Duplicates); err != nil {
		return err
	}
	if res.AppliedTwice != 0 || res.Missing != 0 {
		return fmt.Errorf("effects applied twice %d, missing %d: want 0 and 0", res.AppliedTwice, res.Missing)
	}
	return nil
}

// inboxProduce writes n records to topic: record i has key keys[i %
// len(keys)], an id header, the value i. It returns how many records each
// partition got (the producer's answer: Kafka's default partitioner,
// murmur2 of the key).
func inboxProduce(ctx context.Context, brokers []string, topic string, n int, keys []string) ([]int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(keys[i%len(keys)]), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(fmt.Sprintf("%s-%d", topic, i))}}}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, err
	}
	per := make([]int, inboxPartitions)
	for _, r := range res {
		per[r.Record.Partition]++
	}
	return per, nil
}

// inboxKeyNames is the workload's 60 keys for spread (nil for an unknown
// one):
//
//   - skewed: k0..k59, as the workload had them first; Kafka's murmur2
//     puts 10, 9, 12, 6, 14 and 9 of them on the 6 partitions, so with
//     6,000 records the busiest partition has 1,400 and the backlog lasts
//     as long as its 1,400 records (per-partition order);
//   - even: 10 keys per partition, the first names k0, k1, ... that
//     murmur2 (kgo's StickyKeyPartitioner, Kafka's default) puts on each
//     partition, so each gets 1,000 of 6,000 records.
func inboxKeyNames(spread string) []string {
	const n = 60
	switch spread {
	case "skewed":
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		return keys
	case "even":
		// N.B. ordered round robin over the partitions (key i on
		// partition i mod 6), so any prefix of the records is spread
		// evenly too.
		part := kgo.StickyKeyPartitioner(nil).ForTopic("")
		byPart := make([][]string, inboxPartitions)
		for i, found := 0, 0; found < n; i++ {
			k := fmt.Sprintf("k%d", i)
			p := part.Partition(&kgo.Record{Key: []byte(k)}, inboxPartitions)
			if len(byPart[p]) < n/inboxPartitions {
				byPart[p] = append(byPart[p], k)
				found++
			}
		}
		keys := make([]string, 0, n)
		for i := 0; i < n/inboxPartitions; i++ {
			for p := range byPart {
				keys = append(keys, byPart[p][i])
			}
		}
		return keys
	}
	return nil
}

// inboxTable is the markdown of the inbox workload.
func inboxTable(res *Results) string {
	if len(res.Inbox) == 0 {
		return ""
	}
	var s strings.Builder
	s.WriteString("\n### Inbox consumer (package inbox, one member, 6 partitions)\n\n")
	s.WriteString("Before: the inbox before partitions were handled in parallel (-inbox-before); after: this tree. records/s from the first record applied to the last. ")
	s.WriteString("Keys: even, 10 of the 60 keys on each partition (chosen with Kafka's murmur2 partitioner); skewed, k0..k59 as they hash. ")
	s.WriteString("Per-partition order is kept, so a backlog lasts as long as its busiest partition.\n\n")
	s.WriteString("| consumer | run | keys | records per partition | handler ms | records | s | records/s | kill -9 to applying again s | duplicates absorbed | applied twice | missing |\n")
	s.WriteString("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Inbox {
		kind := r.Kind
		if r.Error != "" {
			kind += " (error: " + r.Error + ")"
		}
		restart := "–"
		if r.RestartS > 0 {
			restart = fmt.Sprintf("%.2f", r.RestartS)
		}
		per := make([]string, len(r.PerPartition))
		for i, k := range r.PerPartition {
			per[i] = strconv.Itoa(k)
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %g | %d | %.2f | %.0f | %s | %d | %d | %d |\n",
			r.Consumer, kind, r.Keys, strings.Join(per, " / "), r.HandlerMS, r.Records, r.Seconds, r.RecordsPerSec, restart, r.Duplicates, r.AppliedTwice, r.Missing)
	}
	return s.String()
}
