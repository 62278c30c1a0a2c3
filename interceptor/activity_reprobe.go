package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// ProbeActivity returns the activity a waiting workflow asks a declared
// probe again through ([decision.ProbeActivityName]; see [wire.SettleChangeID]). A
// request for another tenant than the execution's, or for a record another
// workflow made, is refused as [Interceptor.ResolveActivity] refuses one. It reads
// the key's record: a record other than the indeterminate one the wait is
// about answers Settled without asking; a key under which no record stands
// is asked about as that record is: no record says what the call did.
// A record held by a holder
// whose lease runs is waited on first, within the ask's time less a
// margin, and read again: the holder of a call Temporal timed out may
// still record its outcome. Otherwise it asks the probe of
// the activity's declaration on this worker, within the activity's time,
// and answers what it said; a landed result that is not a value of the
// activity's return type, an error, a panic, or no declaration with a
// probe read as cannot tell. It writes nothing to the store, and heartbeats
// while it runs when the ask has a heartbeat timeout, so an ask whose
// worker died is scheduled again within seconds.
func (i *Interceptor) ProbeActivity() func(context.Context, decision.ProbeRequest) (decision.ProbeReply, error) {
	return func(ctx context.Context, req decision.ProbeRequest) (decision.ProbeReply, error) {
		defer heartbeatWhile(ctx)()
		return i.probeOnce(ctx, req)
	}
}

// probeOnce is one ask of the probe, as ProbeActivity documents, without
// heartbeating: its callers heartbeat.
func (i *Interceptor) probeOnce(ctx context.Context, req decision.ProbeRequest) (decision.ProbeReply, error) {
	cannot := func(format string, args ...any) (decision.ProbeReply, error) {
		return decision.ProbeReply{Landing: activity.CannotTell.String(), Token: req.Token, Detail: fmt.Sprintf(format, args...)}, nil
	}
	if err := bindRequest(ctx, i.opts.Store, i.tenantOf, i.observe, decision.ProbeActivityName, req.Tenant, req.Key); err != nil {
		return decision.ProbeReply{}, err
	}
	decl, ok := i.Declaration(req.Activity)
	if !ok || decl.Probe() == nil {
		return cannot("this worker declares no probe for activity %q", req.Activity)
	}
	rec, err := i.opts.Store.Lookup(ctx, store.LookupParams{Tenant: req.Tenant, Key: req.Key})
	if err == nil && rec.State == store.StatePending && time.Now().Before(rec.LeaseUntil) {
		// Its holder may still record (a body that outlived the
		// attempt Temporal timed out): wait for it within this ask's
		// time and read again, rather than answer "held" and leave the
		// key to a person until the next ask.
		res, changed := waitForHolder(ctx, i.opts.Store, req, rec.Token)
		if changed && res.Status == store.StatusHeld && res.LeaseExpired && res.Record.Token == rec.Token {
			// Gone by the store's clock, which the worker's may trail:
			// read again, the record would look held a while longer.
			return holderGone(rec.Token), nil
		}
		if changed {
			rec, err = i.opts.Store.Lookup(ctx, store.LookupParams{Tenant: req.Tenant, Key: req.Key})
		}
	}
	gone := errors.Is(err, store.ErrNotFound)
	switch {
	case gone:
		// No record stands: nobody recorded what the call did, and the
		// downstream alone knows. Answering "settled" would run the call
		// again on the word of nothing; its answer instead is an outcome
		// (landed: the decision records it; not landed: the key is free),
		// and "cannot tell" leaves the wait to the next ask or a person.
		rec, err = store.Record{}, nil
	case err != nil:
		return cannot("reading the record: %v", err)
	case rec.State == store.StatePending && !time.Now().Before(rec.LeaseUntil):
		return holderGone(rec.Token), nil
	case rec.State == store.StatePending:
		return cannot("the key is held (token %d): its holder may still record", rec.Token)
	case rec.State != store.StateIndeterminate:
		return decision.ProbeReply{Settled: true, Token: rec.Token, Detail: "the record is " + rec.State.String()}, nil
	case req.Token != 0 && rec.Token != req.Token:
		return decision.ProbeReply{Settled: true, Token: rec.Token,
			Detail: fmt.Sprintf("a newer indeterminate record (token %d) stands", rec.Token)}, nil
	}
	ans, err := callProbe(activity.WithKey(ctx, keyspace.Key(req.Key)), decl.Probe(), activity.ProbeRequest{
		Activity: req.Activity, Tenant: req.Tenant, Key: keyspace.Key(req.Key), Reason: req.Reason,
	})
	reply := decision.ProbeReply{Landing: ans.Landing.String(), Token: rec.Token}
	if gone {
		reply.Detail = noRecord
	}
	switch {
	case err != nil:
		return cannot("the probe failed: %v", err)
	case ans.Landing == activity.NotLanded:
		return reply, nil
	case ans.Landing != activity.Landed && gone:
		return cannot("%s, and the probe cannot tell", noRecord)
	case ans.Landing != activity.Landed:
		return cannot("the probe cannot tell")
	}
	if err := checkProbeResult(decl.Func(), ans.Result); err != nil {
		return cannot("%v", err)
	}
	if reply.Outcome, err = EncodeOutcome(i.opts.dataConverter(ctx), ans.Result); err != nil {
		return cannot("%v", err)
	}
	if reply.Result, err = json.Marshal(ans.Result); err != nil {
		reply.Result = nil // the outcome is what is recorded; the JSON is for reading
	}
	if sdkactivity.IsActivity(ctx) {
		sdkactivity.GetLogger(ctx).Info("idempotency: the probe answered a waiting key",
			"activity", req.Activity, "tenant", req.Tenant, "key", req.Key, "landing", reply.Landing)
	}
	return reply, nil
}

// noRecord is the detail of an answer on a key under which no record
// stands.
const noRecord = "no record stands under the key"

// holderWaitMargin is what an ask of the probe keeps of its time after
// waiting for a live holder: enough to read the record again and ask.
const holderWaitMargin = 5 * time.Second

// holderGone is the answer on a key whose holder (token) is gone, its lease
// run out: the call run again takes the key over and settles it (its
// probe, or an indeterminate mark).
func holderGone(token int64) decision.ProbeReply {
	return decision.ProbeReply{Settled: true, Token: token,
		Detail: fmt.Sprintf("the holder of the key (token %d) is gone: its lease ran out", token)}
}

// waitForHolder waits until the pending claim under token is settled,
// freed, taken over or its lease runs out by the store's clock, within the
// ask's deadline less holderWaitMargin (at most probeTimeout when it has
// none). It returns the store's answer, and whether the claim changed in
// that time.
func waitForHolder(ctx context.Context, st store.Store, req decision.ProbeRequest, token int64) (store.Result, bool) {
	budget := probeTimeout - holderWaitMargin
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)-holderWaitMargin)
	}
	if budget <= 0 {
		return store.Result{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	res, err := st.Wait(wctx, store.WaitParams{Tenant: req.Tenant, Key: req.Key, Token: token})
	return res, err == nil
}

// heartbeatWhile heartbeats the activity of ctx, every third of its
// heartbeat timeout, until the returned stop is called, so Temporal tells a
// live ask that waits (on a holder, or on the probe) from one whose worker
// died. Outside an activity, or without a heartbeat timeout, it does
// nothing.
func heartbeatWhile(ctx context.Context) (stop func()) { return heartbeatProgress(ctx, nil) }

// callProbe runs probe, a panic read as its error.
func callProbe(ctx context.Context, probe activity.Probe, req activity.ProbeRequest) (ans activity.ProbeAnswer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("idempotency: the probe panicked: %v", p)
		}
	}()
	return probe(ctx, req)
}
