package store

import (
	"context"
	"time"
)

// Sweep runs s.Sweep in batches of limit (DefaultSweepLimit when zero) until
// a batch comes back short, so one call reclaims every record expired by
// then without holding any lock for long. It returns how many records it
// deleted, and stops at the first error or when ctx ends.
func Sweep(ctx context.Context, s Store, limit int) (int, error) {
	p := SweepParams{Limit: limit}
	if err := p.Validate(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := s.Sweep(ctx, p)
		total += n
		if err != nil || n < p.EffectiveLimit() {
			return total, err
		}
	}
}

// SweepEvery calls [Sweep] on s every interval until ctx ends, handing each
// error to onError (which may be nil). Expired records already read as free;
// sweeping only reclaims their space. Run it in a goroutine of its own.
func SweepEvery(ctx context.Context, s Store, interval time.Duration, limit int, onError func(error)) {
	SweepEveryThen(ctx, s, interval, limit, onError, nil)
}

// SweepEveryThen is [SweepEvery] that calls then (when not nil) after each
// sweep, on the same schedule: the worker package counts the backlog there
// when its SweepInterval is set.
func SweepEveryThen(ctx context.Context, s Store, interval time.Duration, limit int, onError func(error), then func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := Sweep(ctx, s, limit); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		if then != nil && ctx.Err() == nil {
			then(ctx)
		}
	}
}
