package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/bench/connect"
	"github.com/walrelay/walrelay/bench/internal/rig"
	"github.com/walrelay/walrelay/test/proc"
	"github.com/walrelay/walrelay/test/testbed"
)

const (
	stringConverter = "org.apache.kafka.connect.storage.StringConverter"
	jsonConverter   = "org.apache.kafka.connect.json.JsonConverter"
)

// configuration is one Debezium connector setup. edit changes the base
// connector (bench/internal/rig.DebeziumConnector with StringConverter
// key and value, header eventType from column type) for topic prefix
// pfx ("wr.NAME." or "dbz.NAME."); topics are the topics its records go
// to, after pfx.
type configuration struct {
	name, about string
	edit        func(conf map[string]string, pfx string)
	topics      []string
	checkRows   bool     // also compare each side with the rows as PostgreSQL renders them
	eventStamp  bool     // record timestamps come from the occurred column (compared with PostgreSQL's value)
	outboxes    []string // the outbox tables (table.include.list); default outbox and outbox_json
	otel        bool     // Debezium runs on the worker with OpenTelemetry's SDK (tracing.go); the trace headers are compared on their own
}

var withBytes = []string{"outbox", "outbox_json", "outbox_bytes"}

// tables are the configuration's outbox tables.
func (cf configuration) tables() []string {
	if cf.outboxes != nil {
		return cf.outboxes
	}
	return []string{"outbox", "outbox_json"}
}

var (
	aggTypes      = []string{"Order", "Customer", "shipment-v2", "payment.v1"}
	aggTypesBytes = append(aggTypes[:len(aggTypes):len(aggTypes)], "Blob")
)

func configurations() []configuration {
	return []configuration{
		{
			name: "string", about: "StringConverter key and value (the router's defaults, header eventType)",
			topics: aggTypes, checkRows: true,
		},
		{
			name: "json", about: "JsonConverter with schemas.enable=false for key and value",
			edit: func(c map[string]string, _ string) {
				c["key.converter"], c["key.converter.schemas.enable"] = jsonConverter, "false"
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "false"
			},
			topics: aggTypesBytes, outboxes: withBytes,
		},
		{
			name: "jsonschema", about: "JsonConverter with schemas.enable=true for key and value",
			edit: func(c map[string]string, _ string) {
				c["key.converter"], c["key.converter.schemas.enable"] = jsonConverter, "true"
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "true"
			},
			topics: aggTypesBytes, outboxes: withBytes,
		},
		{
			name: "bytes", about: "ByteArrayConverter value (bytea payloads), StringConverter key",
			edit: func(c map[string]string, _ string) {
				c["value.converter"] = "org.apache.kafka.connect.converters.ByteArrayConverter"
				// N.B. a heartbeat record's value is a Struct, which
				// ByteArrayConverter fails the task on: users of it run
				// without heartbeats.
				c["heartbeat.interval.ms"] = "0"
			},
			topics: []string{"Blob"}, outboxes: []string{"outbox_bytes"},
		},
		{
			name: "regex", about: "a custom route.topic.regex with named groups (one optional) and a replacement holding the prefix",
			edit: func(c map[string]string, pfx string) {
				c["transforms.outbox.route.topic.regex"] = `(?<domain>[A-Za-z]+)(?:[-.](?<ver>v[0-9]+))?`
				c["transforms.outbox.route.topic.replacement"] = pfx + "re.${domain}.x${ver}"
			},
			topics: []string{"re.Order.x", "re.Customer.x", "re.shipment.xv2", "re.payment.xv1"},
		},
		{
			name: "envelope", about: "JsonConverter (schemas off) with table.fields.additional.placement envelope fields (aliased and not) and a header",
			edit: func(c map[string]string, _ string) {
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "false"
				c["transforms.outbox.table.fields.additional.placement"] = "type:envelope:eventType,id:envelope,aggregatetype:header:kind"
				// N.B. the struct's name begins with topic.prefix: the same
				// on both sides (only Debezium's side runs on the worker),
				// and no other configuration's (independent).
				c["topic.prefix"] = "shop_env"
			},
			topics: aggTypes,
		},
		{
			name: "placement", about: "table.fields.additional.placement with partition (integer column; NULL: key hash) and table.field.event.timestamp (timestamp column; NULL: processing/commit time)",
			edit: func(c map[string]string, _ string) {
				c["transforms.outbox.table.fields.additional.placement"] = "type:header:eventType,part:partition"
				c["transforms.outbox.table.field.event.timestamp"] = "occurred"
			},
			topics: aggTypes[:3], outboxes: []string{"outbox_placed"}, eventStamp: true,
		},
		{
			name: "expand", about: "table.expand.json.payload=true with JsonConverter (schemas.enable=false): objects, arrays, nulls, [] and scalars",
			edit: func(c map[string]string, _ string) {
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "false"
				c["transforms.outbox.table.expand.json.payload"] = "true"
			},
			topics: aggTypes[:1], outboxes: []string{"outbox_expand"},
		},
		{
			name: "expandschema", about: "table.expand.json.payload=true with JsonConverter (schemas.enable=true): the schema Debezium infers from each payload",
			edit: func(c map[string]string, _ string) {
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "true"
				c["transforms.outbox.table.expand.json.payload"] = "true"
			},
			topics: aggTypes[:1], outboxes: []string{"outbox_expand"},
		},
		{
			name: "jsonenvelope", about: "JsonConverter (schemas on) with envelope fields (aliased and not) and a header: the router's struct schema",
			edit: func(c map[string]string, _ string) {
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "true"
				c["transforms.outbox.table.fields.additional.placement"] = "type:envelope:eventType,id:envelope,aggregatetype:header:kind"
				// N.B. the struct's name begins with topic.prefix: the same
				// on both sides, and no other configuration's (independent).
				c["topic.prefix"] = "shop_jenv"
			},
			topics: aggTypes,
		},
		{
			name: "versioned", about: "JsonConverter (schemas on) with an envelope field, table.field.event.schema.version (integer column, NULLs too) and expand.json.payload",
			edit: func(c map[string]string, _ string) {
				c["value.converter"], c["value.converter.schemas.enable"] = jsonConverter, "true"
				c["transforms.outbox.table.fields.additional.placement"] = "type:envelope:eventType"
				c["transforms.outbox.table.field.event.schema.version"] = "part"
				c["transforms.outbox.table.expand.json.payload"] = "true"
				c["topic.prefix"] = "shop_ver"
			},
			topics: aggTypes[:3], outboxes: []string{"outbox_placed"},
		},
		{
			name: "tracing", about: "tracing.span.context.field with OpenTelemetry's SDK on Debezium's Connect classpath: rows with a context (sampled, unsampled, with a tracestate), without, malformed and empty",
			edit: func(c map[string]string, _ string) {
				c["transforms.outbox.tracing.span.context.field"] = traceColumn
				c["transforms.outbox.tracing.operation.name"] = "debezium-read"
				c["transforms.outbox.tracing.with.context.field.only"] = "true"
			},
			topics: aggTypes[:2], outboxes: []string{tracedTable}, otel: true,
		},
		{
			name: "tombstone", about: "route.tombstone.on.empty.payload=true (StringConverter)",
			edit: func(c map[string]string, _ string) {
				c["transforms.outbox.route.tombstone.on.empty.payload"] = "true"
			},
			topics: aggTypes,
		},
	}
}

// rows are the committed rows of the configuration's outbox tables.
func (cf configuration) rows(all map[string]row) map[string]row {
	out := map[string]row{}
	for id, r := range all {
		if slices.Contains(cf.tables(), r.Table) {
			out[id] = r
		}
	}
	return out
}

// connector is configuration cf's Debezium connector for slot (and
// publication) slot and topic prefix pfx.
func (cf configuration) connector(dsn, slot, pfx string) (map[string]string, error) {
	conf, err := rig.DebeziumConnector(dsn, slot, slot, pfx+"${routedByValue}", time.Second)
	if err != nil {
		return nil, err
	}
	conf["table.include.list"] = "public." + strings.Join(cf.tables(), ",public.")
	conf["key.converter"] = stringConverter
	conf["value.converter"] = stringConverter
	if cf.edit != nil {
		cf.edit(conf, pfx)
	}
	return conf, nil
}

// writeConnectorFile writes conf as Connect's REST API takes it.
func writeConnectorFile(path, name string, conf map[string]string) error {
	b, err := json.MarshalIndent(map[string]any{"name": name, "config": conf}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// importSettings runs `walrelay import-debezium FILE` and returns its
// WALRELAY_* lines, unquoted, and the lines as printed.
func importSettings(ctx context.Context, bin, file string) ([]string, []string, error) {
	out, err := exec.CommandContext(ctx, bin, "import-debezium", file).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, nil, fmt.Errorf("walrelay import-debezium %s: %w: %s", file, err, ee.Stderr)
		}
		return nil, nil, err
	}
	var env, printed []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		printed = append(printed, line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "WALRELAY_") {
			return nil, nil, fmt.Errorf("walrelay import-debezium printed %q", line)
		}
		u, err := shellUnquote(v)
		if err != nil {
			return nil, nil, fmt.Errorf("walrelay import-debezium printed %q: %w", line, err)
		}
		env = append(env, k+"="+u)
	}
	return env, printed, nil
}

// shellUnquote undoes POSIX single quoting ('...' with '\” for a quote),
// the only quoting import-debezium writes.
func shellUnquote(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", errors.New("unterminated quote")
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i+1])
			i += 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

func compat(ctx context.Context, env *rig.Env, bin, only string) (*Report, error) {
	work, err := os.MkdirTemp("", "walrelay-compat-")
	if err != nil {
		return nil, err
	}
	if bin == "" {
		if bin, err = rig.BuildWalrelay(ctx, work); err != nil {
			return nil, err
		}
	}
	libs, err := rig.ConnectJars(ctx, logf)
	if err != nil {
		return nil, err
	}
	dsn, err := testbed.FreshDatabase(ctx, env.PGURL, db)
	if err != nil {
		return nil, err
	}
	if err := testbed.Exec(ctx, dsn, ddl); err != nil {
		return nil, err
	}
	adm, err := rig.NewAdmin(env.Brokers)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	cfs := configurations()
	if only != "" {
		cfs = slices.DeleteFunc(cfs, func(cf configuration) bool { return cf.name != only })
		if len(cfs) == 0 {
			return nil, fmt.Errorf("-config %s: no such configuration", only)
		}
	}
	if err := independent(dsn, cfs); err != nil {
		return nil, err
	}
	// Each configuration has a slot (and a publication of the same name:
	// both tables, inserts only) per side, all created before the rows
	// are written, so that every one relays the same rows.
	var topics []string
	for _, cf := range cfs {
		for _, side := range []string{"wr", "dbz"} {
			s := "compat_" + cf.name + "_" + side
			// N.B. every publication has all three tables: a table that is
			// not one of the configuration's outboxes is ignored by both.
			if err := testbed.Exec(ctx, dsn, `CREATE PUBLICATION `+s+` FOR TABLE public.outbox, public.outbox_json, public.outbox_bytes, public.outbox_placed, public.outbox_expand, public.`+tracedTable+` WITH (publish = 'insert')`); err != nil {
				return nil, err
			}
			if err := testbed.Exec(ctx, dsn, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, s); err != nil {
				return nil, err
			}
			defer func(s string) {
				if err := rig.DropSlot(context.WithoutCancel(ctx), dsn, s, s); err != nil {
					logf("%v", err)
				}
			}(s)
			topics = append(topics, prefixed(side+"."+cf.name+".", cf.topics)...)
		}
	}
	if err := adm.CreateTopics(ctx, partitions, keepForever(), topics...); err != nil {
		return nil, err
	}
	rows, labels, written, err := write(ctx, dsn)
	if err != nil {
		return nil, err
	}
	logf("committed %d outbox rows (and a rolled-back one)", len(rows))

	rep := &Report{Date: time.Now().Format(time.RFC3339), Rows: len(rows),
		Versions: fmt.Sprintf("Kafka Connect %s, Debezium %s", connect.KafkaVersion, connect.DebeziumVersion),
		Checked: []string{"every committed row exactly once on each side, nothing rolled back",
			"topic modulo prefix", "partition", "key bytes", "value bytes (a tombstone: no value)", "headers: names, values, order",
			"order of ids within each topic-partition", "record timestamp",
			"in the string configuration also each side against the row as PostgreSQL renders it",
			"in the tracing configuration the trace headers apart: names and place, trace id, span id, sampled flag and tracestate against the row's context"}}

	// Debezium: one worker, every configuration's connector on it at once.
	props := rig.DebeziumWorkerProps(time.Second, maxRecordBytes)
	// One produce request in flight per broker connection, not the
	// benchmark's five: with five, the Java producer can stick in
	// KAFKA-14359's loop (its first request to a new topic fails with a
	// retriable error, the second succeeds and the broker takes its
	// sequence as the first, the first's retry gets
	// OUT_OF_ORDER_SEQUENCE_NUMBER forever); a CI run of make compat on a
	// busy machine lost configuration jsonschema's Debezium records that
	// way. Record bytes, order and headers do not depend on it.
	props["producer.max.in.flight.requests.per.connection"] = "1"
	rep.ConnectSettings = props
	w, err := rig.StartConnect(ctx, libs, filepath.Join(work, "connect"), env.Brokers, props)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	wo, err := otelWorker(ctx, cfs, work, env.Brokers, props)
	if err != nil {
		return nil, err
	}
	if wo != nil {
		defer wo.Stop()
	}
	worker := func(cf configuration) *rig.ConnectWorker {
		if cf.otel {
			return wo
		}
		return w
	}
	for _, cf := range cfs {
		name := "compat_" + cf.name + "_dbz"
		conf, err := cf.connector(dsn, name, "dbz."+cf.name+".")
		if err != nil {
			return nil, err
		}
		if err := writeConnectorFile(filepath.Join(work, name+".json"), name, conf); err != nil {
			return nil, err
		}
		if err := worker(cf).CreateConnector(ctx, name, conf); err != nil {
			return nil, err
		}
		shown := maps.Clone(conf)
		shown["database.port"], shown["database.password"] = "PORT", "(not shown)"
		rep.Configs = append(rep.Configs, &ConfigReport{Name: cf.name, About: cf.about, DebeziumConfig: shown})
	}

	// walrelay: one configuration after the other, each started only from
	// import-debezium's output for its connector file (the same
	// configuration with the walrelay side's slot and topic prefix).
	wrRecs := make([][]*kgo.Record, len(cfs))
	for i, cf := range cfs {
		name := "compat_" + cf.name + "_wr"
		conf, err := cf.connector(dsn, name, "wr."+cf.name+".")
		if err != nil {
			return nil, err
		}
		file := filepath.Join(work, name+".json")
		if err := writeConnectorFile(file, name, conf); err != nil {
			return nil, err
		}
		imported, printed, err := importSettings(ctx, bin, file)
		if err != nil {
			return nil, err
		}
		c := rep.Configs[i]
		c.Imported = printed
		// N.B. what a connector file does not say: the brokers (the
		// Connect worker's), created topics' partitions (its
		// topic.creation settings), the record size both producers take.
		// The dead-letter topic is the configuration's own (independent).
		args := []string{
			"--brokers", strings.Join(env.Brokers, ","),
			"--topic-partitions", fmt.Sprint(partitions),
			"--kafka-max-message-bytes", fmt.Sprint(maxRecordBytes),
			"--status-interval", "1s",
			"--http-addr", "",
			"--dlq-topic", "wr." + cf.name + ".dlq",
		}
		c.WalrelayArgs = args
		var penv []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "WALRELAY_") {
				penv = append(penv, kv)
			}
		}
		p, err := rig.StartProc("walrelay", filepath.Join(work, name+".log"), append(penv, imported...), append([]string{bin, "run"}, args...)...)
		if err != nil {
			return nil, err
		}
		recs, err := rig.ReadAll(ctx, env.Brokers, len(cf.rows(rows)), readTimeout, prefixed("wr."+cf.name+".", cf.topics)...)
		_ = p.Stop(30 * time.Second)
		if err != nil {
			return nil, fmt.Errorf("walrelay, configuration %s: %w; last lines of its log:\n%s", cf.name, err, p.Tail(20))
		}
		logf("walrelay, %s: %d records", cf.name, len(recs))
		wrRecs[i] = recs
	}

	dbzRecs := make([][]*kgo.Record, len(cfs))
	for i, cf := range cfs {
		name := "compat_" + cf.name + "_dbz"
		recs, err := rig.ReadAll(ctx, env.Brokers, len(cf.rows(rows)), readTimeout, prefixed("dbz."+cf.name+".", cf.topics)...)
		if err != nil {
			st, trace, _ := worker(cf).TaskState(ctx, name)
			return nil, fmt.Errorf("debezium, configuration %s (task %s %s): %w; last lines of %s:\n%s", cf.name, st, trace, err, worker(cf).LogPath(), proc.Tail(worker(cf).LogPath(), 20))
		}
		logf("debezium, %s: %d records", cf.name, len(recs))
		dbzRecs[i] = recs
	}
	// Anything more that arrives late (a duplicate, a phantom) counts too.
	confirmedPast(ctx, dsn, cfs, written)
	for i, cf := range cfs {
		wrRecs[i], dbzRecs[i] = rereadLate(ctx, env.Brokers, "wr."+cf.name+".", "dbz."+cf.name+".", cf.topics, wrRecs[i], dbzRecs[i])
		c := rep.Configs[i]
		c.Walrelay, c.Debezium = len(wrRecs[i]), len(dbzRecs[i])
		c.Rows = len(cf.rows(rows))
		wrr, dbr := wrRecs[i], dbzRecs[i]
		if cf.otel {
			wrr, dbr = withoutTrace(wrr), withoutTrace(dbr)
		}
		compare(c, cf.rows(rows), labels, wrr, dbr, "wr."+cf.name+".", "dbz."+cf.name+".", cf.checkRows, cf.eventStamp)
		if cf.otel {
			compareTrace(c, cf.rows(rows), wrRecs[i], dbzRecs[i])
		}
		rep.Unexpected += c.Unexpected
	}
	// Last, the switches from a running Debezium to walrelay; the second
	// kills the worker.
	for _, kill := range []bool{false, true} {
		if only != "" {
			break
		}
		tr, err := takeover(ctx, env, bin, w, dsn, work, kill)
		if err != nil {
			return nil, err
		}
		rep.Takeovers = append(rep.Takeovers, tr)
		rep.Unexpected += len(tr.Problems)
	}
	_ = os.RemoveAll(work)
	return rep, nil
}

// rereadLate reads both sides' topics again, so that anything that
// arrived after the first read counts.
func rereadLate(ctx context.Context, brokers []string, wrPrefix, dbzPrefix string, topics []string, wr, dbz []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
	more, err := reread(ctx, brokers, 2*time.Second, append(prefixed(wrPrefix, topics), prefixed(dbzPrefix, topics)...))
	if err != nil {
		logf("read %v again: %v", topics, err)
		return wr, dbz
	}
	var w, d []*kgo.Record
	for _, r := range more {
		if strings.HasPrefix(r.Topic, wrPrefix) {
			w = append(w, r)
		} else {
			d = append(d, r)
		}
	}
	if len(w) > len(wr) {
		wr = w
	}
	if len(d) > len(dbz) {
		dbz = d
	}
	return wr, dbz
}

// reread reads topics from the start to their end offsets and on until no
// record arrived for idle (testbed.ReadToEnd), within two minutes.
func reread(ctx context.Context, brokers []string, idle time.Duration, topics []string) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	recs, _, err := testbed.ReadToEnd(ctx, brokers, topics, testbed.ReadOptions{Idle: idle})
	return recs, err
}
