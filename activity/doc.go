// Package activity declares what repeating a Temporal activity would do, and
// holds what an activity and its workflow read back from the dispatcher.
//
// # Declaring
//
// A declaration binds a [Policy] to an activity function. The shorthands
// read like the decorator they stand for and panic at program start on a
// bad declaration:
//
//	var LookupFare = activity.ReadOnly(lookupFare)
//	var Book = activity.Effectful(book, "flight") // book(ctx, BookRequest) — "flight" is a JSON field
//
// [Declare] returns the error instead, and takes Policy.Params for an
// activity with positional arguments, since Go keeps no parameter names at
// run time:
//
//	d, err := activity.Declare(charge, activity.Policy{
//		Kind:         activity.KindEffectful,
//		Params:       []string{"card", "amount", "requestID"},
//		KeyArguments: []string{"card", "amount"},
//	})
//
// A key argument that is not a parameter or field is refused here, never at
// the call that matters. An activity with no declaration behaves exactly as
// it did before: nothing is claimed, nothing is recorded, and its retry
// policy is unchanged.
//
// # Kinds
//
//	Kind            What it means                              Retried on failure  Deduplicated
//	KindReadOnly    Reads, changes nothing                     yes                 no
//	KindIdempotent  Writes, but repeating lands the same state yes                 yes
//	KindEffectful   Repeating it is a second effect            no                  yes
//
// # The key in the activity
//
// [Key] returns the execution's idempotency key from its context: pass it to
// a downstream that has an Idempotency-Key header of its own.
//
// # Failures
//
// An EFFECTFUL activity that fails keeps its claim and stops the run with
// the non-retryable [IndeterminateOutcomeErrorType] application error; the
// workflow reads its details with [AsIndeterminate] and routes the decision
// to a person. An activity that knows for certain its effect did not happen
// says so with [NoEffect], and the key is freed instead.
package activity
