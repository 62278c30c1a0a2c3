package keyspace

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors returned by [Derive], [ParseKey] and [FieldNames], always
// wrapped in one of the typed errors below. Test for them with errors.Is.
var (
	// ErrMissingArgument: a named key argument is absent from the
	// arguments, so no key can be derived. See [MissingArgumentError].
	ErrMissingArgument = errors.New("key argument missing")
	// ErrUnencodable: a value has no canonical form (NaN, ±Inf, a channel,
	// a function, a complex number, a cycle, two map keys that are equal
	// after NFC normalisation, a failing MarshalJSON...). See [ValueError].
	ErrUnencodable = errors.New("value has no canonical encoding")
	// ErrInvalidInput: the input itself is malformed: an empty Tenant, Run
	// or Activity, Arguments that are neither a map with string keys nor a
	// struct, a duplicate or empty key argument name, a malformed key. See
	// [InputError].
	ErrInvalidInput = errors.New("invalid key input")
)

// MissingArgumentError reports a key argument that the arguments do not
// carry: a map without that key, a struct without that field, or a struct
// field that encoding/json would omit (omitempty or omitzero with a zero
// value, or a field promoted through a nil embedded pointer). It matches
// [ErrMissingArgument].
type MissingArgumentError struct {
	// Name is the key argument as declared.
	Name string
}

// Error implements error.
func (e *MissingArgumentError) Error() string {
	return "keyspace: key argument " + strconv.Quote(e.Name) + " is missing from the arguments: no key can be derived"
}

// Is reports whether target is [ErrMissingArgument].
func (e *MissingArgumentError) Is(target error) bool { return target == ErrMissingArgument }

// ValueError reports a value inside a key argument that has no canonical
// form. It matches [ErrUnencodable].
type ValueError struct {
	// Argument is the key argument the value belongs to.
	Argument string
	// Path locates the value inside the argument as a JSON Pointer
	// (RFC 6901), such as "/legs/2/fare"; empty for the argument itself.
	// Very deep paths are shortened in the middle with "/…".
	Path string
	// Reason says why the value cannot be encoded.
	Reason string
}

// Error implements error; the message names the argument and the path.
func (e *ValueError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("keyspace: key argument %q: %s", e.Argument, e.Reason)
	}
	return fmt.Sprintf("keyspace: key argument %q at %q: %s", e.Argument, e.Path, e.Reason)
}

// Is reports whether target is [ErrUnencodable].
func (e *ValueError) Is(target error) bool { return target == ErrUnencodable }

// InputError names the part of the input that is malformed. It matches
// [ErrInvalidInput].
type InputError struct {
	// Field is the input's field, such as "Tenant", "Arguments" or
	// "KeyArguments".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *InputError) Error() string {
	return fmt.Sprintf("keyspace: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is [ErrInvalidInput].
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// encError is a ValueError under construction: encoders return it and each
// container on the way back up adds its path segment.
type encError struct {
	reason string
	segs   []string // innermost first
}

func (e *encError) Error() string { return e.reason }

func unencodable(format string, args ...any) error {
	return &encError{reason: fmt.Sprintf(format, args...)}
}

// withSeg adds a path segment (already escaped, without the slash) to err
// when it is an *encError.
func withSeg(err error, seg string) error {
	if ee, ok := err.(*encError); ok {
		ee.segs = append(ee.segs, seg)
	}
	return err
}

// pointerToken escapes a JSON Pointer reference token (RFC 6901).
func pointerToken(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

const maxPathSegments = 24

// valueError turns an encoder error into the public *ValueError.
func valueError(argument string, err error) error {
	ee, ok := err.(*encError)
	if !ok {
		return &ValueError{Argument: argument, Reason: err.Error()}
	}
	segs := make([]string, 0, len(ee.segs))
	for i := len(ee.segs) - 1; i >= 0; i-- {
		segs = append(segs, ee.segs[i])
	}
	if len(segs) > maxPathSegments {
		keep := maxPathSegments / 2
		segs = append(append(segs[:keep:keep], "…"), segs[len(segs)-keep:]...)
	}
	path := ""
	for _, s := range segs {
		path += "/" + s
	}
	return &ValueError{Argument: argument, Path: path, Reason: ee.reason}
}
