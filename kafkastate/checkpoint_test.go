package kafkastate

import (
	"testing"
	"time"
)

func TestCheckpointKey(t *testing.T) {
	if k := CheckpointKey(Source{Slot: "s", Database: "db", SystemID: "7"}); k != "eos/7/db/s" {
		t.Errorf("CheckpointKey = %q, want eos/7/db/s", k)
	}
}

// TestCheckpointRecordBytes: the checkpoint record's key and value, byte
// for byte as walrelay has always written them (a rolling upgrade reads
// them); timeline is left out when 0.
func TestCheckpointRecordBytes(t *testing.T) {
	src := Source{Slot: "walrelay", Database: "app", SystemID: "7312", Timeline: 2}
	at := time.Date(2026, 12, 5, 13, 16, 37, 123000000, time.UTC)
	for _, c := range []struct {
		name string
		cp   Checkpoint
		want string
	}{
		{"with timeline", Checkpoint{Slot: "walrelay", Database: "app", SystemIdentifier: "7312", EndLSN: "16/B374D848", CommitLSN: "16/B374D818",
			Timeline: 2, TransactionalID: "walrelay-walrelay", Transactions: 3, Records: 12, WrittenAt: at},
			`{"slot":"walrelay","database":"app","system_identifier":"7312","end_lsn":"16/B374D848","commit_lsn":"16/B374D818","timeline":2,"transactional_id":"walrelay-walrelay","transactions":3,"records":12,"written_at":"2026-12-05T13:16:37.123Z"}`},
		{"timeline 0", Checkpoint{Slot: "walrelay", Database: "app", SystemIdentifier: "7312", EndLSN: "0/1000", CommitLSN: "0/FF8",
			TransactionalID: "t", Transactions: 1, Records: 1, WrittenAt: at},
			`{"slot":"walrelay","database":"app","system_identifier":"7312","end_lsn":"0/1000","commit_lsn":"0/FF8","transactional_id":"t","transactions":1,"records":1,"written_at":"2026-12-05T13:16:37.123Z"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := CheckpointRecord("walrelay.checkpoints", src, c.cp)
			if r.Topic != "walrelay.checkpoints" || string(r.Key) != "eos/7312/app/walrelay" || string(r.Value) != c.want || len(r.Headers) != 0 {
				t.Errorf("record: topic %q key %q value %s headers %v\nwant topic walrelay.checkpoints key eos/7312/app/walrelay value %s, no headers", r.Topic, r.Key, r.Value, r.Headers, c.want)
			}
		})
	}
}
