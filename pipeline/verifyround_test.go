package pipeline

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/replication"
)

// TestRoundDue: when the publication check's rounds run: one every watch
// interval regardless, one ConfirmGap after the last began while
// acknowledged positions wait for the check, and a begun round's
// transactions polled every xidPoll, then every xidPollSlow.
func TestRoundDue(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	const interval = 5 * time.Second
	gap := replication.ConfirmGap
	cases := []struct {
		name           string
		now, began     time.Time
		polled         time.Time
		inRound        bool
		wanted, called bool // wanted's answer; whether it may be asked
		want           bool
	}{
		{"nothing waits, interval not passed: no round", t0.Add(gap), t0, t0, false, false, true, false},
		{"nothing waits, interval passed: a round", t0.Add(interval), t0, t0, false, false, false, true},
		{"acknowledged positions wait, gap passed: a round", t0.Add(gap), t0, t0, false, true, true, true},
		{"acknowledged positions wait, gap not passed: not yet", t0.Add(gap - 1), t0, t0, false, true, false, false},
		{"in a round, young, polled long enough ago: poll", t0.Add(xidPoll), t0, t0, true, false, false, true},
		{"in a round, young, just polled: wait", t0.Add(xidPoll + 1), t0, t0.Add(2), true, false, false, false},
		{"in a round, old, polled xidPoll ago: wait for xidPollSlow", t0.Add(xidPollFast + xidPoll), t0, t0.Add(xidPollFast), true, false, false, false},
		{"in a round, old, polled xidPollSlow ago: poll", t0.Add(xidPollFast + xidPollSlow), t0, t0.Add(xidPollFast), true, false, false, true},
		{"never began: a round at once", t0, time.Time{}, time.Time{}, false, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			wanted := func() bool { asked = true; return c.wanted }
			if got := roundDue(c.now, c.began, c.polled, c.inRound, interval, wanted); got != c.want {
				t.Errorf("roundDue = %v, want %v", got, c.want)
			}
			if asked && !c.called {
				t.Errorf("wanted was asked; it need not be")
			}
		})
	}
}
