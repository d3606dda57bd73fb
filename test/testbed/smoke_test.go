package testbed_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/test/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }

func TestVersions(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	if v := b.PGVersion(); v == "" || strings.ContainsAny(v, " (") {
		t.Errorf("PGVersion() = %q, want a bare version such as 15.18", v)
	}
	if b.KafkaVersion() == "" {
		t.Error("KafkaVersion() is empty")
	}
	t.Logf("PostgreSQL %s, Kafka %s", b.PGVersion(), b.KafkaVersion())
}

// TestPostgresLogicalReplication streams an insert through a pgoutput slot,
// the way walrelay reads the outbox.
func TestPostgresLogicalReplication(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	dsn := b.NewDatabase(t)
	b.Exec(t, dsn, `
		CREATE TABLE outbox (id int PRIMARY KEY, aggregateid text NOT NULL, payload jsonb);
		CREATE PUBLICATION pub FOR TABLE outbox WITH (publish = 'insert');`)
	b.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('smoke', 'pgoutput')`)

	slot := b.Slot(t, dsn, "smoke")
	if !slot.Exists || slot.Active || slot.Plugin != "pgoutput" || slot.ConfirmedFlushLSN == 0 {
		t.Fatalf("slot after creation = %+v, want an inactive pgoutput slot with a confirmed_flush_lsn", slot)
	}
	if want := strings.TrimPrefix(dsnDatabase(t, dsn), "/"); slot.Database != want {
		t.Fatalf("slot database = %q, want %q", slot.Database, want)
	}
	if b.Slot(t, dsn, "no_such_slot").Exists {
		t.Fatal("Slot reports a slot that does not exist")
	}

	b.Exec(t, dsn, `INSERT INTO outbox VALUES (7, 'order-42', '{"total": 12}')`)
	if lsn := b.CurrentWALLSN(t, dsn); lsn <= slot.ConfirmedFlushLSN {
		t.Fatalf("CurrentWALLSN %s not past the slot's %s after an insert", lsn, slot.ConfirmedFlushLSN)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, testbed.ReplicationDSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = pglogrepl.StartReplication(ctx, conn, "smoke", slot.ConfirmedFlushLSN, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'pub'"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Slot(t, dsn, "smoke"); !s.Active || s.ActivePID == 0 {
		t.Errorf("slot while streaming = %+v, want active with a pid", s)
	}

	var rel *pglogrepl.RelationMessage
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			t.Fatalf("unexpected message %T", msg)
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			if ka.ReplyRequested {
				// N.B. no progress to report: every position is the start.
				err = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
					WALWritePosition: slot.ConfirmedFlushLSN,
					WALFlushPosition: slot.ConfirmedFlushLSN,
					WALApplyPosition: slot.ConfirmedFlushLSN,
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			m, err := pglogrepl.Parse(xld.WALData)
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *pglogrepl.RelationMessage:
				rel = m
			case *pglogrepl.InsertMessage:
				if rel == nil || rel.RelationID != m.RelationID || rel.RelationName != "outbox" {
					t.Fatalf("insert into relation %d without its Relation message (have %+v)", m.RelationID, rel)
				}
				got := map[string]string{}
				for i, c := range m.Tuple.Columns {
					got[rel.Columns[i].Name] = string(c.Data)
				}
				want := map[string]string{"id": "7", "aggregateid": "order-42", "payload": `{"total": 12}`}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("inserted row = %v, want %v", got, want)
				}
				return
			}
		}
	}
}

func dsnDatabase(t *testing.T, dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

func TestQueryRowNoRows(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	var n int
	err := b.QueryRow(t, b.PGURL(), "SELECT 1 WHERE false").Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("Scan of an empty result = %v, want pgx.ErrNoRows", err)
	}
	if err := b.QueryRow(t, b.PGURL(), "SELECT $1::int + 1", 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("SELECT 41 + 1 = %d, %v", n, err)
	}
}

// TestKafkaProduceConsume produces a keyed record with headers the way
// walrelay's sink must (acks from all ISRs, idempotent) and reads it back.
func TestKafkaProduceConsume(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	// N.B. a topic of its own each run: a kept bed keeps the last run's.
	topic := fmt.Sprintf("smoke.%s.%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	b.CreateTopic(t, topic, 3)

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.Brokers()...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default
		kgo.ProducerBatchMaxBytes(4<<20),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := &kgo.Record{
		Topic: topic,
		Key:   []byte("order-42"),
		Value: []byte(`{"total": 12}`),
		Headers: []kgo.RecordHeader{
			{Key: "id", Value: []byte("8d4b7e1c")},
			{Key: "eventType", Value: []byte("OrderCreated")},
		},
	}
	if err := cl.ProduceSync(ctx, want).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// A 1 MiB value that does not compress: over Kafka's default
	// message.max.bytes, within the bed's 16 MiB.
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("order-42"), Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce 1 MiB record: %v", err)
	}

	recs := b.ConsumeAll(t, []string{topic, "smoke.does.not.exist"}, 500*time.Millisecond)
	if len(recs) != 2 {
		t.Fatalf("consumed %d records, want 2", len(recs))
	}
	got := recs[0]
	if got.Topic != topic || string(got.Key) != "order-42" || string(got.Value) != string(want.Value) {
		t.Errorf("record = %s %q %q, want %s %q %q", got.Topic, got.Key, got.Value, topic, want.Key, want.Value)
	}
	if fmt.Sprint(headers(got)) != fmt.Sprint(headers(want)) {
		t.Errorf("headers = %v, want %v", headers(got), headers(want))
	}
	if recs[1].Partition != got.Partition || recs[1].Offset != got.Offset+1 || !bytes.Equal(recs[1].Value, big) {
		t.Errorf("second record at %d/%d (%d bytes), want the 1 MiB record after the first at %d/%d",
			recs[1].Partition, recs[1].Offset, len(recs[1].Value), got.Partition, got.Offset+1)
	}

	if recs := b.ConsumeAll(t, []string{"smoke.does.not.exist"}, 200*time.Millisecond); len(recs) != 0 {
		t.Errorf("consumed %d records from a topic that does not exist", len(recs))
	}
}

func headers(r *kgo.Record) []string {
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return hs
}

// TestConsumeAllPassesTransactionMarkers: a partition whose last offset is a
// transaction's marker (a control record, which consumers do not return) is
// read to its end by ConsumeAll and ConsumeAllCommitted alike. ConsumeAll
// once waited out its two minutes on one: walrelay --exactly-once leaves a
// marker after each commit.
func TestConsumeAllPassesTransactionMarkers(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	topic, cl, ctx := transactionalTopic(t, b)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(fmt.Sprint(bool(commit)))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	// Offsets 0 and 2 hold the records, 1 and 3 their markers.
	all := b.ConsumeAll(t, []string{topic}, 0)
	if len(all) != 2 || string(all[0].Value) != "true" || string(all[1].Value) != "false" {
		t.Errorf("ConsumeAll: %d records, want the committed and the aborted one", len(all))
	}
	committed, control := b.ConsumeAllCommitted(t, []string{topic}, 0)
	if len(committed) != 1 || string(committed[0].Value) != "true" || len(control) != 2 {
		t.Errorf("ConsumeAllCommitted: %d records and %d markers, want the committed record and 2 markers", len(committed), len(control))
	}
}

// TestSettledReadWaitsForUndecidedTransactions: a read_committed read stops
// below a transaction the broker has not decided, as it does in the moments
// after a commit returned and before the broker wrote its markers (the
// exactly-once timestamp test once read 83 confirmed events as missing
// there); with Settled it waits for the decision instead, and returns the
// records once the transaction commits.
func TestSettledReadWaitsForUndecidedTransactions(t *testing.T) {
	t.Parallel()
	b := testbed.Get(t)
	topic, cl, ctx := transactionalTopic(t, b)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	recs, _, err := testbed.ReadToEnd(ctx, b.Brokers(), []string{topic}, testbed.ReadOptions{Committed: true})
	if err != nil || len(recs) != 0 {
		t.Errorf("read_committed with the transaction open: %d records, error %v; want none, at once", len(recs), err)
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	recs, _, err = testbed.ReadToEnd(short, b.Brokers(), []string{topic}, testbed.ReadOptions{Committed: true, Settled: true})
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), topic+"/0 stable at 0 of 1") {
		t.Errorf("settled read with the transaction open: %d records, error %v; want it to wait for the decision and name %s/0", len(recs), err, topic)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("end transaction: %v", err)
	}
	got, control := b.ConsumeAllSettled(t, []string{topic}, 0)
	if len(got) != 1 || string(got[0].Value) != "v" || len(control) != 1 {
		t.Errorf("settled read after the commit: %d records and %d markers, want the record and its marker", len(got), len(control))
	}
}

// transactionalTopic creates a topic of one partition for the test and a
// transactional producer to it, closed when the test ends, and a context
// of a minute for the test's requests.
func transactionalTopic(t *testing.T, b *testbed.Bed) (string, *kgo.Client, context.Context) {
	topic := fmt.Sprintf("smoke.%s.%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	b.CreateTopic(t, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers()...), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return topic, cl, ctx
}
