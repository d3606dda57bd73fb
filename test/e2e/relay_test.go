package e2e

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
)

// env is one test's database, slot, publication and aggregate-type prefix
// (harness.Env), and how to reach servers other than the bed's.
type env struct {
	*harness.Env

	// Set for servers other than the bed's plaintext ones: the brokers
	// walrelay and the collector use (default: the bed's), the file walrelay
	// reads the DSN from instead of --pg-url dsn, and the collector's extra
	// client options (TLS, SASL).
	brokers   []string
	pgURLFile string
	kafkaOpts []kgo.Opt
}

func (e *env) kafkaBrokers() []string {
	if len(e.brokers) > 0 {
		return e.brokers
	}
	return e.Bed.Brokers()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{Env: harness.NewEnv(t, relayBin)}
}

// topicRE matches every topic this test's records go to.
func (e *env) topicRE() string {
	return `^outbox\.event\.` + regexp.QuoteMeta(e.Prefix)
}

type relayProc struct {
	*harness.Relay
	t   *testing.T
	env *env
}

// startRelay runs the walrelay binary against e with args added to the
// defaults.
func (e *env) startRelay(t *testing.T, args ...string) *relayProc {
	t.Helper()
	return e.startRelayEnv(t, nil, args...)
}

// startRelayEnv is startRelay with environ (NAME=value) added to the
// process's environment.
func (e *env) startRelayEnv(t *testing.T, environ []string, args ...string) *relayProc {
	t.Helper()
	pgURL := []string{"--pg-url", e.DSN}
	if e.pgURLFile != "" {
		pgURL = []string{"--pg-url-file", e.pgURLFile}
	}
	all := append(e.RunArgs(pgURL, e.kafkaBrokers()), args...)
	p := &relayProc{Relay: harness.StartProcess(t, relayBin, environ, all), t: t, env: e}
	t.Cleanup(func() {
		if t.Failed() && !p.Exited() {
			p.dumpMetrics()
		}
	})
	return p
}

// dumpMetrics logs walrelay's own metrics, to show where a stuck pipeline
// stands.
func (p *relayProc) dumpMetrics() {
	addr, ok := p.LoggedHTTPAddr()
	if !ok {
		return
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		p.t.Logf("walrelay /metrics: %v", err)
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
	p.t.Logf("walrelay metrics:\n%s", strings.Join(lines, "\n"))
}

type partition struct {
	topic string
	p     int32
}

// collector is a real franz-go consumer reading every partition of the
// test's topics from the start, as they appear.
type collector struct {
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

func (e *env) collect(t *testing.T) *collector {
	t.Helper()
	return e.collectRE(t, e.topicRE())
}

// collectRE reads every topic matching the regular expression re.
func (e *env) collectRE(t *testing.T, re string) *collector {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(e.kafkaBrokers()...),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(re),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMaxAge(time.Second),
		kgo.MetadataMinAge(200 * time.Millisecond),
		kgo.FetchMaxBytes(64 << 20),
		kgo.FetchMaxPartitionBytes(32 << 20),
	}, e.kafkaOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{t: t, cl: cl, re: regexp.MustCompile(re), next: map[partition]int64{}, cond: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
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
				c.recs = append(c.recs, got...)
				for _, r := range got {
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

// Len is the number of records read so far.
func (c *collector) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// Records returns a copy of what was read.
func (c *collector) Records() []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*kgo.Record(nil), c.recs...)
}

// WaitFor waits until at least n records were read, failing after timeout.
func (c *collector) WaitFor(n int, timeout time.Duration) []*kgo.Record {
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

// endOffsets describes how many records each of the collector's topics
// holds, to tell a slow consumer from records that never arrived.
func (c *collector) endOffsets() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, n := range topics.Names() {
		if c.re.MatchString(n) {
			names = append(names, n)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return err.Error()
	}
	var out []string
	ends.Each(func(o kadm.ListedOffset) {
		out = append(out, fmt.Sprintf("%s[%d]=%d", o.Topic, o.Partition, o.Offset))
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

// ToEnd lists the end offsets of the collector's topics, waits until the
// consumer has read every partition up to them, and returns the records
// below them: everything Kafka holds at the time of the call, no matter how
// quiet it has been. It fails after two minutes, saying what the topics
// hold.
func (c *collector) ToEnd() []*kgo.Record {
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

// ends returns the end offset of each partition of the collector's topics
// that holds records.
func (c *collector) ends() map[partition]int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		c.t.Fatalf("list topics: %v", err)
	}
	var names []string
	for _, n := range topics.Names() {
		if c.re.MatchString(n) {
			names = append(names, n)
		}
	}
	out := map[partition]int64{}
	if len(names) == 0 {
		return out
	}
	listed, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		c.t.Fatalf("list end offsets of %v: %v", names, err)
	}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			c.t.Fatalf("end offset of %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			out[partition{o.Topic, o.Partition}] = o.Offset
		}
	})
	return out
}

// murmur2 is Kafka's Utils.murmur2, written out independently of franz-go
// to check the partition a Java producer would choose.
func murmur2(data []byte) int32 {
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

// javaPartition is Kafka's default partition for a keyed record.
func javaPartition(key []byte, partitions int) int32 {
	return (murmur2(key) & 0x7fffffff) % int32(partitions)
}

// WaitStreaming waits until this process holds the slot: from then on every
// commit is in the slot and reaches Kafka.
func (p *relayProc) WaitStreaming() {
	p.t.Helper()
	harness.WaitFor(p.t, time.Minute, "walrelay to stream the slot", func() bool {
		if p.Exited() {
			p.t.Fatalf("walrelay exited before streaming")
		}
		// N.B. the backend creating the slot holds it too, until the slot
		// reaches its consistent point; only a walsender means streaming.
		var n int
		if err := p.env.Bed.QueryRow(p.t, p.env.DSN, `SELECT count(*) FROM pg_replication_slots r
			JOIN pg_stat_activity a ON a.pid = r.active_pid
			WHERE r.slot_name = $1 AND a.backend_type = 'walsender'`, p.env.Slot).Scan(&n); err != nil {
			p.t.Fatalf("read the walsender of slot %s: %v", p.env.Slot, err)
		}
		return n == 1
	})
}

// Get fetches a path from walrelay's HTTP server.
func (p *relayProc) Get(path string) (int, string) {
	p.t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric returns the value of one sample of /metrics, e.g.
// walrelay_events_published_total{topic="x"}, summing samples when the
// name has no labels and several label sets exist.
func (p *relayProc) Metric(name string) float64 {
	p.t.Helper()
	v, ok := p.MetricOK(name)
	if !ok {
		p.t.Fatalf("metric %s not in /metrics", name)
	}
	return v
}

// MetricOK is Metric for a series that may not exist yet.
func (p *relayProc) MetricOK(name string) (float64, bool) {
	p.t.Helper()
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
				p.t.Fatalf("metric %s: %v", line, err)
			}
			sum += v
			found = true
		}
	}
	return sum, found
}
