package interceptor

import (
	"context"
	"time"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// This file holds the dispatcher's argument checks (Policy.CheckArguments):
// the check is derived with the key (prepare), judge and unclaimed
// (activity_acquire.go) compare it with every record that would answer the
// call, and argumentsMismatch refuses the call.

// mismatched reports whether rec was made by a call with other values of
// the checked arguments than the call whose digest is check. A record
// without a digest (written before checks, or by a declaration that
// checked nothing) or one made under other checked names cannot be said to
// differ: it is no mismatch.
func mismatched(check keyspace.Check, rec store.Record) bool {
	return check != "" && check.Differs(keyspace.Check(rec.Check))
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
	x.rep.endEvent(ctx, EventArgumentsMismatch, metricname.ArgumentsMismatch, err)
	return err
}
