package harness

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dir is the direction a message travels through a Proxy.
type Dir int

const (
	ToServer Dir = iota // client -> server
	ToClient            // server -> client
)

// Matcher selects a message: a cut armed with it strikes right after the
// proxy has forwarded the first message it selects.
type Matcher func(dir Dir, msg []byte) bool

// Proxy forwards TCP connections from a loopback port to a server, one
// protocol message at a time, so that it can cut every connection, cut one
// right after a chosen message, add latency to the server's answers and
// throttle what clients send. It speaks just enough of the PostgreSQL or the
// Kafka protocol to frame messages (and, for Kafka, to advertise itself in
// metadata).
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	kafka  bool

	latency atomic.Int64 // ns slept before forwarding each server message
	rate    atomic.Int64 // client bytes per second; 0: unlimited
	srvRate atomic.Int64 // server bytes per second; 0: unlimited

	mu    sync.Mutex
	links map[*link]struct{}
	// rewrite maps broker addresses (host:port) in metadata responses to the
	// proxies that stand for them (Kafka).
	rewrite map[string]string
	// isolated: new connections are accepted and get no answer (a
	// blackhole); they are reset when the isolation ends.
	isolated  bool
	blackhole []net.Conn
	armed     *armedCut
	hold      *armedHold
	holdAll   *armedHold // HoldAll's: every message it selects, on every connection
	delay     *armedDelay
	drop      Matcher
	conns     int
	cuts      int
	seen      map[string]int // messages forwarded, by Kind
	errs      []error        // messages the proxy could not handle
}

type armedCut struct {
	match   Matcher
	fired   chan struct{}
	isolate bool // then isolate the proxy, in the same step
}

type armedHold struct {
	match    Matcher
	held     chan struct{}
	released chan struct{}
	once     sync.Once
}

type link struct {
	client, server net.Conn
	once           sync.Once

	mu       sync.Mutex
	requests map[int32][2]int16 // Kafka: correlation id -> api key, version
}

// close closes both sides. With reset, the peers get a reset, as when a
// middlebox or a host dies, and what they had not read yet is lost;
// without, what was forwarded is delivered before the end of the stream.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		for _, c := range []net.Conn{l.client, l.server} {
			if tc, ok := c.(*net.TCPConn); ok && reset {
				tc.SetLinger(0)
			}
			c.Close()
		}
	})
}

// closeAfterDelivery ends l right after a message was forwarded in dir, so
// that its receiver still reads it: the sender's side is closed, the
// receiver's gets end of stream after the message and what it sends from
// then on is read and discarded (for 30 s at most), not answered with a
// reset.
//
// N.B. a plain close is not enough: the receiver may be sending (a
// walsender streams WAL while the status update waits in its socket), gets a
// reset from the closed socket, and Linux then drops what it had not read
// yet, the message included.
func (l *link) closeAfterDelivery(dir Dir) {
	l.once.Do(func() {
		to, from := l.server, l.client
		if dir == ToClient {
			to, from = l.client, l.server
		}
		from.Close()
		tc, ok := to.(*net.TCPConn)
		if !ok {
			to.Close()
			return
		}
		tc.CloseWrite()
		go func() {
			tc.SetReadDeadline(time.Now().Add(30 * time.Second))
			io.Copy(io.Discard, tc)
			tc.Close()
		}()
	})
}

// NewPGProxy proxies a PostgreSQL server at target (host:port).
func NewPGProxy(t testing.TB, target string) *Proxy { return newProxy(t, target, false) }

// NewKafkaProxy proxies a Kafka broker at target (host:port, as the broker
// advertises itself). It rewrites metadata responses so that the broker is
// advertised at the proxy's address: clients that bootstrap through the
// proxy then send everything, produce requests included, through it.
func NewKafkaProxy(t testing.TB, target string) *Proxy { return newProxy(t, target, true) }

// NewKafkaClusterProxies proxies each broker of a cluster (host:port, as
// the brokers advertise themselves) on a port of its own, and rewrites the
// metadata passing any of them so that every broker is advertised at its
// proxy: a client that bootstraps through them reaches every broker only
// through its proxy, and one broker can be cut off (Isolate) while the
// others serve. Traffic between the brokers does not pass the proxies.
func NewKafkaClusterProxies(t testing.TB, brokers []string) []*Proxy {
	t.Helper()
	proxies := make([]*Proxy, len(brokers))
	rewrite := map[string]string{}
	for i, b := range brokers {
		proxies[i] = newProxy(t, b, true)
		rewrite[b] = proxies[i].Addr()
	}
	for _, p := range proxies {
		p.mu.Lock()
		p.rewrite = rewrite
		p.mu.Unlock()
	}
	return proxies
}

// ProxyAddrs returns the proxies' addresses.
func ProxyAddrs(proxies []*Proxy) []string {
	out := make([]string, len(proxies))
	for i, p := range proxies {
		out[i] = p.Addr()
	}
	return out
}

// Isolate cuts the server off from the proxy's clients, as a network
// partition between them does: every open connection is reset and new ones
// are accepted but get no answer, until heal is called (at cleanup at the
// latest), which resets those too.
func (p *Proxy) Isolate() (heal func()) {
	p.mu.Lock()
	p.isolated = true
	p.mu.Unlock()
	p.CutAll()
	var once sync.Once
	heal = func() { once.Do(p.heal) }
	p.t.Cleanup(heal)
	return heal
}

func (p *Proxy) heal() {
	p.mu.Lock()
	p.isolated = false
	held := p.blackhole
	p.blackhole = nil
	p.mu.Unlock()
	for _, c := range held {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

func newProxy(t testing.TB, target string, kafka bool) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, ln: ln, target: target, kafka: kafka, links: map[*link]struct{}{}, seen: map[string]int{}}
	p.rewrite = map[string]string{target: p.Addr()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.accept()
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		p.heal()
		p.CutAll()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, err := range p.errs {
			t.Errorf("proxy for %s: %v", target, err)
		}
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays each message from the server by d.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetRate limits what clients send to bytesPerSecond (0: unlimited).
func (p *Proxy) SetRate(bytesPerSecond int) { p.rate.Store(int64(bytesPerSecond)) }

// SetServerRate limits what servers send to clients to bytesPerSecond (0:
// unlimited), averaged over 10 ms: a stream of small messages (a
// transaction's rows from a walsender) comes at that rate, not slower.
func (p *Proxy) SetServerRate(bytesPerSecond int) { p.srvRate.Store(int64(bytesPerSecond)) }

// CutAll resets every open connection and returns how many there were.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	if len(links) > 0 {
		p.cuts++
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
	}
	return len(links)
}

// CutAfter arms a one-shot cut: right after the proxy forwards the first
// message m selects, that message's connection is closed (the message is
// delivered, nothing after it). The channel is closed when it struck.
func (p *Proxy) CutAfter(m Matcher) <-chan struct{} {
	a := &armedCut{match: m, fired: make(chan struct{})}
	p.mu.Lock()
	p.armed = a
	p.mu.Unlock()
	return a.fired
}

// CutAfterIsolate is CutAfter, and in the same step the proxy is isolated
// (see Isolate) until heal is called (at cleanup at the latest): the client
// reaches the server again only after the test has looked at what the cut
// message did there, e.g. that the broker appended a produce request whose
// acknowledgement was lost before the producer could retry it. m sees the
// message it selects: it may keep it.
func (p *Proxy) CutAfterIsolate(m Matcher) (struck <-chan struct{}, heal func()) {
	a := &armedCut{match: m, fired: make(chan struct{}), isolate: true}
	p.mu.Lock()
	p.armed = a
	p.mu.Unlock()
	var once sync.Once
	heal = func() { once.Do(p.heal) }
	p.t.Cleanup(heal)
	return a.fired, heal
}

// HoldBefore arms a one-shot hold: the first message m selects is not
// forwarded (nor anything after it in its direction) until release is
// called; held is closed once the message is being held. It lets a test act
// between two steps of a client, e.g. after walrelay read the slot and
// before its START_REPLICATION reaches the server. release is idempotent and
// is called at cleanup.
func (p *Proxy) HoldBefore(m Matcher) (held <-chan struct{}, release func()) {
	h := &armedHold{match: m, held: make(chan struct{}), released: make(chan struct{})}
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
	release = func() { h.once.Do(func() { close(h.released) }) }
	p.t.Cleanup(release)
	return h.held, release
}

// HoldAll holds every message m selects, on every connection, and what
// follows it in its direction, until release is called (at cleanup at the
// latest): e.g. every produce request, whichever of a client's connections
// carries it. HoldBefore holds only the first, on one connection.
func (p *Proxy) HoldAll(m Matcher) (release func()) {
	h := &armedHold{match: m, released: make(chan struct{})}
	p.mu.Lock()
	p.holdAll = h
	p.mu.Unlock()
	release = func() {
		h.once.Do(func() {
			p.mu.Lock()
			if p.holdAll == h {
				p.holdAll = nil
			}
			p.mu.Unlock()
			close(h.released)
		})
	}
	p.t.Cleanup(release)
	return release
}

// Drop discards every message m selects, in either direction, until stop is
// called (at cleanup at the latest). It isolates a client's own logic from a
// message it would otherwise react to, e.g. the walsender's keepalives.
func (p *Proxy) Drop(m Matcher) (stop func()) {
	p.mu.Lock()
	p.drop = m
	p.mu.Unlock()
	stop = func() {
		p.mu.Lock()
		p.drop = nil
		p.mu.Unlock()
	}
	p.t.Cleanup(stop)
	return stop
}

// Disarm withdraws a cut that has not struck.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	p.armed = nil
	p.mu.Unlock()
}

// Stats returns the connections accepted, the cuts made and the messages
// forwarded by kind (see Kind).
func (p *Proxy) Stats() (conns, cuts int, seen map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen = make(map[string]int, len(p.seen))
	for k, v := range p.seen {
		seen[k] = v
	}
	return p.conns, p.cuts, seen
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isolated {
			p.conns++
			p.blackhole = append(p.blackhole, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s, requests: map[int32][2]int16{}}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.conns++
		p.mu.Unlock()
		var wg sync.WaitGroup
		wg.Add(2)
		go p.pump(l, ToServer, &wg)
		go p.pump(l, ToClient, &wg)
		go func() {
			wg.Wait()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}()
	}
}

// pump forwards the messages of one direction of l until either side ends.
func (p *Proxy) pump(l *link, dir Dir, wg *sync.WaitGroup) {
	defer wg.Done()
	defer l.close(false)
	src, dst := l.client, l.server
	if dir == ToClient {
		src, dst = l.server, l.client
	}
	r := bufio.NewReaderSize(src, 64<<10)
	startup := dir == ToServer // PostgreSQL's first client message has no type byte
	var owed time.Duration     // SetServerRate's sleep not yet taken
	for {
		var msg []byte
		var err error
		if p.kafka {
			msg, err = readKafka(r)
		} else {
			msg, err = readPG(r, startup)
			startup = false
		}
		if err != nil {
			return
		}
		if dir == ToClient {
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
		}
		p.mu.Lock()
		h := p.hold
		if h != nil && h.match(dir, msg) {
			p.hold = nil
		} else {
			h = nil
		}
		all := p.holdAll
		if all != nil && !all.match(dir, msg) {
			all = nil
		}
		dropped := p.drop != nil && p.drop(dir, msg)
		delay := p.delay
		p.mu.Unlock()
		if dropped {
			continue
		}
		if delay != nil && delay.match(dir, msg) {
			time.Sleep(delay.d)
		}
		if h != nil {
			close(h.held)
			<-h.released
		}
		if all != nil {
			<-all.released
		}
		if p.kafka {
			p.mu.Lock()
			rewrite := p.rewrite
			p.mu.Unlock()
			if msg, err = l.kafkaMessage(dir, msg, rewrite); err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, err)
				p.mu.Unlock()
				return
			}
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
		if rate := p.rate.Load(); dir == ToServer && rate > 0 {
			time.Sleep(time.Duration(int64(len(msg)) * int64(time.Second) / rate))
		}
		if rate := p.srvRate.Load(); dir == ToClient && rate > 0 {
			// N.B. a sleep per message overshoots (timer slack) and
			// would slow a stream of small messages far below rate.
			if owed += time.Duration(int64(len(msg)) * int64(time.Second) / rate); owed >= 10*time.Millisecond {
				start := time.Now()
				time.Sleep(owed)
				owed -= time.Since(start)
			}
		}
		p.mu.Lock()
		if k := p.kind(dir, msg); k != "" {
			p.seen[k]++
		}
		a := p.armed
		if a != nil && a.match(dir, msg) {
			p.armed = nil
			p.cuts++
			if a.isolate {
				p.isolated = true // before any new connection is let through
			}
		} else {
			a = nil
		}
		p.mu.Unlock()
		if a != nil {
			// N.B. no reset: the message just forwarded reaches its peer
			// before the connection ends.
			l.closeAfterDelivery(dir)
			if a.isolate {
				p.CutAll()
			}
			close(a.fired)
			return
		}
	}
}

// readPG reads one PostgreSQL protocol message: type byte (none for the
// startup message) and a length that counts itself.
func readPG(r *bufio.Reader, startup bool) ([]byte, error) {
	hdr := 5
	if startup {
		hdr = 4
	}
	head, err := r.Peek(hdr)
	if err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(head[hdr-4:]))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("postgres message length %d", n)
	}
	if startup && n == 8 {
		// An SSLRequest or GSSENCRequest would be answered by a single
		// untyped byte; the test bed's DSNs say sslmode=disable.
		return nil, errors.New("proxy: SSL and GSS encryption requests are not supported")
	}
	msg := make([]byte, hdr-4+n)
	_, err = io.ReadFull(r, msg)
	return msg, err
}

// readKafka reads one Kafka request or response: a length, then that many
// bytes.
func readKafka(r *bufio.Reader) ([]byte, error) {
	head, err := r.Peek(4)
	if err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(head))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("kafka message length %d", n)
	}
	msg := make([]byte, 4+n)
	_, err = io.ReadFull(r, msg)
	return msg, err
}

// kafkaMessage notes each request's API key and version by correlation id,
// and rewrites metadata responses to advertise the proxies in rewrite
// instead of the brokers they stand for.
func (l *link) kafkaMessage(dir Dir, msg []byte, rewrite map[string]string) ([]byte, error) {
	if dir == ToServer {
		if len(msg) >= 12 {
			key, version := int16(binary.BigEndian.Uint16(msg[4:])), int16(binary.BigEndian.Uint16(msg[6:]))
			l.mu.Lock()
			l.requests[int32(binary.BigEndian.Uint32(msg[8:]))] = [2]int16{key, version}
			l.mu.Unlock()
		}
		return msg, nil
	}
	if len(msg) < 8 {
		return nil, errors.New("kafka response without correlation id")
	}
	corr := int32(binary.BigEndian.Uint32(msg[4:]))
	l.mu.Lock()
	req, ok := l.requests[corr]
	delete(l.requests, corr)
	l.mu.Unlock()
	if !ok || req[0] != (&kmsg.MetadataResponse{}).Key() {
		return msg, nil
	}
	return rewriteMetadata(msg, req[1], rewrite)
}

// rewriteMetadata replaces each broker at an address of rewrite with the
// address it maps to in a Metadata response of the given version.
func rewriteMetadata(msg []byte, version int16, rewrite map[string]string) ([]byte, error) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	body := 8 // size, correlation id
	if resp.IsFlexible() {
		// Response header v1: tagged fields after the correlation id.
		n, sz := binary.Uvarint(msg[body:])
		if sz <= 0 {
			return nil, errors.New("metadata response: bad header tags")
		}
		body += sz
		for i := uint64(0); i < n; i++ {
			for j := 0; j < 2; j++ { // tag, then size
				v, sz := binary.Uvarint(msg[body:])
				if sz <= 0 {
					return nil, errors.New("metadata response: bad header tags")
				}
				body += sz
				if j == 1 {
					body += int(v)
				}
			}
		}
	}
	if err := resp.ReadFrom(msg[body:]); err != nil {
		return nil, fmt.Errorf("metadata response v%d: %w", version, err)
	}
	for i := range resp.Brokers {
		b := &resp.Brokers[i]
		self, ok := rewrite[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))]
		if !ok {
			continue
		}
		sh, sp, err := net.SplitHostPort(self)
		if err != nil {
			return nil, err
		}
		sport, err := strconv.Atoi(sp)
		if err != nil {
			return nil, err
		}
		b.Host, b.Port = sh, int32(sport)
	}
	out := append([]byte(nil), msg[:body]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// kind names messages worth counting: Kafka requests by API, PostgreSQL
// replication messages.
func (p *Proxy) kind(dir Dir, msg []byte) string {
	switch {
	case p.kafka && dir == ToServer && len(msg) >= 6:
		switch binary.BigEndian.Uint16(msg[4:]) {
		case 0:
			return "produce"
		case 3:
			return "metadata"
		}
	case !p.kafka && PGCommit(dir, msg):
		return "commit"
	case !p.kafka && PGStatusUpdate(dir, msg):
		return "status_update"
	}
	return ""
}

// PGCommit selects an XLogData message carrying a pgoutput Commit, sent by
// the server: the relay has the whole transaction but has not confirmed it.
func PGCommit(dir Dir, msg []byte) bool {
	// 'd', length(4), 'w', start(8), end(8), time(8), then the WAL data.
	return dir == ToClient && len(msg) > 30 && msg[0] == 'd' && msg[5] == 'w' && msg[30] == 'C'
}

// PGStartReplication selects the client's START_REPLICATION command: the
// relay has read the slot and is about to take it.
func PGStartReplication(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) > 5 && msg[0] == 'Q' && bytes.HasPrefix(msg[5:], []byte("START_REPLICATION"))
}

// PGKeepalive selects a primary keepalive message sent by the server.
func PGKeepalive(dir Dir, msg []byte) bool {
	return dir == ToClient && len(msg) > 5 && msg[0] == 'd' && msg[5] == 'k'
}

// PGStatusUpdate selects a standby status update sent by the client: the
// relay confirming a position.
func PGStatusUpdate(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) > 5 && msg[0] == 'd' && msg[5] == 'r'
}

// KafkaProduce selects a produce request: the broker appends its records,
// and the cut keeps the acknowledgement from the producer.
func KafkaProduce(dir Dir, msg []byte) bool {
	return dir == ToServer && len(msg) >= 6 && binary.BigEndian.Uint16(msg[4:]) == 0
}
