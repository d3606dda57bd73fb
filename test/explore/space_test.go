package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// dimension is one axis of the space: its values, drawn uniformly unless
// weights are given.
type dimension struct {
	name    string
	values  []string
	weights []int
	doc     string
}

// space is every configuration a case can draw, in one place. A value that
// does not apply to the rest of a case (attach on a plain table, say) is
// replaced by "n/a" after the draw, so the coverage table shows what ran.
var space = []dimension{
	{name: "table", values: []string{"plain", "range", "list", "hash"}, doc: "outbox partitioning (range/list on part, hash on id)"},
	{name: "attach", values: []string{"no", "yes"}, doc: "a partition attached mid-run (range, list)"},
	{name: "tables", values: []string{"1", "2"}, doc: "outbox tables (--table a,b)"},
	{name: "id", values: []string{"uuid", "text", "bigint"}, doc: "id column type"},
	{name: "key", values: []string{"text", "uuid", "bigint"}, doc: "aggregateid (key) column type"},
	{name: "payload", values: []string{"jsonb", "json", "text", "bytea", "null"}, doc: "payload column type (null: jsonb, always NULL)"},
	{name: "extra", values: []string{"none", "text-2k", "jsonb-30k", "bytea-100k"}, doc: "unmapped column per row (TOASTed past ~2 kB)"},
	{name: "headers", values: []string{"none", "type", "type+seq"}, doc: "--header-columns"},
	{name: "tx", values: []string{"single", "1-10", "1-1000", "huge", "100k"}, doc: "outbox rows per transaction; huge: 1-10 and one of 3,000 rows, far over logical_decoding_work_mem (64kB for the case's database); 100k: one of 100,000 rows"},
	{name: "business", values: []string{"no", "yes"}, doc: "business rows in 30% of transactions"},
	{name: "rollback", values: []string{"no", "yes"}, doc: "10% of transactions rolled back"},
	{name: "savepoint", values: []string{"no", "yes"}, doc: "30% of committed transactions roll back a savepoint holding outbox rows"},
	{name: "delete", values: []string{"no", "yes"}, doc: "20% of outbox rows deleted in their own transaction"},
	{name: "writers", values: []string{"1", "3-shared", "3"}, doc: "concurrent writers (shared: over 4 keys, else 200)"},
	{name: "topic", values: []string{"missing", "fewer-partitions", "small-max-message", "compact"}, doc: "topics: created by walrelay, pre-created with 1 partition (walrelay would make 3), max.message.bytes=6000, cleanup.policy=compact"},
	{name: "publication", values: []string{"created", "pre-created"}, doc: "publication made by walrelay or beforehand (FOR TABLE ..., no publish_via_partition_root)"},
	{name: "compression", values: []string{"lz4", "none", "gzip", "snappy", "zstd"}, doc: "--kafka-compression"},
	{name: "linger", values: []string{"0", "5ms", "50ms"}, doc: "--kafka-linger"},
	{name: "inflight", values: []string{"default", "1MiB", "256KiB"}, doc: "--max-inflight-bytes"},
	{name: "delivery-timeout", values: []string{"default", "5s"}, doc: "--kafka-delivery-timeout"},
	{name: "poison", values: []string{"none", "dead-letter", "halt"}, weights: []int{2, 1, 1}, doc: "NULL-key rows and --on-poison (halt: expect exit 1, nothing confirmed past, restart with dead-letter)"},
	{name: "fault", values: []string{"none", "kill-9", "sigterm", "kafka-restart", "pg-restart", "pg-cut", "kafka-cut"}, doc: "fault injected once or twice mid-run"},
	{name: "setup", values: []string{"ok", "missing-table", "missing-column", "inflight-below-batch", "unsupported-payload-type"}, weights: []int{20, 1, 1, 1, 1}, doc: "a configuration walrelay must refuse at start (exit 2, with the fix)"},
	// N.B. the dimensions below come last: a seed draws the same values
	// of the ones above as before they were added.
	{name: "encoding", values: []string{"UTF8", "LATIN1", "WIN1252"}, weights: []int{2, 1, 1}, doc: "database encoding (C locale); keys, event types and payloads hold the non-ASCII characters it has (charsOf)"},
	{name: "role", values: []string{"none", "client_encoding", "DateStyle", "bytea_output", "statement_timeout"}, weights: []int{4, 1, 1, 1, 1}, doc: "ALTER ROLE ... SET on walrelay's own role (roleSettings)"},
	{name: "coltype", values: []string{"base", "domain", "enum", "citext"}, weights: []int{3, 1, 1, 1}, doc: "column types: domains over id (not a hash partition key), key and aggregate type; an enum aggregate type; citext aggregate type and text key"},
	{name: "ddl", values: []string{"none", "rename-key"}, weights: []int{4, 1}, doc: "rename-key: the key column renamed while walrelay streams (expect exit 2 naming --key-column, nothing dead-lettered or confirmed past, then every row with --key-column)"},
	{name: "ts-bound", values: []string{"no", "yes"}, weights: []int{3, 1}, doc: "topics with message.timestamp.before.max.ms (tsBound) and a backlog older than it (walrelay stopped meanwhile): every event in its topic, none dead-lettered"},
}

// config is one case's draw: dimension name -> value.
type config map[string]string

// draw picks a value of every dimension with rng, then marks what does not
// apply.
func draw(rng *rand.Rand) config {
	c := config{}
	for _, d := range space {
		c[d.name] = d.pick(rng)
	}
	if c["table"] != "range" && c["table"] != "list" {
		c["attach"] = "n/a"
	}
	if c["setup"] != "ok" {
		// N.B. a refused case never streams: what the relay would have
		// done with these is not tested by it.
		for _, d := range []string{"attach", "tx", "business", "rollback", "savepoint", "delete", "writers", "topic", "publication", "compression", "linger", "inflight", "delivery-timeout", "poison", "fault", "coltype", "ddl", "ts-bound"} {
			c[d] = "n/a"
		}
	}
	return c
}

func (d dimension) pick(rng *rand.Rand) string {
	if d.weights == nil {
		return d.values[rng.IntN(len(d.values))]
	}
	total := 0
	for _, w := range d.weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range d.weights {
		if n < w {
			return d.values[i]
		}
		n -= w
	}
	return d.values[len(d.values)-1]
}

// String is the one-line description: every dimension that applies.
func (c config) String() string {
	var parts []string
	for _, d := range space {
		if v := c[d.name]; v != "n/a" {
			parts = append(parts, d.name+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// coverage counts, per dimension and value, the cases that drew it.
type coverage map[string]map[string]int

func (cv coverage) add(c config) {
	for k, v := range c {
		if cv[k] == nil {
			cv[k] = map[string]int{}
		}
		cv[k][v]++
	}
}

// table renders the coverage in the space's order, with the values no case
// drew as 0.
func (cv coverage) table(cases int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "COVERAGE over %d cases (dimension: value=cases ...)\n", cases)
	for _, d := range space {
		vals := slices.Clone(d.values)
		if cv[d.name]["n/a"] > 0 {
			vals = append(vals, "n/a")
		}
		fmt.Fprintf(&b, "  %-16s", d.name)
		for _, v := range vals {
			fmt.Fprintf(&b, " %s=%d", v, cv[d.name][v])
		}
		fmt.Fprintf(&b, "   (%s)\n", d.doc)
	}
	return b.String()
}
