package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/bench/internal/rig"
)

// readTimeout bounds each wait for records or a slot. It is a bound for
// a failure, not a speed: on a busy machine Debezium retries registering
// a connector's metrics for up to a minute, and a second make test
// beside this one slows every JVM.
const readTimeout = 5 * time.Minute

// independent checks that no two connectors share what would couple
// them: a slot (and publication, of the same name), a topic, or, among
// the connectors on the Connect worker (Debezium's side and the
// takeovers), a topic.prefix: Debezium registers its metrics and names
// its heartbeat topic by it, and two connectors with one prefix wait on
// each other (a make test on a busy machine timed out that way).
func independent(dsn string, cfs []configuration) error {
	type use struct{ what, by string }
	seen := map[use]string{}
	claim := func(what, name, by string) error {
		if other, ok := seen[use{what, name}]; ok {
			return fmt.Errorf("configurations %s and %s share %s %q: give each its own", other, by, what, name)
		}
		seen[use{what, name}] = by
		return nil
	}
	type conn struct {
		by, slot, pfx string
		worker        bool
		topics        []string
	}
	var all []conn
	for _, cf := range cfs {
		for _, side := range []string{"wr", "dbz"} {
			all = append(all, conn{by: cf.name + " (" + side + ")", slot: "compat_" + cf.name + "_" + side,
				pfx: side + "." + cf.name + ".", worker: side == "dbz", topics: cf.topics})
		}
	}
	for _, tag := range []string{"g", "k"} {
		all = append(all, conn{by: "takeover " + tag, slot: "compat_takeover_" + tag, pfx: "tk" + tag + ".", worker: true,
			topics: []string{"Order", "Customer"}})
	}
	for _, c := range all {
		conf, err := configuration{}.connector(dsn, c.slot, c.pfx)
		for _, cf := range cfs {
			if c.by == cf.name+" (wr)" || c.by == cf.name+" (dbz)" {
				conf, err = cf.connector(dsn, c.slot, c.pfx)
			}
		}
		if err != nil {
			return err
		}
		if err := claim("slot", conf["slot.name"], c.by); err != nil {
			return err
		}
		if err := claim("publication", conf["publication.name"], c.by); err != nil {
			return err
		}
		if c.worker {
			if err := claim("topic.prefix", conf["topic.prefix"], c.by); err != nil {
				return err
			}
		}
		for _, t := range prefixed(c.pfx, c.topics) {
			if err := claim("topic", t, c.by); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepForever is the config of every compat topic: no time-based
// retention. Configuration placement stamps records with the occurred
// column (1970, 2001, 2020, 2025): under the default seven days, the
// broker's retention check deletes them as soon as it runs, and a read
// that comes after it finds only the rows whose occurred is NULL ("read 2
// of 8 records", the make test on a busy machine that timed out).
func keepForever() map[string]*string {
	forever := "-1"
	return map[string]*string{"retention.ms": &forever}
}

// confirmedPast waits until the slot of every Debezium connector with
// heartbeats is confirmed at or past written (a WAL position inside the
// last transaction of the rows, before its commit; one read after the
// commit may lie past a record PostgreSQL writes later, such as a
// standby snapshot, that no slot confirms): Debezium confirms only what
// Kafka acknowledged, so nothing of it can arrive later. A connector without heartbeats
// confirms one transaction behind (rig.DebeziumConnector) and is not
// waited for. It gives up after a minute, logging which slots lag.
func confirmedPast(ctx context.Context, dsn string, cfs []configuration, written pglogrepl.LSN) {
	slots, err := rig.NewSlotWatcher(ctx, dsn)
	if err != nil {
		logf("wait for debezium's slots: %v", err)
		return
	}
	defer slots.Close()
	var lag []string
	deadline := time.Now().Add(time.Minute)
	for {
		lag = lag[:0]
		for _, cf := range cfs {
			name := "compat_" + cf.name + "_dbz"
			if conf, err := cf.connector(dsn, name, "dbz."+cf.name+"."); err != nil || conf["heartbeat.interval.ms"] == "0" {
				continue
			}
			if st, err := slots.State(ctx, name); err != nil || st.ConfirmedFlush < written {
				lag = append(lag, fmt.Sprintf("%s at %s (%v)", name, st.ConfirmedFlush, err))
			}
		}
		if len(lag) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(lag) > 0 {
		logf("debezium's slots not confirmed past the rows' WAL position %s within a minute: %v", written, lag)
	}
}
