package activity

import "errors"

// NoEffect marks err as a failure that certainly did not take effect: the
// downstream answered "invalid flight", the card was declined before any
// charge. For an EFFECTFUL activity the dispatcher then frees the key and
// returns err as it was, instead of keeping the claim and stopping the run.
// Use it only when the effect is known not to have happened; when in doubt,
// return the error unwrapped. NoEffect(nil) is nil.
func NoEffect(err error) error {
	if err == nil {
		return nil
	}
	return &noEffectError{err: err}
}

// IsNoEffect reports whether err, or an error it wraps, was marked with
// [NoEffect].
func IsNoEffect(err error) bool {
	var ne *noEffectError
	return errors.As(err, &ne)
}

// UnwrapNoEffect returns the error [NoEffect] wrapped, or err unchanged when
// it carries no such mark.
func UnwrapNoEffect(err error) error {
	var ne *noEffectError
	if errors.As(err, &ne) {
		return ne.err
	}
	return err
}

type noEffectError struct{ err error }

func (e *noEffectError) Error() string { return e.err.Error() }
func (e *noEffectError) Unwrap() error { return e.err }
