// Package coalesce lets the calls a process makes at the same moment share
// one round trip, without making a lone call wait.
//
// A call that finds the way free (a connection idle) goes at once, on its
// own path, as if there were no coalescing: nothing is added to its
// latency. A call that arrives while the way is busy joins a queue; when
// one of the group's sends returns, it takes the whole queue (up to a
// bound) as the next batch. From the first call that finds the way busy
// until none of the group's sends is out, the group sends together: a call
// goes alone only when nothing of the group is out, and otherwise joins
// the queue, even when a connection has come free. So batching starts only
// under a load that would have made calls wait for a connection, stops
// once the load no longer keeps a send out, and meanwhile keeps a few
// large batches out rather than many small sends (measured: at 32 callers
// on 16 connections, 1.1–1.5× the per-call floor; batching only the calls
// that found the way busy, 0.9×, since a batch then waited for a connection
// behind the lone calls). Where the load is only a little past the way's
// capacity the batches are small, and sending them one after another
// costs (0.55–0.67× at 8 callers on 4 connections; docs/BENCHMARKS.md).
package coalesce

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Group coalesces calls of one kind. Req is what a call asks, Resp what
// it is answered. The zero Group is not usable: build one with New.
type Group[Req, Resp any] struct {
	busy  func() bool
	max   int
	batch func(ctx context.Context, calls []*Call[Req, Resp])

	// alwaysBatch sends every call through batch, a lone one as a batch of
	// one: for tests of a batch function.
	alwaysBatch bool

	mu       sync.Mutex
	queue    []*Call[Req, Resp]
	inFlight int
	// together is set when a call finds the way busy, and cleared when
	// the last of the group's sends out ends with nobody queued: while it
	// is set, a call goes alone only when none of the group's sends is
	// out, and otherwise queues.
	together bool
}

// AlwaysBatch makes g send every call through its batch function, a lone
// call as a batch of one, so that a test can run a whole suite through it.
// Call it before g is used.
func (g *Group[Req, Resp]) AlwaysBatch() { g.alwaysBatch = true }

// Call is one call in a batch: what it asks, and where its answer goes.
type Call[Req, Resp any] struct {
	// Req is what the call asks.
	Req Req
	// Ctx is the caller's context. A batch runs under a context of its own
	// (the callers' values, and the latest of their deadlines), since one
	// caller giving up must not fail the others.
	Ctx context.Context

	resp Resp
	err  error
	done chan struct{}
	// gone is set, under the Group's lock, when the caller stopped
	// waiting: its context ended while its batch was out.
	gone bool
}

// New returns a Group whose calls go alone while busy reports false (a
// connection is free for them) and otherwise wait for a batch, of at most
// max calls; once busy has reported true, calls wait for a batch whenever
// one of the group's sends is out, until none is (see the package
// documentation). batch sends calls (one or more) together and answers each,
// with Answer, exactly once; it runs on a goroutine of its own.
func New[Req, Resp any](busy func() bool, max int, batch func(ctx context.Context, calls []*Call[Req, Resp])) *Group[Req, Resp] {
	if max < 1 {
		max = 1
	}
	return &Group[Req, Resp]{busy: busy, max: max, batch: batch}
}

// Do makes the call req. When the way is free and nobody queues (or, while
// the group sends together, none of its sends is out), it runs alone at
// once, on the caller's goroutine, and its answer is Do's. Otherwise req waits in the queue for the next batch, and Do returns
// the answer the batch gives it. A caller whose context ends first gets the
// context's error: it leaves the queue, or, when its batch is already out,
// stops waiting for it (Answer then tells the batch so).
func (g *Group[Req, Resp]) Do(ctx context.Context, req Req, alone func(ctx context.Context, req Req) (Resp, error)) (Resp, error) {
	g.mu.Lock()
	busy := g.busy()
	if busy {
		g.together = true
	}
	if len(g.queue) == 0 && !g.alwaysBatch && !busy && (!g.together || g.inFlight == 0) {
		g.inFlight++
		g.mu.Unlock()
		resp, err := alone(ctx, req)
		g.next()
		return resp, err
	}
	c := &Call[Req, Resp]{Req: req, Ctx: ctx, done: make(chan struct{})}
	g.queue = append(g.queue, c)
	if g.inFlight == 0 {
		// None of the group's sends is out to take the queue when it
		// ends (the way is busy with others' calls): send it now.
		g.inFlight++
		g.mu.Unlock()
		g.next()
	} else {
		g.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c.done: // answered as the context ended: the answer stands
		return c.resp, c.err
	default:
	}
	if i := slices.Index(g.queue, c); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	} else {
		c.gone = true
	}
	var zero Resp
	return zero, ctx.Err()
}

// Send sends reqs as one batch now, whatever else is out, and returns
// their answers in order: for tests that need calls in one batch.
func (g *Group[Req, Resp]) Send(ctx context.Context, reqs []Req) ([]Resp, []error) {
	calls := make([]*Call[Req, Resp], len(reqs))
	for i, r := range reqs {
		calls[i] = &Call[Req, Resp]{Req: r, Ctx: ctx, done: make(chan struct{})}
	}
	order := slices.Clone(calls) // the batch function may reorder calls
	bctx, cancel := batchContext(calls)
	defer cancel()
	g.batch(bctx, calls)
	resps, errs := make([]Resp, len(reqs)), make([]error, len(reqs))
	for i, c := range order {
		<-c.done
		resps[i], errs[i] = c.resp, c.err
	}
	return resps, errs
}

// Answer gives c its answer and reports whether its caller takes it. It is
// false when the caller stopped waiting (its context ended while the batch
// was out): a batch function that gave such a call something it must not
// keep (a claim nobody will use) takes it back.
func (g *Group[Req, Resp]) Answer(c *Call[Req, Resp], resp Resp, err error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.gone {
		return false
	}
	c.resp, c.err = resp, err
	close(c.done)
	return true
}

// next is called when one of the group's sends has ended: it takes the
// queue as the next batch, sent on a goroutine of its own, or, when nobody
// waits, counts the send as ended.
func (g *Group[Req, Resp]) next() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.inFlight--
		if g.inFlight == 0 {
			g.together = false
		}
		g.mu.Unlock()
		return
	}
	n := min(len(g.queue), g.max)
	calls := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	g.mu.Unlock()
	go func() {
		ctx, cancel := batchContext(calls)
		defer cancel()
		g.batch(ctx, calls)
		g.next()
	}()
}

// batchContext is the context a batch runs under: the first caller's
// values, never cancelled by a caller, with the latest of the callers'
// deadlines (none when one of them has none).
func batchContext[Req, Resp any](calls []*Call[Req, Resp]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(calls[0].Ctx)
	var latest time.Time
	for _, c := range calls {
		d, ok := c.Ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}
