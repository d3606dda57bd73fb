package explore

import (
	"fmt"
	"strings"
	"time"
)

// refusal runs a case walrelay must refuse: rows are committed, walrelay
// must exit 2 at start naming the fix, and nothing reaches Kafka.
func (x *explorer) refusal() string {
	t := x.t
	var extra []string
	var want string
	switch x.c["setup"] {
	case "missing-table":
		extra, want = []string{"--table", x.shape.QualifiedTables() + ",public.nosuch"}, "public.nosuch"
	case "missing-column":
		extra, want = []string{"--header-columns", "type:eventType,nosuch:x"}, `"nosuch"`
	case "inflight-below-batch":
		extra, want = []string{"--max-inflight-bytes", "65536", "--kafka-max-message-bytes", "1048588"}, "raise --max-inflight-bytes"
	case "unsupported-payload-type":
		// N.B. part is an integer column: no record value walrelay maps.
		extra, want = []string{"--payload-column", "part"}, "--payload-column"
	}
	if err := x.w.Run(t.Context(), x.e); err != nil {
		t.Fatalf("writers: %v", err)
	}
	x.startRelay(extra...)
	deadline := time.Now().Add(90 * time.Second)
	for !x.relay.Exited() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	topics := append(x.e.Topics(), x.dlq)
	if !x.relay.Exited() {
		x.w.Events = 60
		if err := x.w.Run(t.Context(), x.e); err != nil {
			t.Fatalf("writers: %v", err)
		}
		time.Sleep(5 * time.Second)
		x.relay.Kill()
		x.retire()
		recs := x.e.Bed.ConsumeAll(t, topics, time.Second)
		t.Errorf("%s: walrelay did not refuse to start (want exit 2 naming %s): it ran for 90 s; %d records in %v",
			x.c["setup"], want, len(recs), topics)
		return fmt.Sprintf("RESULT seed=%d setup=%s refused=no records=%d", x.seed, x.c["setup"], len(recs))
	}
	code := x.relay.Wait(time.Second)
	x.retire()
	log := x.relay.Log()
	if code != 2 {
		t.Errorf("%s: exit code %d, want 2", x.c["setup"], code)
	}
	if !strings.Contains(log, want) {
		t.Errorf("%s: walrelay's refusal does not name %s", x.c["setup"], want)
	}
	recs := x.e.Bed.ConsumeAll(t, topics, time.Second)
	if len(recs) > 0 {
		t.Errorf("%s: walrelay refused but %d records reached %v", x.c["setup"], len(recs), topics)
	}
	return fmt.Sprintf("RESULT seed=%d setup=%s refused=yes exit=%d records=%d", x.seed, x.c["setup"], code, len(recs))
}
