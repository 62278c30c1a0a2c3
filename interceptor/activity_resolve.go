package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

// maxRejected bounds how many rejected signals [decision.QueryName] lists.
const maxRejected = 20

// DecisionAudit is who decided what about a key, as [EventDecided]
// reports it. It never holds the result.
type DecisionAudit struct {
	Action    decision.Action
	By        string
	Reason    string
	Reference string
}

// ResolveActivity returns the activity that records a person's decision in
// the interceptor's store, encoding a result with Options.DataConverter as
// the dispatcher encodes one (nil: the client's converter when the context
// carries it, else the default). A record that is no longer indeterminate
// (someone settled it already) or no longer exists is not an error: the
// workflow runs the activity again, which answers from whatever the record
// now says.
//
// A request is bound to the execution that runs it: one that names another
// tenant than the one Options.Tenant resolves for the execution, or a
// record another workflow made, is refused with the non-retryable
// [decision.ErrorTypeForeignRecord] error, touching nothing, and reported
// to Options.Observer ([EventForeignRecord]). Register it under
// [decision.ResolveActivityName]; the worker package does.
func (i *Interceptor) ResolveActivity() func(context.Context, decision.ResolveRequest) error {
	return resolveActivity(i.opts.Store, i.opts.DataConverter, i.tenantOf, i.observe)
}

// tenantOf resolves the tenant an execution runs under, as the dispatcher
// does for a declared call.
func (i *Interceptor) tenantOf(ctx context.Context, info sdkactivity.Info) (string, bool) {
	return i.opts.Tenant(ctx, info)
}

// observe reports e to Options.Observer, if any.
func (i *Interceptor) observe(e Event) {
	if i.opts.Observer != nil {
		i.opts.Observer.Observe(context.Background(), e)
	}
}

func resolveActivity(st store.Store, dc converter.DataConverter, tenantOf TenantFunc, observe func(Event)) func(context.Context, decision.ResolveRequest) error {
	return func(ctx context.Context, req decision.ResolveRequest) error {
		if err := bindRequest(ctx, st, tenantOf, observe, decision.ResolveActivityName, req.Tenant, req.Key); err != nil {
			return err
		}
		p := store.ResolveParams{Tenant: req.Tenant, Key: req.Key, Token: req.Token,
			By: req.By, Reason: req.Reason, Reference: req.Reference, Check: req.Check, Retention: req.Retention}
		switch req.Action {
		case decision.ActionComplete:
			outcome, err := req.Outcome, error(nil)
			if len(outcome) == 0 {
				outcome, err = EncodeOutcome((&Options{DataConverter: dc}).dataConverter(ctx), req.Result)
			}
			if err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), decision.ErrorTypeBadDecision, err)
			}
			// A record that expired or was swept meanwhile gets the
			// person's outcome: a freed key would run the effect again.
			p.Decision, p.Outcome, p.RecordIfGone = store.ActionComplete, outcome, true
		case decision.ActionFree:
			p.Decision = store.ActionFree
		default:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("idempotency: action %q records nothing", req.Action), decision.ErrorTypeBadDecision, nil)
		}
		err := st.Resolve(ctx, p)
		switch {
		case errors.Is(err, store.ErrNotIndeterminate) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotHolder):
			// Settled already, gone, or a newer indeterminate record than
			// the one decided on (the fence held): nothing of this
			// decision applies; the call runs again and finds what stands.
			err = nil
		case errors.Is(err, store.ErrInvalid):
			// The store will refuse this decision every time.
			return temporal.NewNonRetryableApplicationError(err.Error(), decision.ErrorTypeBadDecision, err)
		}
		if err == nil && sdkactivity.IsActivity(ctx) {
			sdkactivity.GetLogger(ctx).Info("idempotency: decision recorded",
				"tenant", req.Tenant, "key", req.Key, "action", string(req.Action),
				"by", req.By, "reason", req.Reason, "reference", req.Reference)
		}
		return err
	}
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data.
//
// workflowcheck flags it for the reflection encoding/json decodes with; the
// same bytes decode to the same value on every replay, so the workflow side
// may call it.
//
//workflowcheck:ignore
func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the value")
	}
	return nil
}
