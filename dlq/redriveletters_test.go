package dlq

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/kafkastate"
)

func TestInCommitOrder(t *testing.T) {
	pos := func(lsn uint64, i uint32) kafkastate.Pos {
		return kafkastate.Pos{LSN: pglogrepl.LSN(0x100 + lsn), Index: i}
	}
	ls := []Letter{
		{Partition: 0, Offset: 9, Pos: pos(2, 0), HasPos: true, EventID: "c"},
		{Partition: 1, Offset: 3, Pos: pos(1, 1), HasPos: true, EventID: "b"},
		{Partition: 0, Offset: 1, Pos: pos(1, 0), HasPos: true, EventID: "a"},
		// The same event dead-lettered again after a restart.
		{Partition: 0, Offset: 5, Pos: pos(1, 1), HasPos: true, EventID: "b"},
	}
	var got []string
	for _, l := range inCommitOrder(ls) {
		got = append(got, fmt.Sprintf("%s@%d:%d", l.EventID, l.Partition, l.Offset))
	}
	if want := "[a@0:1 b@0:5 c@0:9]"; fmt.Sprint(got) != want {
		t.Errorf("inCommitOrder: %v, want %s", got, want)
	}
}

func TestParseOffsets(t *testing.T) {
	got, err := parseOffsets("0:42, 3:7")
	if err != nil || fmt.Sprint(got) != "[[0 42] [3 7]]" {
		t.Errorf("parseOffsets: %v, %v", got, err)
	}
	for _, bad := range []string{"42", "0:x", "0:1,", ""} {
		if _, err := parseOffsets(bad); !errors.Is(err, errUsage) {
			t.Errorf("parseOffsets(%q): %v, want a usage error", bad, err)
		}
	}
}
