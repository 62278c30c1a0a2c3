package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// subscribeRetry is how long the store waits before trying to subscribe
// again after a failed attempt; Waits poll in the meantime.
const subscribeRetry = time.Second

// receiveTimeout bounds one read of the subscriber so that a connection that
// died silently is noticed by a ping.
const receiveTimeout = 30 * time.Second

// Wait implements [store.Store.Wait]. It re-reads the record whenever a
// script publishes a change to the key, whenever the subscriber reconnects
// (notifications may have been lost), when the lease runs out by a clock
// that moves with real time, and otherwise with a backoff from 10ms up to
// Options.PollInterval.
func (s *Store) Wait(ctx context.Context, p store.WaitParams) (store.Result, error) {
	if err := p.Validate(); err != nil {
		return store.Result{}, err
	}
	rk := s.recordKey(p.Tenant, p.Key)
	wake := s.watch(rk)
	defer s.unwatch(rk, wake)
	s.subscribe()

	backoff := minPoll
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := s.now(ctx)
		r, ok, err := s.readWaiting(ctx, p.Tenant, p.Key, now)
		if err != nil {
			return store.Result{}, err
		}
		if !ok {
			return store.Result{Status: store.StatusFree}, nil
		}
		if res := resultOf(r, now); res.Status != store.StatusHeld || r.Token != p.Token || res.LeaseExpired {
			return res, nil
		}

		d := backoff
		backoff = min(2*backoff, s.poll)
		if s.noPoll {
			d = time.Hour
		}
		if untilLease := r.LeaseUntil.Sub(now.time()); untilLease > 0 && untilLease < d {
			d = untilLease
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return store.Result{}, translate(ctx, "wait", ctx.Err())
		case <-wake:
			backoff = minPoll
			timer.Stop() // Since Go 1.23 a stopped timer never delivers a stale tick.
		case <-timer.C:
		}
	}
}

// readWaiting is read for Wait: it also registers the Wait on a pending
// record in Redis, so that the change that ends the claim is published (the
// scripts publish nothing for a record no Wait registered on).
func (s *Store) readWaiting(ctx context.Context, tenant, key string, now stamp) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, translate(ctx, "wait", err)
	}
	v, err := s.run(ctx, waitReadScript, []string{s.recordKey(tenant, key)})
	if err != nil {
		return store.Record{}, false, translate(ctx, "wait", err)
	}
	flat, ok := v.([]any)
	if !ok {
		return store.Record{}, false, fmt.Errorf("redisstore: wait: unexpected reply %T", v)
	}
	if len(flat) == 0 {
		return store.Record{}, false, nil
	}
	r, err := parseRecord(tenant, key, pairs(flat))
	if err != nil {
		return store.Record{}, false, fmt.Errorf("redisstore: wait: %w", err)
	}
	if !now.time().Before(r.ExpiresAt) {
		return store.Record{}, false, nil
	}
	return r, true, nil
}

// watch registers a waiter on the record key rk.
func (s *Store) watch(rk string) chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.waiters[rk]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		s.waiters[rk] = set
	}
	set[ch] = struct{}{}
	return ch
}

func (s *Store) unwatch(rk string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.waiters[rk]
	delete(set, ch)
	if len(set) == 0 {
		delete(s.waiters, rk)
	}
}

// notify wakes the waiters on rk without blocking.
func (s *Store) notify(rk string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters[rk] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// broadcast wakes every waiter, for when notifications may have been lost.
func (s *Store) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// subscribe starts the store's subscriber if it is not running, has not
// failed within the last second, and the store is open. It returns once the
// subscription is confirmed by Redis (so that a change made after the
// caller's next read is seen) or has failed; a failure only means the
// waiters poll.
func (s *Store) subscribe() {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.sub != nil || s.life.Err() != nil || time.Now().Before(s.subRetry) {
		return
	}
	ps := s.client.Subscribe(s.life, s.channel)
	ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
	defer cancel()
	msg, err := ps.Receive(ctx)
	if _, ok := msg.(*redis.Subscription); err != nil || !ok {
		_ = ps.Close()
		s.subRetry = time.Now().Add(subscribeRetry)
		return
	}
	s.sub = ps
	s.subDone = make(chan struct{})
	go s.receive(ps, s.subDone)
}

// receive fans notifications out to the waiters until the store is closed.
// go-redis reconnects and re-subscribes by itself after an error; every
// error and every re-subscription wakes all waiters, since messages
// published in between were lost.
func (s *Store) receive(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	backoff := minPoll
	for {
		msg, err := ps.ReceiveTimeout(s.life, receiveTimeout)
		if s.life.Err() != nil {
			return
		}
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				// Quiet channel: check that the connection still answers.
				err = ps.Ping(s.life)
				if err == nil {
					continue
				}
			}
			s.broadcast()
			select {
			case <-s.life.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = minPoll
		switch m := msg.(type) {
		case *redis.Message:
			s.notify(m.Payload)
		case *redis.Subscription:
			s.broadcast()
		}
	}
}
