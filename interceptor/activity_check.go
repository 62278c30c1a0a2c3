package interceptor

import (
	"context"
	"time"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// This file holds the dispatcher's argument checks (Policy.CheckArguments)
// and its per-activity retention (Policy.Retention); dispatch.go calls it
// on every path that answers from a record.

// deriveCheck derives the digest of the execution's checked arguments, if
// its declaration checks any.
func (x *execution) deriveCheck(secret *keyspace.Secret, tenant, run string, args []any) error {
	c, err := x.decl.CheckUnder(secret, tenant, run, args)
	if err != nil {
		return err
	}
	x.check = c
	return nil
}

// mismatched reports whether rec was made by a call with other values of
// the checked arguments than this execution's. A record without a digest
// (written before checks, or by a declaration that checked nothing) or one
// made under other checked names cannot be said to differ: it is no
// mismatch.
func (x *execution) mismatched(rec store.Record) bool {
	return x.check != "" && x.check.Differs(keyspace.Check(rec.Check))
}

// found names how an execution that waited (or not) met a record.
func found(waited time.Duration, status store.Status) string {
	switch {
	case status == store.StatusHeld:
		return activity.FoundTakeover
	case waited > 0:
		return activity.FoundWaited
	case status == store.StatusIndeterminate:
		return activity.FoundIndeterminate
	default:
		return activity.FoundCompleted
	}
}

// argumentsMismatch refuses the execution: the record under its key was
// made with other values of its checked arguments. Nothing is written: the
// record stays as it is for the calls it does answer.
func (x *execution) argumentsMismatch(ctx context.Context, rec store.Record, how string) error {
	m := activity.ArgumentsMismatch{
		Activity:         x.decl.Name(),
		Tenant:           x.tenant,
		Key:              x.key,
		Arguments:        x.decl.CheckArguments(),
		Found:            how,
		RecordWorkflowID: rec.Origin.WorkflowID,
		RecordRunID:      rec.Origin.RunID,
		WorkflowID:       x.info.WorkflowExecution.ID,
		RunID:            x.info.WorkflowExecution.RunID,
		ActivityID:       x.info.ActivityID,
	}
	err := activity.NewArgumentsMismatchError(m)
	x.endEvent(ctx, EventArgumentsMismatch, metricname.ArgumentsMismatch, err)
	return err
}

// waited reports the end of a wait for another holder, with how long it
// took.
func (x *execution) waited(ctx context.Context, d time.Duration) {
	e := x.event
	e.Kind, e.Duration = EventWaited, d
	x.emit(ctx, e)
}
