// Package backoff is how the library paces every retry and bounds every
// cleanup: one growing pause, and one timeout for the store calls that
// undo or settle something after the caller's own context has ended.
//
// The dispatcher's retries of a store that is down, the background
// settlement of an orphaned claim, the pgstore listener's reconnects and
// the Redis store's waits and subscription all pause with a [Backoff]; a
// store call made on a path whose context has ended (undoing a claim whose
// answer was lost, closing a listener) gets [CleanupTimeout].
package backoff

import (
	"context"
	"time"
)

// CleanupTimeout bounds one store call that undoes or settles something
// after its caller's context ended: a claim whose answer did not arrive is
// taken back, a listener's connection is closed. It is best effort either
// way: what it cannot undo in this time stays until its lease runs out.
const CleanupTimeout = 5 * time.Second

// MaxStorePause caps the pause between retries of a store that is down
// while a caller waits: the dispatcher's claims and waits before the body
// runs.
const MaxStorePause = 2 * time.Second

// MaxBackgroundPause caps the pause between retries that nobody waits for:
// the background settlement of an orphaned claim, a listener reconnecting.
const MaxBackgroundPause = 5 * time.Second

// Backoff is a pause that starts at an initial value and doubles, up to a
// cap, each time it is taken; Reset starts it over once what was retried
// answers. The zero value never pauses. It is not safe for concurrent use.
type Backoff struct {
	initial, max, next time.Duration
}

// New returns a Backoff from initial up to max. A max below initial is
// taken as initial; a max of zero or less means no cap.
func New(initial, max time.Duration) Backoff {
	if max > 0 && max < initial {
		max = initial
	}
	return Backoff{initial: initial, max: max, next: initial}
}

// Peek returns the pause Next would return, without taking it.
func (b *Backoff) Peek() time.Duration { return b.next }

// Next returns the pause to take now and doubles the one after, up to the
// cap.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next *= 2
	if b.max > 0 && b.next > b.max {
		b.next = b.max
	}
	if b.next < d { // overflow without a cap
		b.next = d
	}
	return d
}

// Reset starts the pauses over from the initial value.
func (b *Backoff) Reset() { b.next = b.initial }

// Sleep takes the next pause, and reports false, at once, if ctx ends
// first.
func (b *Backoff) Sleep(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
