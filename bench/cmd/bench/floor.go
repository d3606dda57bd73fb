package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/test/testbed"
)

// floorReader is the slot's own latency floor, measured beside a relay on
// the same WAL: a second slot with test_decoding, streamed by
// pg_recvlogical to its stdout; each row line is timed when it is read,
// minus the payload's "ts" (the row's clock_timestamp() at insert), the
// same measure as the relays' insert → consume.
type floorReader struct {
	slot string
	cmd  *exec.Cmd
	done chan struct{}
	// onRow, if set, is given each outbox row as it is read: its aggregate
	// type, aggregate id, event id and the whole line (reused after the
	// call). The chained floor produces it to Kafka.
	onRow func(typ, key, id, line []byte)

	mu  sync.Mutex
	lat map[string][]float64 // aggregate type -> ms
	err error
}

// startFloor creates a test_decoding slot and streams it.
func (b *bench) startFloor(ctx context.Context, slot string) (*floorReader, error) {
	return b.startFloorTo(ctx, slot, nil)
}

// startFloorTo is startFloor with each row also given to onRow.
func (b *bench) startFloorTo(ctx context.Context, slot string, onRow func(typ, key, id, line []byte)) (*floorReader, error) {
	if err := testbed.Exec(ctx, b.dsn, fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'test_decoding')`, slot)); err != nil {
		return nil, fmt.Errorf("create floor slot: %w", err)
	}
	f := &floorReader{slot: slot, done: make(chan struct{}), lat: map[string][]float64{}, onRow: onRow}
	// N.B. -f - writes each message to stdout as it arrives (no fsync);
	// feedback every second as walrelay's --status-interval.
	f.cmd = exec.CommandContext(ctx, b.recvBin(), "-d", b.dsn, "--slot", slot, "--start", "-o", "include-xids=0",
		"-f", "-", "-s", "1", "-F", "1", "--no-loop")
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pg_recvlogical (floor): %w", err)
	}
	go f.read(out)
	return f, nil
}

var (
	aggKey = []byte(`aggregatetype[text]:'`)
	keyKey = []byte(`aggregateid[text]:'`)
	idKey  = []byte(`id[uuid]:'`)
)

// quoted is the value test_decoding printed after name in line, up to its
// closing quote; nil if line has none.
func quoted(line, name []byte) []byte {
	i := bytes.Index(line, name)
	if i < 0 {
		return nil
	}
	v := line[i+len(name):]
	if j := bytes.IndexByte(v, '\''); j >= 0 {
		v = v[:j]
	}
	return v
}

func (f *floorReader) read(r io.Reader) {
	defer close(f.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		now := time.Now().UnixMicro()
		line := sc.Bytes()
		ts, ok := payloadTS(line)
		if !ok {
			continue
		}
		typ := quoted(line, aggKey)
		if typ == nil {
			continue
		}
		f.mu.Lock()
		f.lat[string(typ)] = append(f.lat[string(typ)], float64(now-ts)/1000)
		f.mu.Unlock()
		if f.onRow != nil {
			f.onRow(typ, quoted(line, keyKey), quoted(line, idKey), line)
		}
	}
	if err := sc.Err(); err != nil {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}
}

// pid is pg_recvlogical's process id.
func (f *floorReader) pid() int {
	if f.cmd.Process == nil {
		return 0
	}
	return f.cmd.Process.Pid
}

// count is how many rows of typ the floor has read.
func (f *floorReader) count(typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lat[typ])
}

// stats of typ's rows.
func (f *floorReader) stats(typ string) Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return stats(append([]float64(nil), f.lat[typ]...))
}

// stop ends pg_recvlogical and drops the slot.
func (f *floorReader) stop(ctx context.Context, dsn string) {
	if f.cmd.Process != nil {
		_ = f.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-f.done:
		case <-time.After(10 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.done
		}
		_ = f.cmd.Wait()
	}
	if err := testbed.Exec(ctx, dsn, fmt.Sprintf(`SELECT pg_drop_replication_slot('%s')`, f.slot)); err != nil {
		logf("drop floor slot %s: %v", f.slot, err)
	}
}
