package activity

import (
	"context"

	"github.com/tesserix/idempotency/keyspace"
)

// Landing is a probe's answer to "did the effect under this key land?".
type Landing uint8

// The answers a [Probe] gives. The zero value is CannotTell, so an answer
// left unset never settles anything.
const (
	// CannotTell: the downstream could not say (it keeps no record of keys,
	// or this one is unknown to it yet). The outcome stays indeterminate.
	CannotTell Landing = iota
	// Landed: the effect happened; [ProbeAnswer.Result] is what the activity
	// would have returned.
	Landed
	// NotLanded: the downstream knows the key and the effect did not
	// happen; the key is freed and the activity may run again.
	NotLanded
)

// String returns "cannot_tell", "landed" or "not_landed".
func (l Landing) String() string {
	switch l {
	case CannotTell:
		return "cannot_tell"
	case Landed:
		return "landed"
	case NotLanded:
		return "not_landed"
	default:
		return "unknown"
	}
}

// ProbeRequest is what a [Probe] is asked about: one key of one EFFECTFUL
// activity whose outcome would otherwise be indeterminate. It never holds
// the activity's arguments: the downstream is asked by the key the body
// handed it (read with [Key]).
type ProbeRequest struct {
	// Activity is the activity type name.
	Activity string
	// Tenant scopes Key.
	Tenant string
	// Key is the idempotency key the body ran under, the one it passed to
	// the downstream as its Idempotency-Key.
	Key keyspace.Key
	// Reason is why the outcome would be indeterminate: ReasonBodyFailed
	// or ReasonHolderLost.
	Reason Reason
	// BodyEntered reports whether this attempt ran the body (false when
	// the key was taken over from a holder that stopped answering).
	BodyEntered bool
}

// ProbeAnswer is a probe's verdict.
type ProbeAnswer struct {
	// Landing is the verdict.
	Landing Landing
	// Result is the activity's result when Landing is Landed: a value of
	// the activity's return type (nil for an activity that returns only an
	// error). It is recorded and returned as a duplicate's answer would be.
	// A value of another type settles nothing: the outcome stays
	// indeterminate.
	Result any
}

// AnswerLanded is the answer of a probe that found the effect: result is
// what the activity returns for it.
func AnswerLanded(result any) ProbeAnswer { return ProbeAnswer{Landing: Landed, Result: result} }

// AnswerNotLanded is the answer of a probe whose downstream knows the key
// and says the effect did not happen.
func AnswerNotLanded() ProbeAnswer { return ProbeAnswer{Landing: NotLanded} }

// AnswerCannotTell is the answer of a probe that cannot say; it is the zero
// ProbeAnswer.
func AnswerCannotTell() ProbeAnswer { return ProbeAnswer{} }

// Probe asks the downstream of an EFFECTFUL activity whether the effect
// under req.Key landed — the way a payment provider or an airline answers
// "what happened to Idempotency-Key K?". The dispatcher calls it instead of
// reporting an indeterminate outcome (see the package documentation).
//
// A probe only reads: it must never apply the effect, nor retry the request
// that applies it. Its context ends with the activity's deadline (it also
// carries the key, for [Key]); an answer that comes later is ignored. An
// error, a panic, or no answer in time reads as CannotTell.
type Probe func(ctx context.Context, req ProbeRequest) (ProbeAnswer, error)
