// Package decision is the protocol by which a person settles an effect whose
// outcome nobody can state: the names of the query, the Workflow Update, the
// signal and the Resolve activity, the types they carry, the type string of
// every error the library fails a call with, and a small client.
//
// When an EFFECTFUL activity's outcome is indeterminate and the worker's
// interceptor has Options.AwaitDecision set, the workflow does not fail: it
// waits for a person to say what happened. This package is what crosses
// between that workflow and the person's tool. Its wire names and JSON
// field names are a compatibility promise: workflow histories recorded by
// every release carry them.
//
// # Workflow side
//
// Nothing here runs in a workflow. The workflow side is the interceptor's
// (package interceptor, files workflow_*.go): with Options.AwaitDecision it
// registers the [QueryName] query, the [UpdateName] update with a validator
// and the [SignalName] signal on every workflow of the worker, waits on an
// indeterminate call, and applies an accepted [Decision] through the
// [ResolveActivityName] activity (interceptor.Interceptor.ResolveActivity, registered
// by worker.New), which records it in the store against the key.
//
// # Client side
//
// A person's tool (cmd/idempotencyctl decide, examples/booking) asks a
// workflow what it waits on with [Pending] and sends a decision with
// [Send]:
//
//	pending, err := decision.Pending(ctx, c, workflowID, "")
//	// ... look at pending[0].Outcome, ask the downstream ...
//	res, err := decision.Send(ctx, c, workflowID, "", decision.Decision{
//		Key: pending[0].Outcome.Key, Action: decision.ActionFree, By: "ops@example.com",
//	})
//	var rejected *decision.RejectedError
//	if errors.As(err, &rejected) {
//		// the workflow refused it, and says why: rejected.Reason
//	}
//
// Send uses the update, which answers with a [Result] or a
// [*RejectedError], and falls back to the signal on a server without
// Workflow Update.
//
// # Error types
//
// The ErrorType constants name the [go.temporal.io/sdk/temporal.ApplicationError]
// types a workflow sees from a declared activity; they are the one list of
// them.
package decision
