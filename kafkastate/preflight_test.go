package kafkastate

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPreflight: the check of `walrelay check` names the topic and says
// whether a missing one would be created.
func TestPreflight(t *testing.T) {
	c := fakeKafka(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ch := Preflight("missing", true)(t.Context(), adm)
	if ch.Name != "checkpoint topic missing" || ch.Err != nil || !strings.HasPrefix(ch.Note, "missing: will be created at start") {
		t.Errorf("Preflight of a missing topic it may create = %+v", ch)
	}
	ch = Preflight("missing", false)(t.Context(), adm)
	if !errors.Is(ch.Err, ErrSetup) {
		t.Errorf("Preflight of a missing topic it may not create = %+v, want an error wrapping ErrSetup", ch)
	}
}
