package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/idempotency/internal/backoff"
	"github.com/tesserix/idempotency/store"
)

// listenRetryMin is the first pause before the listener reconnects; the
// pauses double up to backoff.MaxBackgroundPause.
const listenRetryMin = 100 * time.Millisecond

// listener is a store's one LISTEN connection, started on the first Wait,
// and the waiters it fans notifications out to by payload (a digest of
// tenant and key).
type listener struct {
	s *Store

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
	started bool
	closed  bool
	// listening is set while a connection is LISTENing; delivered counts
	// notifications that found a waiter. Both are for tests.
	listening bool
	delivered int64
	cancel    context.CancelFunc
	done      chan struct{}
}

// waiter is one Wait call's wake-up signal. The channel holds at most one
// pending wake-up; more collapse into it.
type waiter struct {
	payload string
	ch      chan struct{}
}

func newListener(s *Store) *listener {
	return &listener{s: s, waiters: make(map[string]map[*waiter]struct{})}
}

// subscribe registers a waiter for payload and starts the listener if it is
// not running. Registering before the caller reads the record is what makes
// a change between that read and the wait impossible to miss.
func (l *listener) subscribe(payload string) *waiter {
	w := &waiter{payload: payload, ch: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.waiters[payload]
	if set == nil {
		set = make(map[*waiter]struct{})
		l.waiters[payload] = set
	}
	set[w] = struct{}{}
	if !l.started && !l.closed {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		l.done = make(chan struct{})
		go l.run(ctx)
	}
	return w
}

func (l *listener) unsubscribe(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.waiters[w.payload]
	delete(set, w)
	if len(set) == 0 {
		delete(l.waiters, w.payload)
	}
}

// wake signals every waiter on payload, or every waiter when payload is "".
func (l *listener) wake(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, set := range l.waiters {
		if payload != "" && p != payload {
			continue
		}
		if payload != "" {
			l.delivered++
		}
		for w := range set {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the listener and waits for its goroutine to finish; waiters
// are woken and continue by polling.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	l.wake("")
}

// run keeps one LISTEN connection open until ctx ends, reconnecting with
// backoff when it breaks.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	pause := backoff.New(listenRetryMin, backoff.MaxBackgroundPause)
	for {
		listening := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listening {
			pause.Reset()
		}
		if !pause.Sleep(ctx) {
			return
		}
	}
}

// listen acquires a connection, LISTENs, wakes every waiter (notifications
// sent while no connection listened are lost, so everybody re-reads), then
// delivers notifications until the connection fails or ctx ends. It reports
// whether it got as far as listening.
//
// The connection is hijacked from the pool: it never returns to it still
// subscribed, does not count against the pool's MaxConns (so a Wait can
// always poll, even on a pool of one), and is closed when listen returns.
func (l *listener) listen(ctx context.Context) (listening bool) {
	pc, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), backoff.CleanupTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+l.s.channel); err != nil {
		return false
	}
	l.setListening(true)
	defer l.setListening(false)
	l.wake("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.wake(n.Payload)
	}
}

// Wait implements [store.Store.Wait]. A change to the key announced on the
// store's channel wakes it at once; otherwise it re-reads the record after
// PollInterval, backing off to MaxPollInterval, and never later than the
// lease's end by the store's clock. Without [Capabilities.Notify] nothing
// is announced and it only polls. Polling is what notices a lease running
// out, and what covers notifications lost while the listener reconnects.
// An unreachable database ends the wait with an error matching
// store.ErrUnavailable.
func (s *Store) Wait(ctx context.Context, p store.WaitParams) (store.Result, error) {
	const op = "wait"
	if err := begin(ctx, op, p); err != nil {
		return store.Result{}, err
	}
	// Without notifications nothing wakes the wait but its timer, and no
	// connection listens.
	var wake <-chan struct{}
	if s.caps.Notify {
		w := s.l.subscribe(payloadFor(p.Tenant, p.Key))
		defer s.l.unsubscribe(w)
		wake = w.ch
	}

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	poll := backoff.New(s.opts.PollInterval, s.opts.MaxPollInterval)
	for first := true; ; first = false {
		var (
			rec store.Record
			err error
		)
		if first && s.caps.Notify {
			// Mark the record watched, so whoever settles it announces it.
			rec, err = s.watch(ctx, p.Tenant, p.Key)
		} else {
			rec, err = s.lookup(ctx, p.Tenant, p.Key)
		}
		now := s.now(ctx)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.Result{Status: store.StatusFree}, nil
		case err != nil:
			return store.Result{}, s.interpret(ctx, op, err)
		case rec.State == store.StateCompleted:
			return store.Result{Status: store.StatusCompleted, Record: rec}, nil
		case rec.State == store.StateIndeterminate:
			return store.Result{Status: store.StatusIndeterminate, Record: rec}, nil
		case rec.Token != p.Token || !now.Before(rec.LeaseUntil):
			return store.Result{Status: store.StatusHeld, Record: rec, LeaseExpired: !now.Before(rec.LeaseUntil)}, nil
		}
		d := min(poll.Peek(), max(rec.LeaseUntil.Sub(now), time.Millisecond))
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		if s.onBlock != nil {
			s.onBlock(p)
		}
		select {
		case <-wake:
		case <-timer.C:
			poll.Next()
		case <-ctx.Done():
			return store.Result{}, fmt.Errorf("pgstore: %s on %q in tenant %q: %w", op, p.Key, p.Tenant, ctx.Err())
		}
	}
}

func (l *listener) setListening(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = on
}
