package rig

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DebeziumWorkerProps are the Connect worker settings both the benchmark and
// the compatibility check use. The producer is tuned the way Kafka's and
// Debezium's throughput advice goes, and matched to walrelay where walrelay
// has a setting: lz4, idempotent, acks=all, up to 5 requests in flight,
// 64 MiB of buffer (walrelay's --max-inflight-bytes until 2026-12-05; more
// than its 16 MiB now, which can only help Debezium), 512 KiB batches,
// linger.ms=5 (the Java client's default since Kafka 4.0).
// offsetFlush is how often offsets are committed, and so how often Debezium
// confirms the slot (walrelay: --status-interval).
func DebeziumWorkerProps(offsetFlush time.Duration, maxRequestBytes int) map[string]string {
	return map[string]string{
		// Records and headers byte for byte as the router makes them: the
		// same bytes walrelay produces from the same row.
		"key.converter":    "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":  "org.apache.kafka.connect.storage.StringConverter",
		"header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",

		"offset.flush.interval.ms": strconv.FormatInt(offsetFlush.Milliseconds(), 10),

		"producer.compression.type":                      "lz4",
		"producer.acks":                                  "all",
		"producer.enable.idempotence":                    "true",
		"producer.max.in.flight.requests.per.connection": "5",
		"producer.buffer.memory":                         strconv.Itoa(64 << 20),
		"producer.batch.size":                            strconv.Itoa(512 << 10),
		"producer.linger.ms":                             "5",
		"producer.max.request.size":                      strconv.Itoa(maxRequestBytes),
	}
}

// DebeziumConnector is the PostgreSQL connector with the Outbox Event Router
// for one slot and publication, both created beforehand (FOR TABLE
// public.outbox WITH (publish = 'insert'), like walrelay's). Records go to
// topicReplacement (route.topic.replacement, e.g. "dbz.${routedByValue}");
// column type becomes header eventType, like walrelay's --header-columns
// type:eventType.
//
// Throughput settings (Debezium's defaults in brackets): max.batch.size 8192
// [2048], max.queue.size 32768 [8192], max.queue.size.in.bytes 64 MiB [0,
// unbounded], poll.interval.ms 10 [500; the connector sleeps this long
// whenever its queue or the replication stream is empty, which would
// dominate W2's latency], heartbeat.interval.ms = heartbeat [0, off].
//
// N.B. the heartbeat is what lets Debezium confirm a backlog's last
// transaction: the offset of an outbox record holds the commit LSN of the
// transaction before it, and a commit emits no record, so without a later
// event or a heartbeat the slot stays one transaction behind (Debezium's
// docs recommend heartbeats for PostgreSQL for this reason).
func DebeziumConnector(dsn, slot, pub, topicReplacement string, heartbeat time.Duration) (map[string]string, error) {
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w", err)
	}
	return map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":         "1",
		"database.hostname": pc.Host,
		"database.port":     strconv.Itoa(int(pc.Port)),
		"database.user":     pc.User,
		"database.password": pc.Password,
		"database.dbname":   pc.Database,
		"topic.prefix":      slot,

		"plugin.name":                 "pgoutput",
		"slot.name":                   slot,
		"publication.name":            pub,
		"publication.autocreate.mode": "filtered",
		"snapshot.mode":               "no_data",
		"table.include.list":          "public.outbox",

		"max.batch.size":          "8192",
		"max.queue.size":          "32768",
		"max.queue.size.in.bytes": strconv.Itoa(64 << 20),
		"poll.interval.ms":        "10",
		"heartbeat.interval.ms":   strconv.FormatInt(heartbeat.Milliseconds(), 10),

		"transforms":             "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.topic.replacement":           topicReplacement,
		"transforms.outbox.table.fields.additional.placement": "type:header:eventType",

		// Topics are created beforehand; these only matter if one is missing.
		"topic.creation.default.replication.factor": "1",
		"topic.creation.default.partitions":         "6",
	}, nil
}
