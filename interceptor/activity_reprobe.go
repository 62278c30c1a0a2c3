package interceptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// ProbeRequest is the input of the [ProbeActivityName] activity: one
// indeterminate key a workflow waits on.
type ProbeRequest struct {
	Activity string          `json:"activity"`
	Tenant   string          `json:"tenant"`
	Key      string          `json:"key"`
	Reason   activity.Reason `json:"reason,omitempty"`
	// Token is the token of the indeterminate record the wait is about
	// (zero: whichever indeterminate record stands, as for a call Temporal
	// timed out, which read no record).
	Token int64 `json:"token,omitempty"`
}

// ProbeReply is what the [ProbeActivityName] activity answers. It writes
// nothing: the workflow makes a definite answer its decision, and records
// it through [ResolveActivityName], fenced by Token, unless a person
// decided first.
type ProbeReply struct {
	// Landing is activity.Landing's String: "landed", "not_landed" or
	// "cannot_tell".
	Landing string `json:"landing"`
	// Result is a landed result as JSON, for the person reading the
	// history; Outcome is the same result encoded as the dispatcher records
	// one (see [EncodeOutcome]), which is what is recorded.
	Result  json.RawMessage `json:"result,omitempty"`
	Outcome []byte          `json:"outcome,omitempty"`
	// Token is the token of the indeterminate record the probe was asked
	// about.
	Token int64 `json:"token,omitempty"`
	// Settled: the record is no longer the indeterminate one asked about
	// (settled, taken over, freed or gone); the call may run again and
	// find what stands. The probe was not asked.
	Settled bool `json:"settled,omitempty"`
	// Detail says why the probe could not tell, or what Settled found.
	Detail string `json:"detail,omitempty"`
}

// ProbeActivity returns the activity a waiting workflow asks a declared
// probe again through ([ProbeActivityName]; see [SettleChangeID]). It reads
// the key's record: unless it is the indeterminate record the wait is
// about, it answers Settled without asking. Otherwise it asks the probe of
// the activity's declaration on this worker, within the activity's time,
// and answers what it said; a landed result that is not a value of the
// activity's return type, an error, a panic, or no declaration with a
// probe read as cannot tell. It writes nothing to the store.
func (i *Interceptor) ProbeActivity() func(context.Context, ProbeRequest) (ProbeReply, error) {
	return func(ctx context.Context, req ProbeRequest) (ProbeReply, error) {
		cannot := func(format string, args ...any) (ProbeReply, error) {
			return ProbeReply{Landing: activity.CannotTell.String(), Token: req.Token, Detail: fmt.Sprintf(format, args...)}, nil
		}
		decl, ok := i.Declaration(req.Activity)
		if !ok || decl.Probe() == nil {
			return cannot("this worker declares no probe for activity %q", req.Activity)
		}
		rec, err := i.opts.Store.Lookup(ctx, store.LookupParams{Tenant: req.Tenant, Key: req.Key})
		switch {
		case errors.Is(err, store.ErrNotFound):
			return ProbeReply{Settled: true, Detail: "no record stands under the key"}, nil
		case err != nil:
			return cannot("reading the record: %v", err)
		case rec.State == store.StatePending && !time.Now().Before(rec.LeaseUntil):
			// Its holder is gone: the call run again takes the key over
			// and settles it (its probe, or an indeterminate mark).
			return ProbeReply{Settled: true, Token: rec.Token,
				Detail: fmt.Sprintf("the holder of the key (token %d) is gone: its lease ran out", rec.Token)}, nil
		case rec.State == store.StatePending:
			return cannot("the key is held (token %d): its holder may still record", rec.Token)
		case rec.State != store.StateIndeterminate:
			return ProbeReply{Settled: true, Token: rec.Token, Detail: "the record is " + rec.State.String()}, nil
		case req.Token != 0 && rec.Token != req.Token:
			return ProbeReply{Settled: true, Token: rec.Token,
				Detail: fmt.Sprintf("a newer indeterminate record (token %d) stands", rec.Token)}, nil
		}
		ans, err := callProbe(activity.WithKey(ctx, keyspace.Key(req.Key)), decl.Probe(), activity.ProbeRequest{
			Activity: req.Activity, Tenant: req.Tenant, Key: keyspace.Key(req.Key), Reason: req.Reason,
		})
		reply := ProbeReply{Landing: ans.Landing.String(), Token: rec.Token}
		switch {
		case err != nil:
			return cannot("the probe failed: %v", err)
		case ans.Landing == activity.NotLanded:
			return reply, nil
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
}

// callProbe runs probe, a panic read as its error.
func callProbe(ctx context.Context, probe activity.Probe, req activity.ProbeRequest) (ans activity.ProbeAnswer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("idempotency: the probe panicked: %v", p)
		}
	}()
	return probe(ctx, req)
}
