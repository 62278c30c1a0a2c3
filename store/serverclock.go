package store

import (
	"context"
	"sync"
	"time"
)

// DefaultServerClockSync is how often a [ServerClock] measures the server's
// clock again when its caller gives no period.
const DefaultServerClockSync = 10 * time.Second

// ServerClock is a [Clock] that follows a server's clock rather than the
// local one: it measures the offset between the two (half the round trip
// taken off) and adds it to the local clock's readings. Leases and
// retention windows judged by it agree across workers whose own clocks
// disagree, to within their round trips to the server, however far apart
// the workers' clocks are. The durable stores use one by default.
//
// Call [ServerClock.SyncIfStale] before reading the time in an operation
// that has a context: it measures again once the last measurement is older
// than the sync period (the first call always measures). A measurement
// takes at most a second; one that fails keeps the last offset (none: the
// local clock's reading) and is tried again on the next call.
type ServerClock struct {
	local Clock
	every time.Duration
	fetch func(context.Context) (time.Time, error)

	mu       sync.Mutex
	offset   time.Duration
	synced   time.Time // local time of the last measurement; zero: none yet
	inflight bool
	first    chan struct{} // closed when the first measurement is done
}

// NewServerClock returns a clock that reads local (nil: the system's clock)
// corrected by the server's time as fetch reports it, measured again every
// every (zero: DefaultServerClockSync).
func NewServerClock(local Clock, every time.Duration, fetch func(context.Context) (time.Time, error)) *ServerClock {
	if local == nil {
		local = SystemClock{}
	}
	if every <= 0 {
		every = DefaultServerClockSync
	}
	return &ServerClock{local: local, every: every, fetch: fetch, first: make(chan struct{})}
}

// Now returns the local time corrected by the last measured offset.
func (c *ServerClock) Now() time.Time {
	c.mu.Lock()
	offset := c.offset
	c.mu.Unlock()
	return c.local.Now().Add(offset)
}

// Offset returns the last measured offset of the server's clock from the
// local one.
func (c *ServerClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// SyncIfStale measures the offset again when the last measurement is older
// than the sync period. Only one measurement runs at a time; callers that
// find one running go on with the current offset, except before the first
// measurement, which they wait for (or for ctx).
func (c *ServerClock) SyncIfStale(ctx context.Context) {
	c.mu.Lock()
	now := c.local.Now()
	never := c.synced.IsZero()
	if (!never && now.Sub(c.synced) < c.every) || c.inflight {
		first := c.first
		c.mu.Unlock()
		if never {
			select {
			case <-first:
			case <-ctx.Done():
			}
		}
		return
	}
	c.inflight = true
	c.mu.Unlock()

	offset, err := c.measure(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight = false
	if err != nil {
		if never {
			// Let the waiters go on with the local clock; the next call
			// measures again.
			close(c.first)
			c.first = make(chan struct{})
		}
		return
	}
	c.offset, c.synced = offset, c.local.Now()
	if never {
		close(c.first)
	}
}

// serverClockTimeout bounds one measurement, so that a server that does not
// answer leaves the caller's own deadline to the operation it came for.
const serverClockTimeout = time.Second

func (c *ServerClock) measure(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, serverClockTimeout)
	defer cancel()
	start := c.local.Now()
	server, err := c.fetch(ctx)
	if err != nil {
		return 0, err
	}
	end := c.local.Now()
	midpoint := start.Add(end.Sub(start) / 2)
	return server.Sub(midpoint), nil
}
