package pgcatalog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// TimelineEnds reads, on a replication connection, the history of timeline
// tli (TIMELINE_HISTORY): for each of its ancestors, the LSN where that
// timeline ended in tli's history. Timeline 1 has no history (nil).
func TimelineEnds(ctx context.Context, conn *pgconn.PgConn, tli int32) (map[int32]pglogrepl.LSN, error) {
	if tli <= 1 {
		return nil, nil
	}
	h, err := pglogrepl.TimelineHistory(ctx, conn, tli)
	if err != nil {
		return nil, fmt.Errorf("read timeline history of timeline %d: %w", tli, err)
	}
	ends, err := ParseTimelineHistory(tli, h.Content)
	if err != nil {
		return nil, fmt.Errorf("read timeline history of timeline %d (%s): %w", tli, h.FileName, err)
	}
	return ends, nil
}

// ParseTimelineHistory parses the content of timeline tli's history file:
// one line per ancestor, "parentTLI<TAB>switchpoint<TAB>reason", in
// increasing timeline order; blank lines and lines starting with # are
// skipped, as PostgreSQL's readTimeLineHistory does. It returns each
// ancestor's switchpoint: the first LSN that is no longer that timeline's
// in tli's history. Every LSN below it is shared by both.
func ParseTimelineHistory(tli int32, content []byte) (map[int32]pglogrepl.LSN, error) {
	ends := map[int32]pglogrepl.LSN{}
	var last int64
	var prev pglogrepl.LSN
	sc := bufio.NewScanner(bytes.NewReader(content))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		id, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("line %d %q: want a timeline id first", n, line)
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d %q: no switchpoint", n, line)
		}
		at, err := pglogrepl.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d %q: switchpoint: %w", n, line, err)
		}
		if id <= last || id >= int64(tli) {
			return nil, fmt.Errorf("line %d %q: timeline ids must increase and lie below %d", n, line, tli)
		}
		if at < prev {
			return nil, fmt.Errorf("line %d %q: switchpoint %s lies below the previous one %s", n, line, at, prev)
		}
		ends[int32(id)], last, prev = at, id, at
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ends, nil
}
