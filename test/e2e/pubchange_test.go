package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/test/harness"
)

// TestPublicationChangedWhileStreaming: the publication is altered while
// walrelay streams so that it leaves outbox rows out (a row filter added,
// the outbox dropped from it). walrelay stops with exit 2 naming the change,
// and the slot is not confirmed past the first row the change left out:
// the commit end the witness slot reports for it.
func TestPublicationChangedWhileStreaming(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, alter, want string
		minVersion        int
	}{
		{"row filter added", `ALTER PUBLICATION %s SET TABLE outbox WHERE (aggregateid <> 'hidden')`, "has a row filter on outbox public.outbox", 150000},
		{"outbox dropped", `ALTER PUBLICATION %s DROP TABLE outbox`, "does not include table public.outbox", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if v := serverVersion(t, e); v < c.minVersion {
				t.Logf("PostgreSQL %d has no row filters: the change is made as the outbox dropped instead", v)
				c.alter, c.want = cases[1].alter, cases[1].want
			}
			wit := e.witness(t)
			col := e.collect(t)
			relay := e.startRelay(t)
			relay.WaitStreaming()
			ins := func(key string) uint32 {
				return e.execXid(t, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'T', '{}')`, harness.NewUUID(), e.AggType(0), key)
			}
			first := ins("shown")
			col.WaitFor(1, time.Minute)
			// The check does not hold confirmation back for good.
			waitConfirmed(t, e, relay, lastCommitEnd(t, wit, []uint32{first}))

			e.Bed.Exec(t, e.DSN, fmt.Sprintf(c.alter, pgx.Identifier{e.Pub}.Sanitize()))
			dropped := ins("hidden")
			code := relay.Wait(time.Minute)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if log := relay.Log(); !strings.Contains(log, "changed while streaming") || !strings.Contains(log, c.want) {
				t.Errorf("log lacks %q and %q:\n%s", "changed while streaming", c.want, log)
			}
			e.checkPending(t, wit, dropped, "the first row the changed publication left out")
		})
	}
}
