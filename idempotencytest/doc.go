// Package idempotencytest runs a team's own workflows through the
// idempotency interceptor in the SDK's [testsuite.TestWorkflowEnvironment],
// with a memory store: no database, no server. A test makes a declared
// activity end with each outcome the library can give it — answered from a
// record, indeterminate for each reason, settled by a probe — sends a
// person's decisions, and reads the effects the activities applied.
//
//	var suite testsuite.WorkflowTestSuite
//	env, err := idempotencytest.New(&suite, idempotencytest.Options{
//		Declarations:  []*activity.Declaration{activity.Effectful(a.Book, "flight")},
//		AwaitDecision: true,
//	})
//	env.OnNext("Book", idempotencytest.Indeterminate(activity.ReasonBodyFailed))
//	env.DecideAfter(time.Minute, "Book", decision.Decision{Action: decision.ActionComplete, Result: []byte(`"CONF-1"`)})
//	env.ExecuteWorkflow(BookTrip, "BA117")
//	env.Effects() // the bodies that ran: one booking, whose answer was lost
//
// # Outcomes
//
// [Env.OnNext] scripts the next execution of an activity type; executions
// with nothing scripted run as they would on a worker. [Deduplicated] answers
// it from a record another call made (the body does not run);
// [ArgumentsMismatch] answers it with a record made with other values of
// its checked arguments (the call fails, non-retryable);
// [Indeterminate] ends it indeterminate for a reason: ReasonRecorded (an
// earlier call left the key indeterminate), ReasonHolderLost (its holder
// stopped answering), ReasonBodyFailed (the body ran and its answer was
// lost), ReasonKeyNotDerivable (the store refused the key) and
// ReasonStoreUnavailable (the store could not be asked: nothing ran, and
// the call fails with the retryable NotRun error rather than
// indeterminate, so its retry policy runs it again). [Outcome.ProbeAnswers] makes the
// declaration's probe answer as given when it is asked. What follows is the
// interceptor's own doing, exactly as on a worker: an IDEMPOTENT activity is
// run again where an EFFECTFUL one stops, a probe's landed answer is
// recorded, and so on.
//
// # Decisions
//
// With Options.AwaitDecision, an indeterminate outcome waits for a person's
// decision. [Env.DecideAfter] sends one through the decision update once
// that much workflow time has passed, on the key the activity type waits
// on; [Env.Decisions] says what each decision did. Each decision is an
// update of its own: one the workflow refuses (a result of the wrong type)
// changes nothing, and a corrected one sent after it is applied.
//
// # Effects
//
// [Env.Effects] lists the bodies that ran, in order: the effects applied,
// with their keys. [Env.Events] lists the dispatcher's events, and
// [Env.Store] is the memory store, to read the records.
package idempotencytest
