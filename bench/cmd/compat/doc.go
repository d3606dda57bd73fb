// Command compat relays the same outbox rows with walrelay and with
// Debezium (PostgreSQL connector + Outbox Event Router on Kafka Connect) in
// several connector configurations (configs.go: StringConverter,
// JsonConverter with schemas off and on, a custom route.topic.regex,
// envelope placement with aliases, tombstones on empty payloads) and
// compares what each put in Kafka byte for byte: topic (modulo the prefix
// each side was given: "wr.NAME." and "dbz.NAME."), partition, key, value,
// headers and their order, and the order of records within each partition;
// in the StringConverter configuration each side is also compared with
// the row as PostgreSQL renders it. All connectors run on one Connect
// worker; walrelay is started from `walrelay import-debezium` of each
// configuration's connector file and nothing else but the brokers and
// sizes a connector file does not say. The rows cover unicode (above
// U+FFFF too), nested JSON, a 1 MiB payload, a NULL payload, JSON scalars,
// an extra header column, several aggregate types, a json (not jsonb)
// outbox, a rolled-back transaction and a row deleted in its own
// transaction.
//
// Then (takeover.go) two switches from a running Debezium to walrelay on
// Debezium's own slot and publication (all_tables), while a writer
// commits: the connector deleted, and the worker killed with SIGKILL;
// walrelay starts from import-debezium of the same connector file. Over
// both relays' records no committed row may be lost or invented, and only
// rows committed after Debezium's confirmed position may be duplicated.
//
//	make compat           # = go run ./test/cmd/testbed -- bin/compat
//
// Differences listed in deliberate (DESIGN.md's record format table) are
// reported and allowed; any other difference fails the run (exit 1).
//
// Input: the test bed's servers (rig.FromEnv), -out and -walrelay.
// Output: the report (DATE-HOST-compat.md and .json), exit 0 when every
// difference is a deliberate one, 1 otherwise, 2 without a bed. Invariant:
// both relays read the same committed rows, and each side's records are
// read back to the end offsets before they are compared.
package main
