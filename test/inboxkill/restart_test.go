package inboxkill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/testbed"
)

// TestRestartTimes measures, for the example consumer (a separate
// process), the time from a member's kill -9 to every partition of the
// topic being handled again, the killed member restarted at once: one
// member, and one of two. A figure per case (RESULT lines), not a
// threshold. Static membership (the default instance id, the host name,
// for one member; m-0 and m-1 for two on this host); WALRELAY_CHAOS=1 adds
// dynamic membership (--instance-id -), which waits for the killed
// member's session timeout (45 s, kgo's default).
func TestRestartTimes(t *testing.T) {
	type restartCase struct {
		name string
		ids  []string // the members' --instance-id; the last is killed
	}
	cases := []restartCase{
		{"one member, static (default instance id)", []string{""}},
		{"two members, static", []string{"m-0", "m-1"}},
	}
	if os.Getenv("WALRELAY_CHAOS") != "" {
		cases = append(cases, restartCase{"one member, dynamic", []string{"-"}}, restartCase{"two members, dynamic", []string{"-", "-"}})
	}
	b := testbed.Get(t)
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			d := restartTime(t, b, c.ids)
			t.Logf("RESULT inbox restart: %s: kill -9 to all 6 partitions handled again: %s", c.name, d.Round(10*time.Millisecond))
		})
	}
}

func restartTime(t *testing.T, b *testbed.Bed, ids []string) time.Duration {
	dsn := b.NewDatabase(t)
	topic, group := "restart_"+harness.Uniq(), "g_"+harness.Uniq()
	b.CreateTopic(t, topic, 6)
	start := func(id string) *harness.Relay {
		return harness.StartProcess(t, consumerBin, nil, []string{
			"--pg-url", dsn, "--brokers", strings.Join(b.Brokers(), ","), "--group", group, "--topics", topic, "--instance-id", id,
		})
	}
	check := harness.Connect(t, dsn)
	defer check.Close(context.Background())
	members := make([]*harness.Relay, len(ids))
	defer func() {
		for _, m := range members {
			if m != nil {
				m.Stop(time.Minute)
			}
		}
	}()
	for i, id := range ids {
		members[i] = start(id)
		if i == 0 {
			// N.B. one CREATE TABLE IF NOT EXISTS at a time: two
			// concurrent ones of one table can fail (23505 on pg_type).
			harness.WaitFor(t, time.Minute, "the projection's tables", func() bool {
				if members[0].Exited() {
					t.Fatalf("the consumer exited: %v", members[0].Err())
				}
				var ok bool
				if err := check.QueryRow(context.Background(), `SELECT to_regclass('inbox_processed') IS NOT NULL`).Scan(&ok); err != nil {
					t.Fatal(err)
				}
				return ok
			})
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// probe produces one record to each partition and waits until the
	// consumer applied all six.
	probe := func(n int) {
		var recs []*kgo.Record
		for p := range int32(6) {
			id := fmt.Sprintf("probe-%d-%d", n, p)
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte(id), Value: []byte(`{}`),
				Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "eventType", Value: []byte("Probe")}}})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("probe %d applied on all 6 partitions", n), func() bool {
			for _, m := range members {
				if m.Exited() {
					t.Fatalf("a consumer exited: %v", m.Err())
				}
			}
			var k int
			err := check.QueryRow(context.Background(), `SELECT count(*) FROM event_log WHERE event_id LIKE $1`, fmt.Sprintf("probe-%d-%%", n)).Scan(&k)
			var pgErr *pgconn.PgError
			if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P01") { // not created yet
				t.Fatalf("count probes: %v", err)
			}
			return k == 6
		})
	}
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d members owning partitions", len(ids)), func() bool {
		return membersAssigned(t, cl, group) == len(ids)
	})
	probe(1)
	last := len(members) - 1
	members[last].Kill()
	killed := time.Now()
	members[last] = start(ids[last])
	probe(2)
	return time.Since(killed)
}

// membersAssigned is how many members of group own partitions.
func membersAssigned(t *testing.T, cl *kgo.Client, group string) int {
	t.Helper()
	groups, err := kadm.NewClient(cl).DescribeGroups(context.Background(), group)
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range groups[group].Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				if len(tp.Partitions) > 0 {
					n++
					break
				}
			}
		}
	}
	return n
}
