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
// the non-retryable [ErrorTypeIndeterminateOutcome] application error; the
// workflow reads its details with [AsIndeterminate] and routes the decision
// to a person. An activity that knows for certain its effect did not happen
// says so with [NoEffect], and the key is freed instead.
//
// # Exactly once, in the store's database
//
// An EFFECTFUL activity whose effect lives in the same PostgreSQL database
// as the idempotency records (an order row, a ledger entry, a seat, an
// outbox message) can do better than at most once. Declared
// [Transactional] (or with Policy.Transactional), its body runs in a
// transaction of the store's pool, reached with pgstore.Tx(ctx), and the
// dispatcher records the outcome in that transaction, fenced by the claim's
// token, before it commits:
//
//	var Reserve = activity.Transactional(reserveSeat, "flight", "seat")
//
//	func reserveSeat(ctx context.Context, req SeatRequest) (string, error) {
//		tx, err := pgstore.Tx(ctx)
//		if err != nil {
//			return "", err
//		}
//		_, err = tx.Exec(ctx, "UPDATE seats SET holder = $1 WHERE flight = $2 AND seat = $3", ...)
//		...
//	}
//
// The effect and the record commit together or not at all, so such an
// activity is never indeterminate: a body that fails is rolled back and
// retried by its retry policy, a killed worker's transaction rolls back and
// the next attempt runs it again, and a commit whose answer was lost is
// settled by the record. Writes through any other connection are outside
// the promise. The body holds a connection for its whole run: keep it short,
// and make no slow remote calls in it. Registration refuses the declaration
// on a store that cannot run it (memory, Redis) and on a pgstore that does
// not record through the pool Policy.TransactionalDB names.
//
// # Arguments that must match
//
// The key is made of the key arguments only, so a call that reuses a key
// with other values of its other arguments — the same passenger and flight
// booked with another fare after a code change — would get the first
// call's answer silently. Policy.CheckArguments names arguments that are
// not part of the key but must match the call that made the record:
//
//	var Book = activity.MustDeclare(book, activity.Policy{
//		Kind:           activity.KindEffectful,
//		KeyArguments:   []string{"passenger", "flight"},
//		CheckArguments: []string{"fare", "seat"},
//	})
//
// The record keeps a digest of their values, never the values. A call
// whose record was made with other values fails with the non-retryable
// [ErrorTypeArgumentsMismatch] error, whatever way it meets the record (a
// completed one, a holder it waited for, an indeterminate one, a lost
// holder it would take over); [AsArgumentsMismatch] reads the details,
// which name the arguments and the record, never the values.
//
// # Retention per activity
//
// Policy.Retention keeps this activity's records that long after their
// last write, in place of the store's window (a day by default). The
// interceptor refuses a window shorter than its lease. A duplicate that
// arrives after the window runs the body again, so keep the window at least
// the activity's schedule-to-close timeout (Temporal retries until then),
// and longer than the time between the workflow's own repeated calls. An
// indeterminate record waits for a person whatever its window.
//
// # A probe before a person
//
// Many downstreams answer "what happened to Idempotency-Key K?" — a payment
// provider's idempotent-request lookup, an airline's booking retrieval by
// the client's reference. An EFFECTFUL declaration may name a [Probe] that
// asks them:
//
//	Book, err := activity.Effectful(book, "flight").WithProbe(
//		func(ctx context.Context, req activity.ProbeRequest) (activity.ProbeAnswer, error) {
//			pnr, found, err := airline.LookupByReference(ctx, string(req.Key))
//			switch {
//			case err != nil:
//				return activity.AnswerCannotTell(), err
//			case found:
//				return activity.AnswerLanded(Seat{PNR: pnr}), nil // a value of book's return type
//			default:
//				return activity.AnswerNotLanded(), nil
//			}
//		})
//
// When an outcome would be indeterminate — the body failed (not with
// [NoEffect]), panicked or returned a result that cannot be encoded, or the
// key was taken over from a holder that stopped answering — the dispatcher
// asks the probe first:
//
//	Answer              What happens
//	Landed(result)      result is recorded and returned, as a duplicate's answer
//	NotLanded           the key is freed; the retryable IdempotencyEffectNotLanded error
//	                    lets the retry policy run the activity again (a body error that
//	                    was non-retryable is returned as it is)
//	CannotTell, error,  indeterminate, as without a probe
//	panic, too late
//
// The probe only reads: it must never apply the effect or resend the request
// that applies it. Its context carries the key ([Key]) and ends a little
// before the activity's deadline, so the answer still reaches Temporal; an
// answer that comes later is ignored. A body that outlived the activity
// (its start-to-close passed while it ran) cannot answer Temporal any more:
// its probe is then asked within the dispatcher's StoreTimeout, and what it
// says settles the record for the retry waiting on the key. Answer NotLanded only when no request
// under the key can still land: a request may still be in flight (the body
// gave up waiting; the lost holder is a stalled worker, not a dead one), so
// NotLanded is safe where the downstream itself deduplicates by the key the
// retry sends again ([Key]), or where it can say the key was refused or
// cancelled; otherwise a key it has not seen is CannotTell. A probe is not
// asked when no key was
// derived, when the store is down, or for a record an earlier attempt already
// left indeterminate.
package activity
