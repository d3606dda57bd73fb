package e2etest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// Env is one test's database, slot, publication and aggregate-type prefix
// (harness.Env), and how to reach servers other than the bed's.
type Env struct {
	*harness.Env

	// Set for servers other than the bed's plaintext ones: the brokers
	// walrelay and the Collector use (default: the bed's), the file walrelay
	// reads the DSN from instead of --pg-url dsn, and the Collector's extra
	// client options (TLS, SASL).
	Brokers   []string
	PGURLFile string
	KafkaOpts []kgo.Opt
}

func (e *Env) KafkaBrokers() []string {
	if len(e.Brokers) > 0 {
		return e.Brokers
	}
	return e.Bed.Brokers()
}

// NewEnv is harness.NewEnv with the walrelay binary Main built.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	return &Env{Env: harness.NewEnv(t, Bin)}
}

// TopicRE matches every topic this test's records go to.
func (e *Env) TopicRE() string {
	return `^outbox\.event\.` + regexp.QuoteMeta(e.Prefix)
}

// Proc is one walrelay process of a test (T) against Env; Env may be nil
// for a process started by harness.Env.StartRelay.
type Proc struct {
	*harness.Relay
	T   *testing.T
	Env *Env
}

// Start runs the walrelay binary against e with args added to the
// defaults.
func (e *Env) Start(t *testing.T, args ...string) *Proc {
	t.Helper()
	return e.StartEnv(t, nil, args...)
}

// StartEnv is Start with environ (NAME=value) added to the
// process's environment.
func (e *Env) StartEnv(t *testing.T, environ []string, args ...string) *Proc {
	t.Helper()
	pgURL := []string{"--pg-url", e.DSN}
	if e.PGURLFile != "" {
		pgURL = []string{"--pg-url-file", e.PGURLFile}
	}
	// N.B. with e.RelayArgs, as harness.Env.StartRelay: e.ExactlyOnce()
	// reaches every relay of the test.
	all := append(append(e.RunArgs(pgURL, e.KafkaBrokers()), e.RelayArgs...), args...)
	p := &Proc{Relay: harness.StartProcess(t, e.Bin, environ, all), T: t, Env: e}
	t.Cleanup(func() {
		if t.Failed() && !p.Exited() {
			p.dumpMetrics()
		}
	})
	return p
}

// dumpMetrics logs walrelay's own metrics, to show where a stuck pipeline
// stands.
func (p *Proc) dumpMetrics() {
	addr, ok := p.LoggedHTTPAddr()
	if !ok {
		return
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		p.T.Logf("walrelay /metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "walrelay_") && !strings.Contains(l, "_bucket{") {
			lines = append(lines, l)
		}
	}
	p.T.Logf("walrelay metrics:\n%s", strings.Join(lines, "\n"))
}

type partition struct {
	topic string
	p     int32
}

// Collector is a real franz-go consumer reading every partition of the
// test's topics from the start, as they appear.
type Collector struct {
	t    *testing.T
	cl   *kgo.Client
	re   *regexp.Regexp
	mu   sync.Mutex
	recs []*kgo.Record
	next map[partition]int64 // the offset after the last record read
	cond chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

func (e *Env) Collect(t *testing.T) *Collector {
	t.Helper()
	return e.CollectRE(t, e.TopicRE())
}

// CollectRE reads every topic matching the regular expression re.
func (e *Env) CollectRE(t *testing.T, re string) *Collector {
	t.Helper()
	cl, err := testbed.NewReader(e.KafkaBrokers(), false, append([]kgo.Opt{kgo.ConsumeRegex(), kgo.ConsumeTopics(re)}, e.KafkaOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Collector{t: t, cl: cl, re: regexp.MustCompile(re), next: map[partition]int64{}, cond: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				t.Logf("consumer: %s[%d]: %v", topic, p, err)
			})
			var got []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
			if len(got) > 0 {
				c.mu.Lock()
				for _, r := range got {
					// N.B. a transaction marker is not a record, but the
					// position passes it: ToEnd reaches an end offset
					// that follows a commit.
					if !r.Attrs.IsControl() {
						c.recs = append(c.recs, r)
					}
					c.next[partition{r.Topic, r.Partition}] = r.Offset + 1
				}
				c.mu.Unlock()
				select {
				case c.cond <- struct{}{}:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
		cl.Close()
	})
	return c
}

// Stop ends the reading (as the test's end does): for a collector whose
// topics a test deletes.
func (c *Collector) Stop() {
	c.stop()
	<-c.done
}

// Len is the number of records read so far.
func (c *Collector) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// Records returns a copy of what was read.
func (c *Collector) Records() []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*kgo.Record(nil), c.recs...)
}

// WaitFor waits until at least n records were read, failing after timeout.
func (c *Collector) WaitFor(n int, timeout time.Duration) []*kgo.Record {
	c.t.Helper()
	deadline := time.After(timeout)
	for c.Len() < n {
		select {
		case <-c.cond:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("read %d records within %s, want %d; the topics hold: %s", c.Len(), timeout, n, c.endOffsets())
		}
	}
	return c.Records()
}

// endOffsets describes how many records each of the Collector's topics
// holds, to tell a slow consumer from records that never arrived.
func (c *Collector) endOffsets() string {
	listed, err := c.listEnds(10 * time.Second)
	if err != nil {
		return err.Error()
	}
	var out []string
	for topic, ps := range listed {
		for p, end := range ps {
			out = append(out, fmt.Sprintf("%s[%d]=%d", topic, p, end))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// listEnds lists the end offsets of the Collector's topics (none when no
// topic exists yet).
func (c *Collector) listEnds(timeout time.Duration) (testbed.Ends, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// N.B. uncached: the consumer's metadata, listed before the relay
	// created its topic, left the topic out of ToEnd's listing while it
	// was younger than the client's MetadataMinAge (a make test saw 0 of
	// 10 backfilled records).
	topics, err := kadm.NewClient(c.cl).ListTopics(testbed.Uncached(ctx))
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var names []string
	for _, n := range topics.Names() {
		if c.re.MatchString(n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return testbed.ListEndOffsets(ctx, c.cl, false, names...)
}

// ToEnd lists the end offsets of the Collector's topics, waits until the
// consumer has read every partition up to them, and returns the records
// below them: everything Kafka holds at the time of the call, no matter how
// quiet it has been. It fails after two minutes, saying what the topics
// hold.
func (c *Collector) ToEnd() []*kgo.Record {
	c.t.Helper()
	ends := c.ends()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c.mu.Lock()
		var behind []string
		for p, end := range ends {
			if c.next[p] < end {
				behind = append(behind, fmt.Sprintf("%s[%d] at %d of %d", p.topic, p.p, c.next[p], end))
			}
		}
		var out []*kgo.Record
		if len(behind) == 0 {
			for _, r := range c.recs {
				if r.Offset < ends[partition{r.Topic, r.Partition}] {
					out = append(out, r)
				}
			}
		}
		c.mu.Unlock()
		if len(behind) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			sort.Strings(behind)
			c.t.Fatalf("the consumer has not read to the end offsets after 2 minutes: %s", strings.Join(behind, ", "))
		}
		select {
		case <-c.cond:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ends returns the end offset of each partition of the Collector's topics
// that holds records.
func (c *Collector) ends() map[partition]int64 {
	c.t.Helper()
	listed, err := c.listEnds(30 * time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[partition]int64{}
	for topic, ps := range listed {
		for p, end := range ps {
			if end > 0 {
				out[partition{topic, p}] = end
			}
		}
	}
	return out
}

// Murmur2 is Kafka's Utils.Murmur2, written out independently of franz-go
// to check the partition a Java producer would choose.
func Murmur2(data []byte) int32 {
	const seed uint32 = 0x9747b28c
	const m uint32 = 0x5bd1e995
	const r = 24
	length := len(data)
	h := seed ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch length % 4 {
	case 3:
		h ^= uint32(data[(length&^3)+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[(length&^3)+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[length&^3])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// JavaPartition is Kafka's default partition for a keyed record.
func JavaPartition(key []byte, partitions int) int32 {
	return (Murmur2(key) & 0x7fffffff) % int32(partitions)
}

// WaitStreaming waits until this process holds the slot: from then on every
// commit is in the slot and reaches Kafka.
func (p *Proc) WaitStreaming() {
	p.T.Helper()
	harness.WaitFor(p.T, time.Minute, "walrelay to stream the slot", func() bool {
		if p.Exited() {
			p.T.Fatalf("walrelay exited before streaming")
		}
		// N.B. the backend creating the slot holds it too, until the slot
		// reaches its consistent point; only a walsender means streaming.
		// (The walsender of a backfill's or recovery's
		// CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT holds it too, before
		// walrelay streams: those tests wait for WaitStreamingLogged.
		// pg_stat_replication's state would tell them apart, but it is
		// hidden from a role that is not the walsender's.)
		var n int
		if err := p.Env.Bed.QueryRow(p.T, p.Env.DSN, `SELECT count(*) FROM pg_replication_slots r
			JOIN pg_stat_activity a ON a.pid = r.active_pid
			WHERE r.slot_name = $1 AND a.backend_type = 'walsender'`, p.Env.Slot).Scan(&n); err != nil {
			p.T.Fatalf("read the walsender of slot %s: %v", p.Env.Slot, err)
		}
		return n == 1
	})
}

// WaitStreamingLogged waits until this process logs that it streams
// (after START_REPLICATION): past a backfill or a recovery, whose
// CREATE_REPLICATION_SLOT walsender holds the slot before.
func (p *Proc) WaitStreamingLogged() {
	p.T.Helper()
	harness.WaitFor(p.T, 2*time.Minute, "walrelay to log that it streams", func() bool {
		if p.Exited() {
			p.T.Fatalf("walrelay exited before streaming")
		}
		return strings.Contains(p.Log(), `"msg":"streaming"`)
	})
}

// Get fetches a path from walrelay's HTTP server.
func (p *Proc) Get(path string) (int, string) {
	p.T.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + path)
	if err != nil {
		p.T.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric returns the value of one sample of /metrics, e.g.
// walrelay_events_published_total{topic="x"}, summing samples when the
// name has no labels and several label sets exist.
func (p *Proc) Metric(name string) float64 {
	p.T.Helper()
	v, ok := p.MetricOK(name)
	if !ok {
		p.T.Fatalf("metric %s not in /metrics", name)
	}
	return v
}

// MetricOK is Metric for a series that may not exist yet.
func (p *Proc) MetricOK(name string) (float64, bool) {
	p.T.Helper()
	_, body := p.Get("/metrics")
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series := line[:i]
		if series == name || !strings.Contains(name, "{") && strings.HasPrefix(series, name+"{") {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				p.T.Fatalf("metric %s: %v", line, err)
			}
			sum += v
			found = true
		}
	}
	return sum, found
}
