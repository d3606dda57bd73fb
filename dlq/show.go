package dlq

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// show prints dead letters decoded: those of an event (--event), the one
// at --offset, or a parked aggregate's (--aggregate, or --agg-topic with
// --agg-key) in commit order.
func (t *Tool) show(ctx context.Context) error {
	v, err := t.scan(ctx)
	if err != nil {
		return err
	}
	var ls []Letter
	switch {
	case t.o.Event != "":
		for _, l := range v.Letters {
			if l.EventID == t.o.Event {
				ls = append(ls, l)
			}
		}
	case t.o.Offset != "":
		offsets, err := parseOffsets(t.o.Offset)
		if err != nil {
			return err
		}
		for _, l := range v.Letters {
			if slices.Contains(offsets, [2]int64{int64(l.Partition), l.Offset}) {
				ls = append(ls, l)
			}
		}
	default:
		id, err := t.aggregate(v)
		if err != nil {
			return err
		}
		ls = pendingLetters(v, id)
		fmt.Fprintf(t.out, "aggregate %s: %d parked dead letters\n", id, len(ls))
	}
	if len(ls) == 0 && (t.o.Event != "" || t.o.Offset != "") {
		return fmt.Errorf("%w: no such dead letter in topic %s", errUsage, t.cfg.DeadLetterTopic)
	}
	for _, l := range ls {
		printLetter(t.out, l, t.o.Full, t.cfg.DeadLetterTopic)
	}
	return nil
}

// printLetter prints l decoded; values are cut at 1000 bytes unless full.
func printLetter(w io.Writer, l Letter, full bool, topic string) {
	fmt.Fprintf(w, "dead letter %s/%d@%d\n", topic, l.Partition, l.Offset)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", k, v)
		}
	}
	row("reason", l.Class)
	row("message", l.Message)
	row("event id", l.EventID)
	row("table", l.Table)
	row("commit lsn", l.CommitLSN)
	if l.HasPos {
		row("position", l.Pos.String())
	}
	row("topic", l.Topic)
	row("key", string(l.Record.Key))
	if l.partition >= 0 {
		row("partition", strconv.Itoa(int(l.partition)))
	}
	row("aggregate", l.Aggregate)
	row("parked behind", l.Behind)
	row("timestamp", l.Time.UTC().Format(time.RFC3339Nano))
	if l.Redrivable {
		row("re-publishable", "yes")
		var hs []string
		for _, h := range l.Record.Headers[:l.origHeaders] {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		row("headers", strings.Join(hs, ", "))
	} else {
		row("re-publishable", "no: it holds no record of the event")
	}
	value := string(l.Record.Value)
	if !full && len(value) > 1000 {
		value = value[:1000] + "... (" + strconv.Itoa(len(l.Record.Value)) + " bytes; --full prints all)"
	}
	row("value", value)
	tw.Flush()
}
