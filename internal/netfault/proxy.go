// Package netfault is a TCP proxy for tests that need the network to fail
// the way real networks do: a reply that arrives late or not at all, a
// connection cut in the middle of an answer, one direction that stalls while
// the other flows. A store's client connects to [Proxy.Addr] instead of the
// server; the test (or the fault run's nemesis) turns faults on and off while
// traffic flows.
//
// It listens on loopback only. Every fault applies per direction: [Up] is
// what the client sends to the server, [Down] what the server answers.
package netfault

import (
	"io"
	"net"
	"sync"
	"time"
)

// Direction is one way through the proxy.
type Direction int

const (
	// Up is from the client to the server: requests.
	Up Direction = iota
	// Down is from the server to the client: replies.
	Down
)

// String returns "up" or "down".
func (d Direction) String() string {
	if d == Down {
		return "down"
	}
	return "up"
}

// chunkSize bounds what one read takes from a connection, so a fault that
// cuts "in the middle of a reply" has a middle to cut in.
const chunkSize = 16 << 10

// Proxy forwards TCP connections from its loopback address to a target,
// applying the faults set on it to every connection, open or future. It is
// safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a fault changes
	delay   [2]time.Duration
	stalled [2]bool
	cuts    [2]int // chunks of each direction that cut their connection halfway
	refuse  bool
	conns   map[*link]struct{}
	closed  bool
	stats   Stats

	wg sync.WaitGroup
}

// Stats counts what the proxy did, for a test to report.
type Stats struct {
	// Accepted counts the connections the proxy accepted.
	Accepted int
	// Refused counts the connections it closed at once (see Refuse).
	Refused int
	// Cut counts the connections it cut: by CutAll, or halfway through a
	// chunk (see CutNext).
	Cut int
}

// Start listens on a free loopback port and forwards every connection to
// target (host:port). Close stops it.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetDelay holds every chunk travelling in dir until d has passed since it
// arrived (zero: none). Order is kept. The delay in force when a chunk is
// due applies, so shrinking it releases held chunks sooner.
func (p *Proxy) SetDelay(dir Direction, d time.Duration) {
	p.update(func() { p.delay[dir] = max(d, 0) })
}

// Stall holds everything travelling in dir, without closing anything, until
// Resume. The other direction keeps flowing.
func (p *Proxy) Stall(dir Direction) { p.update(func() { p.stalled[dir] = true }) }

// Resume lets what Stall held in dir flow again, in order.
func (p *Proxy) Resume(dir Direction) { p.update(func() { p.stalled[dir] = false }) }

// CutNext makes each of the next n chunks travelling in dir cut its
// connection halfway: the first half is delivered, then both sides of the
// connection are closed. In Down this is a reply lost in the middle.
func (p *Proxy) CutNext(dir Direction, n int) { p.update(func() { p.cuts[dir] = max(n, 0) }) }

// Refuse makes the proxy close every new connection at once (true) or
// forward them again (false); open connections are left alone.
func (p *Proxy) Refuse(on bool) { p.update(func() { p.refuse = on }) }

// Heal turns every fault off: no delay, no stall, no pending cut, no
// refusal. Held chunks flow on.
func (p *Proxy) Heal() {
	p.update(func() {
		p.delay = [2]time.Duration{}
		p.stalled = [2]bool{}
		p.cuts = [2]int{}
		p.refuse = false
	})
}

// CutAll closes every open connection at once, whatever is in flight.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.stats.Cut += len(links)
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines. It may be called more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.update(func() {}) // wake every held chunk
	p.wg.Wait()
	return err
}

// update changes the faults under the lock and wakes every chunk waiting
// on them.
func (p *Proxy) update(f func()) {
	p.mu.Lock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		if refuse {
			p.stats.Refused++
		}
		p.mu.Unlock()
		if refuse || closed {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, Up, client, server) }()
	go func() { defer wg.Done(); p.pipe(l, Down, server, client) }()
	wg.Wait()
}

// chunk is what one read took, and when.
type chunk struct {
	data []byte
	at   time.Time
}

// pipe copies from src to dst in one direction, through the faults: a
// reader queues chunks as they arrive; the writer passes each on when the
// faults allow.
func (p *Proxy) pipe(l *link, dir Direction, src, dst net.Conn) {
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{data: buf[:n], at: time.Now()}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if !p.hold(l, dir, c) {
			break
		}
		if p.takeCut(dir) {
			_, _ = dst.Write(c.data[:len(c.data)/2])
			p.mu.Lock()
			p.stats.Cut++
			p.mu.Unlock()
			l.close()
			break
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	// The source ended (or the link was cut): end the whole link, as a
	// connection that breaks on one side breaks on both.
	l.close()
	for range queue {
		// Drained, so the reader is never blocked on a closed link.
	}
}

// hold blocks until c may travel in dir: its delay has passed and dir is
// not stalled. It reports false when the link closed meanwhile.
func (p *Proxy) hold(l *link, dir Direction, c chunk) bool {
	for {
		p.mu.Lock()
		delay, stalled, changed := p.delay[dir], p.stalled[dir], p.changed
		p.mu.Unlock()
		wait := time.Until(c.at.Add(delay))
		if !stalled && wait <= 0 {
			return true
		}
		var (
			t     *time.Timer
			timer <-chan time.Time
		)
		if !stalled {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-l.done:
		case <-changed:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-l.done:
			return false
		default:
		}
	}
}

// takeCut reports whether the chunk about to travel in dir is one CutNext
// asked to cut, and counts it.
func (p *Proxy) takeCut(dir Direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cuts[dir] == 0 {
		return false
	}
	p.cuts[dir]--
	return true
}

var _ io.Closer = (*Proxy)(nil)
