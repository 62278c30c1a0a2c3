package interceptor

import (
	"context"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
)

// probeProgress is what the ProbeOnSchedule activity heartbeats: how far
// down its schedule it is, so an attempt that replaces one whose worker
// died goes on from there instead of starting over.
type probeProgress struct {
	Asked int           `json:"asked"`
	Delay time.Duration `json:"delay"`
	Last  string        `json:"last,omitempty"`
}

// ProbeOnScheduleActivity returns the activity a waiting workflow asks a
// declared probe through on the whole schedule at once
// ([decision.ProbeOnScheduleActivityName]; see [wire.ProbeOnScheduleChangeID]).
// Each ask is what [Interceptor.ProbeActivity] does (bound to the
// execution's tenant and workflow, within probeTimeout); between asks it
// waits the schedule's pause, heartbeating its progress, and it returns
// the first definite answer (landed, not landed, or the record settled
// elsewhere), or the last answer after Max asks, with Asked set. An
// attempt that replaces one whose worker died goes on from the progress
// its heartbeats recorded. Cancelled (a person decided), it returns at
// once.
func (i *Interceptor) ProbeOnScheduleActivity() func(context.Context, decision.ProbeOnScheduleRequest) (decision.ProbeReply, error) {
	return func(ctx context.Context, req decision.ProbeOnScheduleRequest) (decision.ProbeReply, error) {
		var (
			mu sync.Mutex
			p  = probeProgress{Delay: req.First}
		)
		timed := !req.Now
		if sdkactivity.IsActivity(ctx) && sdkactivity.HasHeartbeatDetails(ctx) {
			var prev probeProgress
			if sdkactivity.GetHeartbeatDetails(ctx, &prev) == nil && prev.Asked > 0 {
				p, timed = prev, true
			}
		}
		progress := func() probeProgress { mu.Lock(); defer mu.Unlock(); return p }
		defer heartbeatProgress(ctx, func() any { return progress() })()
		var reply decision.ProbeReply
		for p.Asked < max(req.Max, 1) {
			if timed {
				if err := sleepCtx(ctx, p.Delay); err != nil {
					return decision.ProbeReply{}, err
				}
				mu.Lock()
				p.Delay = min(2*p.Delay, req.Cap)
				mu.Unlock()
			}
			timed = true
			actx, cancel := context.WithTimeout(ctx, probeTimeout)
			r, err := i.probeOnce(actx, req.Probe)
			cancel()
			if err != nil {
				// Refused (another tenant's record): no ask will do better.
				return decision.ProbeReply{}, err
			}
			if ctx.Err() != nil {
				return decision.ProbeReply{}, ctx.Err()
			}
			mu.Lock()
			p.Asked++
			p.Last = r.Landing
			if r.Detail != "" {
				p.Last += ": " + r.Detail
			}
			mu.Unlock()
			reply = r
			reply.Asked = p.Asked
			if r.Settled || r.Landing == activity.Landed.String() || r.Landing == activity.NotLanded.String() {
				return reply, nil
			}
			if sdkactivity.IsActivity(ctx) {
				sdkactivity.RecordHeartbeat(ctx, progress())
			}
		}
		return reply, nil
	}
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// heartbeatProgress heartbeats the activity of ctx with progress() (no
// details for a nil progress), every third of its heartbeat timeout, until
// the returned stop is called. The details of every heartbeat are the
// progress: a heartbeat without them would erase what the last one
// recorded. Outside an activity, or without a heartbeat timeout, it does
// nothing.
func heartbeatProgress(ctx context.Context, progress func() any) (stop func()) {
	if !sdkactivity.IsActivity(ctx) {
		return func() {}
	}
	hb := sdkactivity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(hb / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if progress == nil {
					sdkactivity.RecordHeartbeat(ctx)
				} else {
					sdkactivity.RecordHeartbeat(ctx, progress())
				}
			}
		}
	}()
	return func() { close(done); <-exited }
}
