package activity

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/keyspace"
)

// ErrInvalidDeclaration matches every error [Declare] returns; see
// [DeclarationError] for the details.
var ErrInvalidDeclaration = errors.New("invalid idempotency declaration")

// DeclarationError says which declaration was refused and why. It matches
// [ErrInvalidDeclaration].
type DeclarationError struct {
	// Activity is the activity's name, when it could be determined.
	Activity string
	// Argument is the key argument or parameter name at fault, if any.
	Argument string
	// Field is the Policy field at fault (such as "Policy.Retention"), if
	// any.
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *DeclarationError) Error() string {
	var b strings.Builder
	b.WriteString("idempotency: declaration")
	if e.Activity != "" {
		fmt.Fprintf(&b, " of activity %q", e.Activity)
	}
	if e.Argument != "" {
		fmt.Fprintf(&b, ", argument %q", e.Argument)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ", %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Is reports whether target is ErrInvalidDeclaration.
func (e *DeclarationError) Is(target error) bool { return target == ErrInvalidDeclaration }

// Policy is what an activity declares about repeating it.
type Policy struct {
	// Kind says what repeating the activity would do. Required.
	Kind Kind
	// KeyArguments names the arguments that identify the effect. Everything
	// else — a request id, a trace header, a timestamp — is left out of the
	// key, so a retry that renumbers itself is still one key. For an
	// activity whose one argument is a struct, the names are the JSON field
	// names of that struct as the data converter sends them; otherwise they
	// are names from Params. An IDEMPOTENT or EFFECTFUL activity names
	// them, or says instead what its key is with KeyAllArguments or
	// OncePerRun: a declaration with none of the three is refused, never
	// read as one key per run. Ignored for KindReadOnly.
	KeyArguments []string
	// KeyAllArguments makes every argument the activity is called with the
	// key, as the data converter would send it: two calls that differ in
	// any argument, even a request ID or a timestamp, are two effects. In
	// Temporal an activity's retries carry the input of its first attempt,
	// so retries stay one key. Use it when no subset of the arguments
	// identifies the effect; name KeyArguments when one does (a request ID
	// that is renumbered per call must stay out of the key). Not with
	// KeyArguments, OncePerRun or CheckArguments.
	KeyAllArguments bool
	// DefiniteErrors names the error types (temporal.ApplicationError's
	// Type, as a retry policy's NonRetryableErrorTypes names them) whose
	// failure of an EFFECTFUL body is a definite outcome, not an unknown
	// one: a card declined, an order refused. Such a failure is recorded as
	// the key's outcome and returned as the body returned it — never as
	// IndeterminateOutcomeError, never to a person — and a duplicate gets
	// the same error from the record. Any other failure stays
	// indeterminate. EFFECTFUL only, and not with Transactional (whose
	// failures roll back and free the key). A worker of a release before
	// this field existed reads such a record as a result it cannot decode:
	// name them once every worker runs a release that reads them.
	DefiniteErrors []string
	// OncePerRun makes the activity's name alone, within the tenant and
	// run, the key: one effect per run, whatever the arguments — a second
	// call in the run with other arguments gets the first call's answer.
	// Declarations that named no key arguments before this field existed
	// had this key, and keep it by setting it. Not with KeyArguments or
	// KeyAllArguments.
	OncePerRun bool
	// Params names the activity's parameters in order, not counting a
	// leading context.Context. Go keeps no parameter names at run time, so
	// an activity taking positional arguments declares them here once.
	// Leave it empty for an activity whose one argument is a struct.
	Params []string
	// Name is the activity type name the activity is registered under.
	// Defaults to the function's name as Temporal derives it (the method
	// name, for a method value).
	Name string
	// Probe, if set, asks the downstream whether the effect under a key
	// landed before an outcome is reported indeterminate (see [Probe]).
	// EFFECTFUL only: an IDEMPOTENT activity is simply run again.
	Probe Probe
	// CheckArguments names arguments that are not part of the key but
	// must match the call that made the record: a call whose key has a
	// record made with other values of them fails with the non-retryable
	// [ErrorTypeArgumentsMismatch] error instead of receiving that record's
	// answer (a fare or a seat changed under the same booking). Named as
	// KeyArguments are; a name must not also be a key argument. The record
	// keeps only a digest of their values (keyspace.DeriveCheck). Not for
	// KindReadOnly.
	CheckArguments []string
	// Retention, when positive, is how long the records of this activity
	// are kept after their last write, in place of the store's retention
	// window: within it a duplicate gets the recorded answer, after it the
	// key is free again and the activity runs anew. The interceptor
	// refuses one shorter than its lease. Zero: the store's window. Not for
	// KindReadOnly.
	Retention time.Duration
	// Transactional, for an EFFECTFUL activity whose effect lives in the
	// store's own database, runs the body in a transaction of that
	// database, and records the outcome in the same transaction, fenced by
	// the claim's token, before it commits: the effect and the record land
	// together or not at all. The body reaches the transaction from its
	// context (pgstore.Tx) and makes every write of the effect through it.
	// Such an activity is never indeterminate: a body that fails or a worker
	// that dies rolls its writes back, and the next attempt runs it again.
	// The one exception is a key an attempt that was not transactional
	// (made before the declaration became Transactional, by a worker of an
	// earlier rollout) claimed since it was last free: that attempt wrote
	// outside any transaction and may have landed its effect, so the key
	// ends indeterminate (holder_lost), as for any EFFECTFUL activity —
	// however many takeovers of it, undone or unfinished, followed.
	// The body holds a database connection for its whole run. Registration
	// refuses it on a store that cannot do this (the memory and Redis
	// stores). A probe is refused with it: there is nothing to probe.
	Transactional bool
	// TransactionalDB, optional with Transactional, names the database
	// handle the body's writes go through (for pgstore, the
	// *pgxpool.Pool). Registration refuses the declaration when the store
	// does not record through that very handle: writes through another one
	// could not commit with the record. Nil: the body writes through the
	// transaction the store hands it, whichever that is.
	TransactionalDB any
}

// Declaration binds a [Policy] to an activity function. It is immutable and
// safe for concurrent use. Create one with [Declare] or a shorthand such as
// [Effectful], and register it with the worker.
type Declaration struct {
	name   string
	fn     any
	policy Policy
	// argIndex maps a key argument to its position among the activity's
	// arguments, for positional activities. Nil for struct-argument ones.
	argIndex map[string]int
}

// Declare checks p against fn and returns the declaration. It refuses, with
// a [*DeclarationError]: a fn that is not an activity function (a func
// returning error or (T, error)); an unknown Kind; a key argument that is
// not a parameter or field of the activity; duplicate names; Params that do
// not match the function's parameter count. Errors surface here, at
// declaration, never at the call that matters.
func Declare(fn any, p Policy) (*Declaration, error) {
	name := p.Name
	if name == "" {
		name = FunctionName(fn)
	}
	fail := func(arg, format string, a ...any) (*Declaration, error) {
		return nil, &DeclarationError{Activity: name, Argument: arg, Reason: fmt.Sprintf(format, a...)}
	}
	if fn == nil {
		return fail("", "the activity function is nil")
	}
	if name == "" {
		return fail("", "the activity has no name; set Policy.Name")
	}
	params, err := activityParams(reflect.TypeOf(fn))
	if err != nil {
		return fail("", "%v", err)
	}
	if !p.Kind.Valid() {
		return fail("", "unknown kind %d", p.Kind)
	}
	p.KeyArguments = slices.Clone(p.KeyArguments)
	p.CheckArguments = slices.Clone(p.CheckArguments)
	p.Params = slices.Clone(p.Params)
	p.Name = name
	if dup, ok := firstDuplicate(p.KeyArguments); ok {
		return fail(dup, "named twice in KeyArguments")
	}
	if dup, ok := firstDuplicate(p.CheckArguments); ok {
		return fail(dup, "named twice in CheckArguments")
	}
	for _, c := range p.CheckArguments {
		if c == "" {
			return fail("", "CheckArguments holds an empty name")
		}
		if slices.Contains(p.KeyArguments, c) {
			return fail(c, "named in both KeyArguments and CheckArguments: a key argument always matches the record")
		}
	}
	if p.Retention < 0 {
		return nil, &DeclarationError{Activity: name, Field: "Policy.Retention", Reason: "must not be negative"}
	}
	if p.Kind == KindReadOnly && len(p.CheckArguments) > 0 {
		return fail(p.CheckArguments[0], "a READ_ONLY activity keeps no record to check arguments against")
	}
	if p.Kind == KindReadOnly && p.Retention != 0 {
		return nil, &DeclarationError{Activity: name, Field: "Policy.Retention", Reason: "a READ_ONLY activity keeps no record to retain"}
	}
	if dup, ok := firstDuplicate(p.Params); ok {
		return fail(dup, "named twice in Params")
	}
	for _, n := range p.Params {
		if n == "" {
			return fail("", "Params holds an empty name")
		}
	}
	if p.Probe != nil && p.Kind != KindEffectful {
		return fail("", "a probe applies to EFFECTFUL activities only, not %s", p.Kind)
	}
	switch {
	case p.TransactionalDB != nil && !p.Transactional:
		return fail("", "TransactionalDB is set but Transactional is not")
	case p.Transactional && p.Kind != KindEffectful:
		return fail("", "Transactional applies to EFFECTFUL activities only, not %s", p.Kind)
	case p.Transactional && p.Probe != nil:
		return fail("", "a transactional activity is never indeterminate: it takes no probe")
	}
	if len(p.DefiniteErrors) > 0 {
		p.DefiniteErrors = slices.Clone(p.DefiniteErrors)
		switch {
		case p.Kind != KindEffectful:
			return nil, &DeclarationError{Activity: name, Field: "Policy.DefiniteErrors",
				Reason: fmt.Sprintf("applies to EFFECTFUL activities only, not %s: their failures are never indeterminate", p.Kind)}
		case p.Transactional:
			return nil, &DeclarationError{Activity: name, Field: "Policy.DefiniteErrors",
				Reason: "a transactional activity's failure rolls back and frees the key: it records no failure"}
		}
		if dup, ok := firstDuplicate(p.DefiniteErrors); ok {
			return nil, &DeclarationError{Activity: name, Field: "Policy.DefiniteErrors", Reason: fmt.Sprintf("%q named twice", dup)}
		}
		if slices.Contains(p.DefiniteErrors, "") {
			return nil, &DeclarationError{Activity: name, Field: "Policy.DefiniteErrors", Reason: "holds an empty error type"}
		}
	}
	if err := checkKeyChoice(name, p); err != nil {
		return nil, err
	}
	d := &Declaration{name: name, fn: fn, policy: p}
	if p.Kind == KindReadOnly {
		return d, nil
	}

	switch {
	case len(p.Params) > 0:
		if len(p.Params) != len(params) {
			return fail("", "Params names %d parameters but the function takes %d (not counting its context)", len(p.Params), len(params))
		}
		d.argIndex = make(map[string]int, len(p.KeyArguments)+len(p.CheckArguments))
		for _, k := range slices.Concat(p.KeyArguments, p.CheckArguments) {
			i := slices.Index(p.Params, k)
			if i < 0 {
				return fail(k, "not a parameter of the activity (Params: %s)", strings.Join(p.Params, ", "))
			}
			d.argIndex[k] = i
		}
	case len(params) == 1 && isStructType(params[0]):
		fields, err := keyspace.FieldNames(params[0])
		if err != nil {
			return fail("", "%v", err)
		}
		for _, k := range slices.Concat(p.KeyArguments, p.CheckArguments) {
			if !slices.Contains(fields, k) {
				return fail(k, "not a JSON field of %s (fields: %s)", params[0], strings.Join(fields, ", "))
			}
		}
	case len(p.KeyArguments) == 0 && len(p.CheckArguments) == 0:
		d.argIndex = map[string]int{}
	default:
		return fail(slices.Concat(p.KeyArguments, p.CheckArguments)[0], "the activity takes %d positional parameters: name them in Policy.Params", len(params))
	}
	return d, nil
}

// checkKeyChoice refuses a declaration that does not say what its key is,
// or says it two ways.
func checkKeyChoice(name string, p Policy) error {
	fail := func(field, reason string) error {
		return &DeclarationError{Activity: name, Field: field, Reason: reason}
	}
	if p.Kind == KindReadOnly {
		if p.KeyAllArguments || p.OncePerRun {
			return fail("Policy.KeyAllArguments", "a READ_ONLY activity has no key")
		}
		return nil
	}
	switch n := btoi(len(p.KeyArguments) > 0) + btoi(p.KeyAllArguments) + btoi(p.OncePerRun); {
	case n == 0:
		return fail("Policy.KeyArguments", fmt.Sprintf("names no key arguments, which would make every call of the activity "+
			"in a run one key: a second call with other arguments would get the first one's answer and never run. "+
			"Say what identifies one effect: name its arguments (activity.%s(fn, \"order_id\"), or Policy.KeyArguments), "+
			"or key on every argument (Policy.KeyAllArguments); or, if one effect per run is meant, say so (Policy.OncePerRun)",
			shorthand(p.Kind)))
	case n > 1:
		return fail("Policy.KeyArguments", "KeyArguments, KeyAllArguments and OncePerRun are three ways to say what the key is: choose one")
	}
	if p.KeyAllArguments && len(p.CheckArguments) > 0 {
		return fail("Policy.CheckArguments", "with KeyAllArguments every argument is in the key already: there is nothing left to check")
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shorthand names the declaring function of kind.
func shorthand(k Kind) string {
	if k == KindIdempotent {
		return "Idempotent"
	}
	return "Effectful"
}

// MustDeclare is [Declare] that panics on a refused declaration, for
// package-level variables: a bad declaration stops the program at start.
func MustDeclare(fn any, p Policy) *Declaration {
	d, err := Declare(fn, p)
	if err != nil {
		panic(err)
	}
	return d
}

// ReadOnly declares that fn reads and changes nothing. It panics on a
// refused declaration.
func ReadOnly(fn any) *Declaration {
	return MustDeclare(fn, Policy{Kind: KindReadOnly})
}

// Idempotent declares that fn writes, but repeating it lands the same state,
// with keyArguments identifying the effect: the JSON field names of the
// activity's one struct argument. It panics on a refused declaration; use
// [Declare] with Policy.Params for positional activities.
func Idempotent(fn any, keyArguments ...string) *Declaration {
	return MustDeclare(fn, Policy{Kind: KindIdempotent, KeyArguments: keyArguments})
}

// Effectful declares that repeating fn is a second effect, with keyArguments
// identifying the effect: the JSON field names of the activity's one struct
// argument. It panics on a refused declaration; use [Declare] with
// Policy.Params for positional activities.
//
//	var Book = activity.Effectful(book, "flight")
func Effectful(fn any, keyArguments ...string) *Declaration {
	return MustDeclare(fn, Policy{Kind: KindEffectful, KeyArguments: keyArguments})
}

// Transactional declares that fn's effect lives in the store's own
// database: repeating it is a second effect (EFFECTFUL), and its body
// writes through the transaction the store hands it (pgstore.Tx), which
// commits with the outcome, so the effect happens exactly once. keyArguments
// are the JSON field names of the activity's one struct argument. It panics
// on a refused declaration; use [Declare] with Policy.Transactional for
// positional activities.
//
//	var Reserve = activity.Transactional(reserveSeat, "flight", "seat")
func Transactional(fn any, keyArguments ...string) *Declaration {
	return MustDeclare(fn, Policy{Kind: KindEffectful, KeyArguments: keyArguments, Transactional: true})
}

// IsDefinite reports whether err is a definite outcome of the body
// (Policy.DefiniteErrors): an *temporal.ApplicationError in its chain whose
// type the declaration names.
func (d *Declaration) IsDefinite(err error) bool {
	if len(d.policy.DefiniteErrors) == 0 {
		return false
	}
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && slices.Contains(d.policy.DefiniteErrors, ae.Type())
}

// IsTransactional reports whether the body runs in the store's transaction
// (Policy.Transactional).
func (d *Declaration) IsTransactional() bool { return d.policy.Transactional }

// TransactionalDB returns the database handle the declaration names for
// the body's writes (Policy.TransactionalDB), or nil.
func (d *Declaration) TransactionalDB() any { return d.policy.TransactionalDB }

// Name returns the activity type name the declaration applies to.
func (d *Declaration) Name() string { return d.name }

// Func returns the activity function.
func (d *Declaration) Func() any { return d.fn }

// Kind returns the declared kind.
func (d *Declaration) Kind() Kind { return d.policy.Kind }

// Policy returns a copy of the declared policy, with Name filled in.
func (d *Declaration) Policy() Policy {
	p := d.policy
	p.KeyArguments = slices.Clone(p.KeyArguments)
	p.CheckArguments = slices.Clone(p.CheckArguments)
	p.Params = slices.Clone(p.Params)
	p.DefiniteErrors = slices.Clone(p.DefiniteErrors)
	return p
}

// CheckArguments returns the declared checked arguments (a copy).
func (d *Declaration) CheckArguments() []string { return slices.Clone(d.policy.CheckArguments) }

// Retention returns the declared retention window; zero for the store's.
func (d *Declaration) Retention() time.Duration { return d.policy.Retention }

// Probe returns the declared probe, or nil.
func (d *Declaration) Probe() Probe { return d.policy.Probe }

// WithProbe returns a copy of d whose outcomes are probed with probe before
// they are reported indeterminate. It refuses, with a [*DeclarationError],
// a declaration that is not EFFECTFUL.
//
//	Book, err := activity.Effectful(book, "flight").WithProbe(probeBooking)
func (d *Declaration) WithProbe(probe Probe) (*Declaration, error) {
	p := d.Policy()
	p.Probe = probe
	return Declare(d.fn, p)
}

// WithName returns a copy of d that applies to the activity registered under
// name, for an activity registered with a name of its own.
func (d *Declaration) WithName(name string) (*Declaration, error) {
	p := d.Policy()
	p.Name = name
	return Declare(d.fn, p)
}

// FunctionName returns the activity type name Temporal registers fn under
// when no name is given: the function's name, or the method's name for a
// method value. It returns "" for a value that is not a function.
func FunctionName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	full := runtime.FuncForPC(v.Pointer()).Name()
	short := full[strings.LastIndexByte(full, '.')+1:]
	return strings.TrimSuffix(short, "-fm")
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
	timeType    = reflect.TypeFor[time.Time]()
)

// activityParams checks that t is an activity function's type and returns
// its parameter types after an optional leading context.Context.
func activityParams(t reflect.Type) ([]reflect.Type, error) {
	if t == nil || t.Kind() != reflect.Func {
		return nil, fmt.Errorf("%v is not a function", t)
	}
	if t.IsVariadic() {
		return nil, errors.New("variadic activities are not supported")
	}
	switch t.NumOut() {
	case 1:
	case 2:
	default:
		return nil, fmt.Errorf("an activity returns error or (T, error); %v returns %d values", t, t.NumOut())
	}
	if t.Out(t.NumOut()-1) != errorType {
		return nil, fmt.Errorf("an activity's last result must be error; %v", t)
	}
	params := make([]reflect.Type, 0, t.NumIn())
	for i := range t.NumIn() {
		if i == 0 && t.In(i) == contextType {
			continue
		}
		params = append(params, t.In(i))
	}
	return params, nil
}

func isStructType(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != timeType
}

func firstDuplicate(names []string) (string, bool) {
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if _, ok := seen[n]; ok {
			return n, true
		}
		seen[n] = struct{}{}
	}
	return "", false
}
