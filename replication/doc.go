// Package replication owns the one replication connection to PostgreSQL.
//
// Input: a pgoutput slot and publication (checked, or created, by pgcatalog.Prepare;
// with the message source alone an empty publication, pgoutput's messages
// option requested) and the position the checkpoint may confirm. Output:
// the WAL data of every XLogData message, in stream order, in batches on a
// bounded channel (a batch is handed on before any read that may block).
// Invariant: the flush position sent to PostgreSQL never decreases and is
// only ever the checkpoint watermark, or the keepalive WAL end while nothing
// handed downstream is unacknowledged and no transaction is half received
// (both read with internal/pgoutput's TxState, the parser decode uses); a
// missing slot that History has a record of is never created again.
//
// Config is the one user-facing PostgreSQL configuration: the stream reads
// its connection, slot, publication and stream settings, and pgcatalog
// (the control plane, which imports this package) reads the rest.
package replication
