package harness

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataFrame renders a Metadata response as the broker sends it.
func metadataFrame(resp *kmsg.MetadataResponse, corr int32) []byte {
	b := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0) // no header tags
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestRewriteMetadata(t *testing.T) {
	t.Parallel()
	for _, version := range []int16{1, 8, 9, 12} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(version)
		resp.Brokers = []kmsg.MetadataResponseBroker{
			{NodeID: 1, Host: "127.0.0.1", Port: 9092},
			{NodeID: 2, Host: "127.0.0.1", Port: 9093},
		}
		topic := kmsg.NewMetadataResponseTopic()
		name := "outbox.event.order"
		topic.Topic = &name
		topic.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}
		resp.Topics = []kmsg.MetadataResponseTopic{topic}

		out, err := rewriteMetadata(metadataFrame(resp, 42), version, map[string]string{"127.0.0.1:9092": "127.0.0.1:40000"})
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if n := binary.BigEndian.Uint32(out); int(n) != len(out)-4 {
			t.Fatalf("v%d: frame length %d, %d bytes follow", version, n, len(out)-4)
		}
		if corr := binary.BigEndian.Uint32(out[4:]); corr != 42 {
			t.Errorf("v%d: correlation id %d, want 42", version, corr)
		}
		got := kmsg.NewPtrMetadataResponse()
		got.SetVersion(version)
		body := out[8:]
		if got.IsFlexible() {
			body = body[1:]
		}
		if err := got.ReadFrom(body); err != nil {
			t.Fatalf("v%d: read rewritten response: %v", version, err)
		}
		if b := got.Brokers[0]; b.Host != "127.0.0.1" || b.Port != 40000 {
			t.Errorf("v%d: proxied broker advertised at %s:%d, want 127.0.0.1:40000", version, b.Host, b.Port)
		}
		if b := got.Brokers[1]; b.Port != 9093 {
			t.Errorf("v%d: another broker rewritten to port %d", version, b.Port)
		}
		if len(got.Topics) != 1 || *got.Topics[0].Topic != name || got.Topics[0].Partitions[0].Leader != 1 {
			t.Errorf("v%d: topics changed: %+v", version, got.Topics)
		}
	}
}

// pgFrame is a typed PostgreSQL message.
func pgFrame(typ byte, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// xlogData wraps pgoutput data in CopyData(XLogData).
func xlogData(walData []byte) []byte {
	body := append([]byte{'w'}, make([]byte, 24)...) // start, end, time
	return pgFrame('d', append(body, walData...))
}

func TestPGMatchers(t *testing.T) {
	t.Parallel()
	commit := xlogData(append([]byte{'C', 0}, make([]byte, 24)...))
	insert := xlogData([]byte{'I', 0, 0, 0, 1, 'N'})
	status := pgFrame('d', append([]byte{'r'}, make([]byte, 33)...))
	keepalive := pgFrame('d', append([]byte{'k'}, make([]byte, 17)...))
	cases := []struct {
		name           string
		dir            Dir
		msg            []byte
		commit, update bool
	}{
		{"commit from the server", ToClient, commit, true, false},
		{"insert from the server", ToClient, insert, false, false},
		{"keepalive from the server", ToClient, keepalive, false, false},
		{"status update from the client", ToServer, status, false, true},
		{"status update bytes from the server", ToClient, status, false, false},
		{"query from the client", ToServer, pgFrame('Q', []byte("COMMIT\x00")), false, false},
	}
	for _, c := range cases {
		if got := PGCommit(c.dir, c.msg); got != c.commit {
			t.Errorf("%s: PGCommit = %v, want %v", c.name, got, c.commit)
		}
		if got := PGStatusUpdate(c.dir, c.msg); got != c.update {
			t.Errorf("%s: PGStatusUpdate = %v, want %v", c.name, got, c.update)
		}
	}
}

// TestProxyCutAfter: a message the cut matches reaches the server whole,
// nothing after it does, and the client sees the connection end.
func TestProxyCutAfter(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 16)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		startup := true
		for {
			msg, err := readPG(r, startup)
			startup = false
			if err != nil {
				close(got)
				return
			}
			got <- msg
		}
	}()
	p := NewPGProxy(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	startup := []byte{0, 0, 0, 9, 0, 3, 0, 0, 0} // length 9, protocol 3.0, one byte of parameters
	update := pgFrame('d', append([]byte{'r'}, make([]byte, 33)...))
	after := pgFrame('Q', []byte("SELECT 1\x00"))
	fired := p.CutAfter(PGStatusUpdate)
	for _, m := range [][]byte{startup, pgFrame('Q', []byte("BEGIN\x00")), update} {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the cut did not strike after a status update")
	}
	c.Write(after) // may fail or vanish: the connection is cut
	var msgs [][]byte
	for m := range got {
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 || string(msgs[2]) != string(update) {
		t.Fatalf("server received %q, want startup, BEGIN, then the status update and nothing after", msgs)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("client read after the cut: %v, want EOF", err)
	}
	if conns, cuts, _ := p.Stats(); conns != 1 || cuts != 1 {
		t.Errorf("stats: %d connections, %d cuts; want 1 and 1", conns, cuts)
	}
}
