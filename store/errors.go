package store

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors every store returns, wrapped with context. Test for them
// with errors.Is.
var (
	// ErrNotFound: the key has no live record.
	ErrNotFound = errors.New("idempotency record not found")
	// ErrNotHolder: the token no longer holds a pending claim on the key
	// (it completed, was released, marked, taken over or expired).
	ErrNotHolder = errors.New("not the holder of the claim")
	// ErrNotIndeterminate: Resolve was asked to decide a record that is not
	// indeterminate (nor, with ResolveParams.Stale, stale).
	ErrNotIndeterminate = errors.New("idempotency record is not indeterminate")
	// ErrLeaseLive: Resolve was asked to settle a stale pending record
	// (ResolveParams.Stale) whose holder's lease has not run out by the
	// store's clock: the holder may still be running and record an outcome
	// of its own.
	ErrLeaseLive = errors.New("the pending claim's lease has not run out")
	// ErrUnavailable: the store could not be reached or did not answer. A
	// store that is down never reads as permission to run an effect.
	ErrUnavailable = errors.New("idempotency store unavailable")
	// ErrInvalid: the call's parameters are malformed; see [InvalidError].
	ErrInvalid = errors.New("invalid idempotency store parameters")
)

// InvalidError names the parameter a store refused. It matches [ErrInvalid].
type InvalidError struct {
	// Field is the parameter's name, such as "Tenant" or "Lease".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("idempotency store: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// ErrInvalidOptions matches every error a constructor of this module
// returns for malformed options or arguments: interceptor.New, worker.New,
// worker.NewPlugin, pgstore.New, redisstore.New and [NewMemory]. See
// [OptionsError].
var ErrInvalidOptions = errors.New("idempotency: invalid options")

// OptionsError names the option or argument a constructor refused, as the
// caller spelt it: "interceptor.Options.Lease",
// "worker.Options.Idempotency.Store", "pgstore.Options.TTL",
// "redisstore.New client". It is the one shape of every constructor's
// refusal. It matches [ErrInvalidOptions], and also [ErrInvalid] and
// [*InvalidError] (errors.Is and errors.As), which the stores' constructors
// returned before.
type OptionsError struct {
	// Field is the option, with its package and type, or the constructor
	// and its argument.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *OptionsError) Error() string {
	return fmt.Sprintf("idempotency: invalid option %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalidOptions] or [ErrInvalid].
func (e *OptionsError) Is(target error) bool {
	return target == ErrInvalidOptions || target == ErrInvalid
}

// As sets target, a **InvalidError, to the same field and reason, so code
// that read a store constructor's refusal as an [*InvalidError] still does.
func (e *OptionsError) As(target any) bool {
	if t, ok := target.(**InvalidError); ok {
		*t = &InvalidError{Field: e.Field, Reason: e.Reason}
		return true
	}
	return false
}

func quote(s string) string { return strconv.Quote(s) }
