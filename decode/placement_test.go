package decode

import (
	"errors"
	"testing"
	"time"
)

const pgTimestamp = 1114

// placementCols is the default outbox with a partition (integer) and an
// event time (timestamp) column.
func placementCols(partOID, stampOID uint32) []col {
	return append(outboxCols(pgJSONB), col{name: "part", oid: partOID}, col{name: "occurred", oid: stampOID})
}

func placementRow(part, stamp val) []val {
	return []val{text(eventUUID), text("Order"), text("o-1"), text("Created"), text(`{}`), part, stamp}
}

// The expected partitions and timestamps are Debezium 3.6.1's
// EventRouterDelegate's (getInt32 of the partition column; the
// MicroTimestamp of a timestamp column divided by 1000, as Java's long
// division), worked out by hand.
func TestDecodePlacement(t *testing.T) {
	cfg := Config{PartitionColumn: "part", TimestampColumn: "occurred"}
	tests := []struct {
		name      string
		part      val
		stamp     val
		wantPart  int32
		hasPart   bool
		wantStamp time.Time // zero: the commit time
		wantErr   error
	}{
		{"partition and microsecond timestamp", text("3"), text("2026-12-01 15:04:05.123999"), 3, true, time.UnixMilli(1796137445123), nil},
		{"partition 0, whole seconds", text("0"), text("2026-12-01 15:04:05"), 0, true, time.UnixMilli(1796137445000), nil},
		{"millisecond precision", text("7"), text("1970-01-01 00:00:00.5"), 7, true, time.UnixMilli(500), nil},
		{"NULL partition: key hash; NULL timestamp: commit time", null(), null(), 0, false, time.Time{}, nil},
		{"the epoch itself", null(), text("1970-01-01 00:00:00"), 0, false, time.UnixMilli(0), nil},
		{"-1 ms is Connect's no-timestamp: commit time", null(), text("1969-12-31 23:59:59.999"), 0, false, time.Time{}, nil},
		{"-0.5 ms truncates to 0, as Java's division", null(), text("1969-12-31 23:59:59.9995"), 0, false, time.UnixMilli(0), nil},
		{"2262-04-11, the last UnixNano can give", null(), text("2262-04-11 23:47:16.854"), 0, false, time.UnixMilli(9223372036854), nil},
		{"year 10000: beyond the Kafka client", null(), text("10000-01-01 00:00:00"), 0, false, time.Time{}, ErrBadValue},
		{"negative partition", text("-1"), null(), 0, false, time.Time{}, ErrBadValue},
		{"before 1970", null(), text("1969-12-31 23:59:59.998"), 0, false, time.Time{}, ErrBadValue},
		{"infinity", null(), text("infinity"), 0, false, time.Time{}, ErrBadValue},
		{"BC", null(), text("0044-03-15 12:00:00 BC"), 0, false, time.Time{}, ErrBadValue},
		{"not ISO DateStyle", null(), text("Tue Dec 01 15:04:05 2026"), 0, false, time.Time{}, ErrBadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, cfg)
			tx := oneTx(t, d, msgRelation(outboxRelID, "public", "outbox", placementCols(pgInt4, pgTimestamp)...), msgInsert(outboxRelID, placementRow(tc.part, tc.stamp)...))
			ev := tx.Events[0]
			if tc.wantErr != nil {
				if !errors.Is(ev.Err, tc.wantErr) {
					t.Fatalf("error %v, want %v", ev.Err, tc.wantErr)
				}
				return
			}
			if ev.Err != nil {
				t.Fatalf("poison event: %v", ev.Err)
			}
			if ev.HasPartition != tc.hasPart || ev.Partition != tc.wantPart {
				t.Errorf("partition %d (set %v), want %d (set %v)", ev.Partition, ev.HasPartition, tc.wantPart, tc.hasPart)
			}
			if !ev.Timestamp.Equal(tc.wantStamp) || ev.Timestamp.IsZero() != tc.wantStamp.IsZero() {
				t.Errorf("timestamp %v (%d ms), want %v", ev.Timestamp, ev.Timestamp.UnixMilli(), tc.wantStamp)
			}
		})
	}
}

// A partition column that is not integer, or a timestamp column that is
// not timestamp, fails Debezium's task at every record: refused.
func TestPlacementColumnTypes(t *testing.T) {
	for _, tc := range []struct {
		flag string
		oid  uint32
		ok   bool
	}{
		{"--partition-column", pgInt4, true},
		{"--partition-column", pgInt8, false},
		{"--partition-column", pgText, false},
		{"--timestamp-column", pgTimestamp, true},
		{"--timestamp-column", 1184, false}, // timestamptz: Debezium's ZonedTimestamp is a string
		{"--timestamp-column", pgInt8, false},
	} {
		err := CheckColumnType(tc.flag, tc.oid)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("CheckColumnType(%s, %d) = %v, want ok %v", tc.flag, tc.oid, err, tc.ok)
		}
	}
	d := newDecoder(t, Config{PartitionColumn: "part", TimestampColumn: "occurred"})
	wantSchemaChanged(t, d, ErrUnsupportedType, msgRelation(outboxRelID, "public", "outbox", placementCols(pgInt8, 1184)...))
	m, err := MappedColumns(Config{PartitionColumn: "part", TimestampColumn: "occurred"})
	if err != nil || m["part"] != "--partition-column" || m["occurred"] != "--timestamp-column" {
		t.Fatalf("MappedColumns = %v, %v", m, err)
	}
}
