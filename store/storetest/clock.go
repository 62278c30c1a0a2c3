package storetest

import (
	"sync"
	"time"

	"github.com/tesserix/idempotency/store"
)

// Clock is a [store.Clock] that moves only when told to. It is safe for
// concurrent use: a test may Advance it while a store reads it from other
// goroutines.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ store.Clock = (*Clock)(nil)

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
