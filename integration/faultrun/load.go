package faultrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/pgstore"
)

// The behaviours of a Charge body. The workflow chooses one per workflow, so
// a run mixes them in proportions the driver controls.
const (
	// BehaviourOK applies the effect after a short pause and answers.
	BehaviourOK = "ok"
	// BehaviourSlowIgnore outlives the start-to-close timeout, ignores the
	// cancellation, then applies the effect and answers (to nobody).
	BehaviourSlowIgnore = "slow_ignore"
	// BehaviourSlowRespect outlives the start-to-close timeout but stops when
	// its context ends, without applying the effect.
	BehaviourSlowRespect = "slow_respect"
	// BehaviourDrop is a downstream that applies the effect and then drops
	// the answer: the body fails after the effect landed. (Transactional,
	// the failure rolls the effect back; the first attempt drops, the
	// retry lands.)
	BehaviourDrop = "drop"
)

// ChargeRequest is the EFFECTFUL activity's argument. Order is the key
// argument; RequestID changes on every call, as a retry's would.
type ChargeRequest struct {
	Order     string        `json:"order"`
	RequestID string        `json:"request_id"`
	Behaviour string        `json:"behaviour"`
	Slow      time.Duration `json:"slow"`
}

// ReserveRequest is the IDEMPOTENT activity's argument; Seat is the key
// argument.
type ReserveRequest struct {
	Seat      string `json:"seat"`
	RequestID string `json:"request_id"`
}

// Activities are the bodies a worker process runs. Every effect goes to the
// ledger before the body answers.
type Activities struct {
	Ledger *Ledger
	// LedgerDir, when set, declares Charge with a probe that looks the key
	// up in every process's ledger there.
	LedgerDir string
	// Transactional declares Charge transactional: its effect is a row of
	// the ledger table in the store's own database (LedgerTable), written
	// through the store's transaction, instead of a line of the ledger
	// file.
	Transactional bool
	seq           atomic.Int64
}

// LedgerTable is the table of Charge's effects in a transactional round, in
// the store's database (created with the store's schema).
const LedgerTable = "faultrun_ledger"

// createLedgerTable is LedgerTable's DDL.
const createLedgerTable = `CREATE TABLE IF NOT EXISTS ` + LedgerTable + ` (
	kind text NOT NULL, key text NOT NULL, ikey text NOT NULL, effect text NOT NULL, request text NOT NULL, pid integer NOT NULL)`

// Charge is the EFFECTFUL activity: one effect per order.
func (a *Activities) Charge(ctx context.Context, req ChargeRequest) (string, error) {
	apply := func() (string, error) {
		id := fmt.Sprintf("%s/%d/%d", req.Order, os.Getpid(), a.seq.Add(1))
		key, _ := activity.Key(ctx)
		if a.Transactional {
			// The effect commits with the outcome, or not at all.
			tx, err := pgstore.Tx(ctx)
			if err != nil {
				return "", err
			}
			// A downstream that ignores the cancellation (slow_ignore)
			// still writes once its context has ended.
			if _, err := tx.Exec(context.WithoutCancel(ctx), "INSERT INTO "+LedgerTable+" (kind, key, ikey, effect, request, pid) VALUES ($1, $2, $3, $4, $5, $6)",
				KindCharge, req.Order, string(key), id, req.RequestID, os.Getpid()); err != nil {
				return "", fmt.Errorf("ledger table: %w", err)
			}
			return id, nil
		}
		if err := a.Ledger.Append(Entry{Kind: KindCharge, Key: req.Order, IKey: string(key), Effect: id, Request: req.RequestID}); err != nil {
			// The downstream could not be told: nothing was applied.
			return "", activity.NoEffect(fmt.Errorf("ledger: %w", err))
		}
		return id, nil
	}
	if !a.Transactional {
		// The downstream knows the request is in progress from when it is
		// sent until it is answered (or its process dies).
		key, _ := activity.Key(ctx)
		sent := Entry{Kind: KindSent, Key: req.Order, IKey: string(key), Effect: fmt.Sprintf("%d/%d", os.Getpid(), a.seq.Add(1)), Request: req.RequestID}
		if err := a.Ledger.Append(sent); err != nil {
			return "", activity.NoEffect(fmt.Errorf("ledger: %w", err))
		}
		defer func() {
			sent.Kind = KindAnswered
			_ = a.Ledger.Append(sent)
		}()
	}
	switch req.Behaviour {
	case BehaviourSlowIgnore:
		time.Sleep(req.Slow)
		return apply()
	case BehaviourSlowRespect:
		select {
		case <-time.After(req.Slow):
			return apply()
		case <-ctx.Done():
			return "", ctx.Err()
		}
	case BehaviourDrop:
		if a.Transactional && sdkactivity.GetInfo(ctx).Attempt > 1 {
			// A transactional drop rolls its effect back: the first
			// attempt fails after writing, the retry lands it.
			time.Sleep(20 * time.Millisecond)
			return apply()
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := apply(); err != nil {
			return "", err
		}
		return "", errors.New("downstream: connection reset after the charge was applied")
	default:
		time.Sleep(20 * time.Millisecond)
		return apply()
	}
}

// Reserve is the IDEMPOTENT activity. Its effects are recorded but repeats
// are allowed by its kind.
func (a *Activities) Reserve(_ context.Context, req ReserveRequest) (string, error) {
	time.Sleep(10 * time.Millisecond)
	id := fmt.Sprintf("%s/%d/%d", req.Seat, os.Getpid(), a.seq.Add(1))
	if err := a.Ledger.Append(Entry{Kind: KindReserve, Key: req.Seat, Effect: id, Request: req.RequestID}); err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return id, nil
}

// Declarations returns the policies of a's activities.
func (a *Activities) Declarations() ([]*activity.Declaration, error) {
	charge := activity.Effectful(a.Charge, "order")
	if a.Transactional {
		charge = activity.Transactional(a.Charge, "order")
	}
	if a.LedgerDir != "" {
		var err error
		if charge, err = charge.WithProbe(a.probe); err != nil {
			return nil, err
		}
	}
	return []*activity.Declaration{charge, activity.Idempotent(a.Reserve, "seat")}, nil
}

// probe asks the downstream (the ledger) whether a charge under the key
// landed. A body of this downstream writes the ledger before it answers and
// never after it failed, and a killed worker writes nothing more; a request
// still in progress at a live worker (a body that ignores its cancellation
// and sleeps on) may yet land, so it cannot tell. A key absent from the
// ledger with no request in progress is one whose effect will not land:
// NotLanded.
func (a *Activities) probe(_ context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
	f, err := Lookup(a.LedgerDir, string(req.Key))
	switch {
	case err != nil:
		return activity.AnswerCannotTell(), err
	case f.Landed:
		return activity.AnswerLanded(f.Effect), nil
	case f.InFlight:
		return activity.AnswerCannotTell(), nil
	default:
		return activity.AnswerNotLanded(), nil
	}
}

// Activity type names, as the SDK registers the methods.
const (
	ChargeActivity  = "Charge"
	ReserveActivity = "Reserve"
)

// WorkflowInput is one workflow's load.
type WorkflowInput struct {
	Order        string
	Seat         string
	Behaviour    string
	Slow         time.Duration
	StartToClose time.Duration
	// Pause separates the pair of identical calls from the retry-like third.
	Pause time.Duration
}

// CallResult is what one activity call ended with, as the workflow saw it.
type CallResult struct {
	Activity string
	Request  string
	// Effect is the effect ID the call answered with; empty on error.
	Effect string
	// Class is ok, indeterminate, timeout, application:<type> or other.
	Class string
	// Reason is the indeterminate reason.
	Reason        string
	BodyEntered   bool
	MayHaveLanded bool
	Err           string
}

// WorkflowResult lists a workflow's calls.
type WorkflowResult struct {
	Order string
	Calls []CallResult
}

// Workflow is the load: an IDEMPOTENT reservation, two identical EFFECTFUL
// calls in one turn, a pause, and a retry-like third call with a new request
// ID. It never fails on an activity error: it reports each call.
func Workflow(ctx workflow.Context, in WorkflowInput) (WorkflowResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.StartToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Second,
			MaximumAttempts:    10,
		},
	})
	res := WorkflowResult{Order: in.Order}
	get := func(name, request string, f workflow.Future) {
		var effect string
		res.Calls = append(res.Calls, classify(name, request, f.Get(ctx, &effect)))
		if res.Calls[len(res.Calls)-1].Class == ClassOK {
			res.Calls[len(res.Calls)-1].Effect = effect
		}
	}
	get(ReserveActivity, "r", workflow.ExecuteActivity(ctx, ReserveActivity, ReserveRequest{Seat: in.Seat, RequestID: "r"}))
	charge := func(request string) workflow.Future {
		return workflow.ExecuteActivity(ctx, ChargeActivity, ChargeRequest{Order: in.Order, RequestID: request, Behaviour: in.Behaviour, Slow: in.Slow})
	}
	a, b := charge("a"), charge("b")
	get(ChargeActivity, "a", a)
	get(ChargeActivity, "b", b)
	if in.Pause > 0 {
		if err := workflow.Sleep(ctx, in.Pause); err != nil {
			return res, err
		}
	}
	get(ChargeActivity, "retry", charge("retry"))
	return res, nil
}

// Call classes.
const (
	ClassOK            = "ok"
	ClassIndeterminate = "indeterminate"
	ClassTimeout       = "timeout"
	ClassOther         = "other"
)

func classify(name, request string, err error) CallResult {
	c := CallResult{Activity: name, Request: request, Class: ClassOK}
	if err == nil {
		return c
	}
	c.Err = err.Error()
	var te *temporal.TimeoutError
	var ae *temporal.ApplicationError
	if o, ok := activity.AsIndeterminate(err); ok {
		c.Class = ClassIndeterminate
		c.Reason = string(o.Reason)
		c.BodyEntered = o.BodyEntered
		c.MayHaveLanded = o.EffectMayHaveLanded
	} else if errors.As(err, &te) {
		c.Class = ClassTimeout
	} else if errors.As(err, &ae) {
		c.Class = "application:" + ae.Type()
	} else {
		c.Class = ClassOther
	}
	return c
}
