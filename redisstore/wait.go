package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/backoff"
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
	rk := s.keys.recordKey(p.Tenant, p.Key)
	wake := s.notes.watch(rk)
	defer s.notes.unwatch(rk, wake)
	defer s.notes.subscribe(ctx, p.Tenant)()

	poll := backoff.New(minPoll, s.poll)
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

		d := poll.Next()
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
			poll.Reset()
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
	v, err := run(ctx, s.client, waitReadScript, []string{s.keys.recordKey(tenant, key)})
	if err == redis.Nil {
		return store.Record{}, false, nil
	}
	if err != nil {
		return store.Record{}, false, translate(ctx, "wait", err)
	}
	packed, ok := v.(string)
	if !ok {
		return store.Record{}, false, fmt.Errorf("redisstore: wait: unexpected reply %T", v)
	}
	r, err := parsePacked("wait", tenant, key, packed)
	if err != nil {
		return store.Record{}, false, err
	}
	if !now.time().Before(r.ExpiresAt) {
		return store.Record{}, false, nil
	}
	return r, true, nil
}

// notifier announces and hears the changes a Wait waits for: the command
// and channel the scripts announce a change with (publisher), the Store's
// subscriptions, and the Waits registered on each record key.
type notifier struct {
	client  redis.UniversalClient
	keys    layout
	channel string // the classic pub/sub channel, P:events

	// life ends when the Store is closed; the subscribers run under it.
	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}

	// startMu serialises starting and stopping subscriptions; subs holds
	// them by channel: the one channel of classic pub/sub, or one per
	// tenant with sharded pub/sub.
	startMu sync.Mutex
	subs    map[string]*subscription

	// shardMode is how changes are announced: modeUnknown until the first
	// call that needs it asks the server (publisher).
	shardMode atomic.Int32
}

// close ends the subscriptions (subscribing is refused from now on) and
// wakes every Wait, which then polls.
func (n *notifier) close() {
	n.cancel()
	n.startMu.Lock()
	subs := n.subs
	n.subs = make(map[string]*subscription)
	n.startMu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
	n.broadcast()
}

// watch registers a waiter on the record key rk.
func (n *notifier) watch(rk string) chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.waiters[rk]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		n.waiters[rk] = set
	}
	set[ch] = struct{}{}
	return ch
}

func (n *notifier) unwatch(rk string, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.waiters[rk]
	delete(set, ch)
	if len(set) == 0 {
		delete(n.waiters, rk)
	}
}

// notify wakes the waiters on rk without blocking.
func (n *notifier) notify(rk string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[rk] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// broadcast wakes every waiter, for when notifications may have been lost.
func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, set := range n.waiters {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// The announcement modes of publisher.
const (
	modeUnknown int32 = iota
	modeClassic
	modeSharded
)

// shardedIdle is how long a tenant's sharded subscription outlives its
// last Wait, so that the Waits of a busy tenant do not each pay for a
// subscription of their own.
const shardedIdle = 30 * time.Second

// publisher returns the command and channel the scripts announce a change
// of tenant's records with: on a Cluster whose servers have sharded
// pub/sub (Redis 7.0+, found with COMMAND INFO SPUBLISH once per Store),
// SPUBLISH on the tenant's channel, which shares its records' hash tag, so
// the message stays on the node that owns their slot; otherwise PUBLISH
// on the store's channel (a Cluster broadcasts it to every node). A failed
// question answers classic pub/sub and is asked again next time.
func (n *notifier) publisher(ctx context.Context, tenant string) (string, string) {
	if n.sharded(ctx) {
		return "SPUBLISH", n.keys.tenantChannel(tenant)
	}
	return "PUBLISH", n.channel
}

func (n *notifier) sharded(ctx context.Context) bool {
	switch n.shardMode.Load() {
	case modeClassic:
		return false
	case modeSharded:
		return true
	}
	if _, ok := n.client.(*redis.ClusterClient); !ok {
		n.shardMode.Store(modeClassic)
		return false
	}
	v, err := n.client.Do(ctx, "command", "info", "spublish").Slice()
	if err != nil {
		return false
	}
	if len(v) == 1 && v[0] != nil {
		n.shardMode.Store(modeSharded)
		return true
	}
	n.shardMode.Store(modeClassic)
	return false
}

// subscription is the store's subscription to one channel.
type subscription struct {
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	retry  time.Time   // no new attempt to subscribe before this
	refs   int         // Waits using it (sharded only)
	idle   *time.Timer // stops a sharded subscription nobody uses
}

// stop ends the subscription and waits for its receiver.
func (sub *subscription) stop() {
	if sub.idle != nil {
		sub.idle.Stop()
	}
	if sub.ps != nil {
		sub.cancel()
		_ = sub.ps.Close()
		<-sub.done
		sub.ps = nil
	}
}

// subscribe makes sure the store is subscribed to the channel that
// announces changes of tenant's records (publisher), starting the
// subscription if it is not running, has not failed within the last
// second, and the store is open. It returns once the subscription is
// confirmed by Redis (so that a change made after the caller's next read
// is seen) or has failed; a failure only means the waiters poll. The
// function it returns ends the caller's use: the one classic subscription
// lasts until Close, a tenant's sharded one until shardedIdle after its
// last Wait.
func (n *notifier) subscribe(ctx context.Context, tenant string) func() {
	pub, channel := n.publisher(ctx, tenant)
	sharded := pub == "SPUBLISH"
	n.startMu.Lock()
	defer n.startMu.Unlock()
	if n.life.Err() != nil {
		return func() {}
	}
	sub := n.subs[channel]
	if sub == nil {
		sub = &subscription{}
		n.subs[channel] = sub
	}
	sub.refs++
	if sub.idle != nil {
		sub.idle.Stop()
		sub.idle = nil
	}
	if sub.ps == nil && !time.Now().Before(sub.retry) {
		n.start(sub, channel, sharded)
	}
	return func() { n.unsubscribe(sub, channel, sharded) }
}

// start subscribes sub to channel; startMu is held.
func (n *notifier) start(sub *subscription, channel string, sharded bool) {
	life, cancel := context.WithCancel(n.life)
	var ps *redis.PubSub
	if sharded {
		ps = n.client.SSubscribe(life, channel)
	} else {
		ps = n.client.Subscribe(life, channel)
	}
	ctx, stop := context.WithTimeout(life, 5*time.Second)
	defer stop()
	msg, err := ps.Receive(ctx)
	if _, ok := msg.(*redis.Subscription); err != nil || !ok {
		cancel()
		_ = ps.Close()
		sub.retry = time.Now().Add(subscribeRetry)
		return
	}
	sub.ps, sub.cancel, sub.done = ps, cancel, make(chan struct{})
	go n.receive(life, ps, sub.done)
}

// unsubscribe ends one Wait's use of sub.
func (n *notifier) unsubscribe(sub *subscription, channel string, sharded bool) {
	n.startMu.Lock()
	defer n.startMu.Unlock()
	sub.refs--
	if !sharded || sub.refs > 0 || n.subs[channel] != sub {
		return
	}
	sub.idle = time.AfterFunc(shardedIdle, func() {
		n.startMu.Lock()
		if sub.refs > 0 || n.subs[channel] != sub {
			n.startMu.Unlock()
			return
		}
		delete(n.subs, channel)
		sub.idle = nil
		n.startMu.Unlock()
		sub.stop()
	})
}

// receive fans notifications out to the waiters until life ends (the store
// is closed, or the subscription stopped). go-redis reconnects and
// re-subscribes by itself after an error; every error and every
// re-subscription wakes all waiters, since messages published in between
// were lost.
func (n *notifier) receive(life context.Context, ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	pause := backoff.New(minPoll, time.Second)
	for {
		msg, err := ps.ReceiveTimeout(life, receiveTimeout)
		if life.Err() != nil {
			return
		}
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				// Quiet channel: check that the connection still answers.
				err = ps.Ping(life)
				if err == nil {
					continue
				}
			}
			n.broadcast()
			if !pause.Sleep(life) {
				return
			}
			continue
		}
		pause.Reset()
		switch m := msg.(type) {
		case *redis.Message:
			n.notify(m.Payload)
		case *redis.Subscription:
			n.broadcast()
		}
	}
}
