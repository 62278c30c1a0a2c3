package activity_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/keyspace"
)

type BookRequest struct {
	Flight    string `json:"flight"`
	Seat      string `json:"seat,omitempty"`
	RequestID string `json:"request_id"`
}

func Book(context.Context, BookRequest) (string, error) { return "", nil }

func Charge(_ context.Context, card string, amount int, requestID string) error { return nil }

func Ping(context.Context) error { return nil }

func LookupFare(context.Context, string) (int, error) { return 0, nil }

func Stamp(context.Context, time.Time) error { return nil }

// Departure embeds time.Time: on the wire it is that time alone, so Flight
// is never a JSON member of it.
type Departure struct {
	time.Time
	Flight string `json:"flight"`
}

func Depart(context.Context, Departure) error { return nil }

func NoError(context.Context, BookRequest) string { return "" }

func ThreeResults(context.Context) (int, int, error) { return 0, 0, nil }

func Variadic(context.Context, ...string) error { return nil }

type bookings struct{}

func (bookings) Reserve(context.Context, BookRequest) error { return nil }

func TestDeclareAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fn       any
		policy   activity.Policy
		wantName string
	}{
		{"StructKeyArgument", Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, "Book"},
		{"StructOncePerRun", Book, activity.Policy{Kind: activity.KindIdempotent, OncePerRun: true}, "Book"},
		{"StructAllArguments", Book, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true}, "Book"},
		{"PositionalAllArguments", Charge, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true}, "Charge"},
		{"Positional", Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "amount", "requestID"}, KeyArguments: []string{"card", "amount"}}, "Charge"},
		{"NoParameters", Ping, activity.Policy{Kind: activity.KindEffectful, OncePerRun: true}, "Ping"},
		{"ReadOnlyIgnoresKeyArguments", LookupFare, activity.Policy{Kind: activity.KindReadOnly, KeyArguments: []string{"anything"}}, "LookupFare"},
		{"ExplicitName", Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Name: "book-v2"}, "book-v2"},
		{"MethodValue", bookings{}.Reserve, activity.Policy{Kind: activity.KindIdempotent, KeyArguments: []string{"flight"}}, "Reserve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := activity.Declare(tt.fn, tt.policy)
			require.NoError(t, err)
			assert.Equal(t, tt.wantName, d.Name())
			assert.Equal(t, tt.policy.Kind, d.Kind())
			assert.Equal(t, tt.wantName, d.Policy().Name)
			assert.NotNil(t, d.Func())
		})
	}
}

func TestDeclareRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fn       any
		policy   activity.Policy
		activity string
		argument string
		reason   string
	}{
		{"Nil", nil, activity.Policy{Kind: activity.KindEffectful, Name: "x"}, "x", "", "nil"},
		{"NotAFunction", "book", activity.Policy{Kind: activity.KindEffectful, Name: "x"}, "x", "", "not a function"},
		{"NoNameForNonFunction", 42, activity.Policy{Kind: activity.KindEffectful}, "", "", "no name"},
		{"NotReturningError", NoError, activity.Policy{Kind: activity.KindEffectful}, "NoError", "", "last result must be error"},
		{"ThreeResults", ThreeResults, activity.Policy{Kind: activity.KindEffectful}, "ThreeResults", "", "returns 3 values"},
		{"Variadic", Variadic, activity.Policy{Kind: activity.KindEffectful}, "Variadic", "", "variadic"},
		{"UnknownKind", Book, activity.Policy{Kind: 9}, "Book", "", "unknown kind"},
		{"ZeroKind", Book, activity.Policy{}, "Book", "", "unknown kind"},
		{"UnknownStructField", Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flihgt"}}, "Book", "flihgt", "not a JSON field"},
		{"GoFieldNameIsNotJSONName", Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"Flight"}}, "Book", "Flight", "not a JSON field"},
		{"DuplicateKeyArgument", Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "flight"}}, "Book", "flight", "named twice in KeyArguments"},
		{"DuplicateParam", Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "card", "id"}}, "Charge", "card", "named twice in Params"},
		{"EmptyParam", Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "", "id"}}, "Charge", "", "empty name"},
		{"ParamsCountMismatch", Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "amount"}, KeyArguments: []string{"card"}}, "Charge", "", "Params names 2 parameters but the function takes 3"},
		{"UnknownPositional", Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "amount", "requestID"}, KeyArguments: []string{"currency"}}, "Charge", "currency", "not a parameter"},
		{"PositionalWithoutParams", Charge, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"card"}}, "Charge", "card", "name them in Policy.Params"},
		{"EmbeddedTimeHasNoMembers", Depart, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}, "Depart", "", "marshals as the time.Time it embeds"},
		{"TransactionalIdempotent", Book, activity.Policy{Kind: activity.KindIdempotent, KeyArguments: []string{"flight"}, Transactional: true}, "Book", "", "EFFECTFUL activities only"},
		{"TransactionalWithProbe", Book, activity.Policy{Kind: activity.KindEffectful, Transactional: true,
			Probe: func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
				return activity.ProbeAnswer{}, nil
			}}, "Book", "", "takes no probe"},
		{"TransactionalDBAlone", Book, activity.Policy{Kind: activity.KindEffectful, TransactionalDB: struct{}{}}, "Book", "", "Transactional is not"},
		{"TimeIsNotAStruct", Stamp, activity.Policy{Kind: activity.KindIdempotent, KeyArguments: []string{"wall"}}, "Stamp", "wall", "name them in Policy.Params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := activity.Declare(tt.fn, tt.policy)
			require.Error(t, err)
			assert.Nil(t, d)
			assert.ErrorIs(t, err, activity.ErrInvalidDeclaration)
			var de *activity.DeclarationError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tt.activity, de.Activity, "Activity")
			assert.Equal(t, tt.argument, de.Argument, "Argument")
			assert.Contains(t, de.Reason, tt.reason, "Reason")
			if tt.activity != "" {
				assert.Contains(t, err.Error(), `"`+tt.activity+`"`, "the message names the activity")
			}
			if tt.argument != "" {
				assert.Contains(t, err.Error(), `"`+tt.argument+`"`, "the message names the argument")
			}
		})
	}
}

func TestMustDeclarePanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    func()
	}{
		{"MustDeclare", func() { activity.MustDeclare(Book, activity.Policy{}) }},
		{"ReadOnly", func() { activity.ReadOnly("not a function") }},
		{"Idempotent", func() { activity.Idempotent(Book, "nope") }},
		{"Effectful", func() { activity.Effectful(Book, "nope") }},
		{"EffectfulPositional", func() { activity.Effectful(Charge, "card") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				p := recover()
				require.NotNil(t, p, "want a panic")
				err, ok := p.(error)
				require.True(t, ok, "the panic value is the declaration error, got %T", p)
				assert.ErrorIs(t, err, activity.ErrInvalidDeclaration)
			}()
			tt.f()
		})
	}
}

func TestShorthands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    *activity.Declaration
		kind activity.Kind
		keys []string
	}{
		{"ReadOnly", activity.ReadOnly(LookupFare), activity.KindReadOnly, nil},
		{"Idempotent", activity.Idempotent(Book, "flight", "seat"), activity.KindIdempotent, []string{"flight", "seat"}},
		{"Effectful", activity.Effectful(Book, "flight"), activity.KindEffectful, []string{"flight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.kind, tt.d.Kind())
			assert.Equal(t, tt.keys, tt.d.Policy().KeyArguments)
		})
	}
}

func TestPolicyIsACopy(t *testing.T) {
	t.Parallel()
	keys := []string{"card", "amount"}
	params := []string{"card", "amount", "requestID"}
	d, err := activity.Declare(Charge, activity.Policy{Kind: activity.KindEffectful, Params: params, KeyArguments: keys})
	require.NoError(t, err)
	keys[0], params[0] = "changed", "changed"
	p := d.Policy()
	assert.Equal(t, []string{"card", "amount"}, p.KeyArguments, "Declare copies KeyArguments")
	assert.Equal(t, []string{"card", "amount", "requestID"}, p.Params, "Declare copies Params")
	p.KeyArguments[0] = "mutated"
	assert.Equal(t, "card", d.Policy().KeyArguments[0], "Policy returns a copy")
}

func TestFunctionName(t *testing.T) {
	t.Parallel()
	var nilFn func()
	tests := []struct {
		name string
		fn   any
		want string
	}{
		{"Function", Book, "Book"},
		{"MethodValue", bookings{}.Reserve, "Reserve"},
		{"PointerMethodValue", (&bookings{}).Reserve, "Reserve"},
		{"NotAFunction", "Book", ""},
		{"Nil", nil, ""},
		{"NilFunc", nilFn, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, activity.FunctionName(tt.fn))
		})
	}
}

func TestDeclarationKey(t *testing.T) {
	t.Parallel()
	book := activity.Effectful(Book, "flight")
	charge, err := activity.Declare(Charge, activity.Policy{
		Kind: activity.KindEffectful, Params: []string{"card", "amount", "requestID"}, KeyArguments: []string{"card", "amount"},
	})
	require.NoError(t, err)
	ping, err := activity.Declare(Ping, activity.Policy{Kind: activity.KindEffectful, OncePerRun: true})
	require.NoError(t, err)

	key := func(t *testing.T, d *activity.Declaration, tenant, run string, args ...any) keyspace.Key {
		t.Helper()
		k, err := d.Key(tenant, run, args)
		require.NoError(t, err)
		_, err = keyspace.ParseKey(string(k))
		require.NoError(t, err, "a derived key has the canonical form")
		return k
	}

	t.Run("StructRequestIDExcluded", func(t *testing.T) {
		t.Parallel()
		a := key(t, book, "acme", "run", BookRequest{Flight: "BA117", RequestID: "a"})
		b := key(t, book, "acme", "run", BookRequest{Flight: "BA117", RequestID: "b"})
		assert.Equal(t, a, b)
	})
	t.Run("StructPointerSameAsValue", func(t *testing.T) {
		t.Parallel()
		a := key(t, book, "acme", "run", BookRequest{Flight: "BA117"})
		b := key(t, book, "acme", "run", &BookRequest{Flight: "BA117", RequestID: "z"})
		assert.Equal(t, a, b)
	})
	t.Run("PositionalRequestIDExcluded", func(t *testing.T) {
		t.Parallel()
		a := key(t, charge, "acme", "run", "4111", 100, "req-1")
		b := key(t, charge, "acme", "run", "4111", 100, "req-2")
		assert.Equal(t, a, b)
	})
	t.Run("Distinct", func(t *testing.T) {
		t.Parallel()
		base := key(t, book, "acme", "run", BookRequest{Flight: "BA117"})
		others := map[string]keyspace.Key{
			"flight":   key(t, book, "acme", "run", BookRequest{Flight: "BA118"}),
			"tenant":   key(t, book, "globex", "run", BookRequest{Flight: "BA117"}),
			"run":      key(t, book, "acme", "run-2", BookRequest{Flight: "BA117"}),
			"activity": key(t, renamed(t, book, "Book2"), "acme", "run", BookRequest{Flight: "BA117"}),
		}
		for what, k := range others {
			assert.NotEqual(t, base, k, "a different %s is a different key", what)
		}
		assert.NotEqual(t, key(t, charge, "acme", "run", "4111", 100, "r"), key(t, charge, "acme", "run", "4111", 101, "r"))
	})
	t.Run("NoKeyArgumentsOneEffectPerRun", func(t *testing.T) {
		t.Parallel()
		assert.Equal(t, key(t, ping, "acme", "run"), key(t, ping, "acme", "run"))
		assert.NotEqual(t, key(t, ping, "acme", "run"), key(t, ping, "acme", "other"))
	})
	t.Run("MissingStructArgument", func(t *testing.T) {
		t.Parallel()
		_, err := book.Key("acme", "run", nil)
		require.ErrorIs(t, err, keyspace.ErrMissingArgument)
	})
	t.Run("MissingPositionalArgument", func(t *testing.T) {
		t.Parallel()
		_, err := charge.Key("acme", "run", []any{"4111"})
		require.ErrorIs(t, err, keyspace.ErrMissingArgument)
	})
	t.Run("EmptyTenant", func(t *testing.T) {
		t.Parallel()
		_, err := book.Key("", "run", []any{BookRequest{Flight: "BA117"}})
		require.Error(t, err)
		assert.True(t, errors.Is(err, keyspace.ErrInvalidInput), "got %v", err)
	})
}

func TestWithName(t *testing.T) {
	t.Parallel()
	d := activity.Effectful(Book, "flight")
	renamed, err := d.WithName("book-v2")
	require.NoError(t, err)
	assert.Equal(t, "book-v2", renamed.Name())
	assert.Equal(t, "Book", d.Name(), "the original is unchanged")
	assert.Equal(t, d.Policy().KeyArguments, renamed.Policy().KeyArguments)
}

func renamed(t *testing.T, d *activity.Declaration, name string) *activity.Declaration {
	t.Helper()
	r, err := d.WithName(name)
	require.NoError(t, err)
	return r
}

func TestTransactionalShorthand(t *testing.T) {
	t.Parallel()
	d := activity.Transactional(Book, "flight")
	assert.True(t, d.IsTransactional())
	assert.Equal(t, activity.KindEffectful, d.Kind())
	assert.Nil(t, d.TransactionalDB())
	assert.True(t, d.Policy().Transactional)
	assert.False(t, activity.Effectful(Book, "flight").IsTransactional())
	db := &struct{ name string }{"pool"}
	d, err := activity.Declare(Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"},
		Transactional: true, TransactionalDB: db})
	require.NoError(t, err)
	assert.Same(t, db, d.TransactionalDB())
	_, err = d.WithProbe(func(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
		return activity.ProbeAnswer{}, nil
	})
	assert.ErrorIs(t, err, activity.ErrInvalidDeclaration, "WithProbe on a transactional declaration")
}

// A declaration that does not say what its key is is refused: read as one
// key per run, every call of the activity in a run after the first got the
// first one's answer and never ran (two orders, one charge). The message
// names the ways to say it.
func TestDeclareRefusesAnUnstatedKey(t *testing.T) {
	t.Parallel()
	for _, kind := range []activity.Kind{activity.KindEffectful, activity.KindIdempotent} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			_, err := activity.Declare(Book, activity.Policy{Kind: kind})
			require.ErrorIs(t, err, activity.ErrInvalidDeclaration)
			var de *activity.DeclarationError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "Policy.KeyArguments", de.Field)
			for _, want := range []string{"Policy.KeyAllArguments", "Policy.OncePerRun", "names no key arguments"} {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
	assert.PanicsWithError(t, mustErr(activity.Declare(Book, activity.Policy{Kind: activity.KindEffectful})).Error(),
		func() { activity.Effectful(Book) }, "the shorthand with no key arguments")
	assert.Panics(t, func() { activity.Idempotent(Book) })
	assert.Panics(t, func() { activity.Transactional(Book) })

	for name, p := range map[string]activity.Policy{
		"KeysAndAll":          {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, KeyAllArguments: true},
		"KeysAndOnce":         {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, OncePerRun: true},
		"AllAndOnce":          {Kind: activity.KindIdempotent, KeyAllArguments: true, OncePerRun: true},
		"AllAndCheck":         {Kind: activity.KindEffectful, KeyAllArguments: true, CheckArguments: []string{"flight"}},
		"ReadOnlyWithOnce":    {Kind: activity.KindReadOnly, OncePerRun: true},
		"ReadOnlyWithAllArgs": {Kind: activity.KindReadOnly, KeyAllArguments: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := activity.Declare(Book, p)
			require.ErrorIs(t, err, activity.ErrInvalidDeclaration)
		})
	}
}

func mustErr(_ *activity.Declaration, err error) error { return err }

// KeyAllArguments keys on every argument: calls that differ in any argument
// are two keys, identical calls (a retry carries its first attempt's input)
// one. OncePerRun keeps the key a declaration without key arguments had.
func TestDeclarationKeyChoices(t *testing.T) {
	t.Parallel()
	all := activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true})
	allPositional := activity.MustDeclare(Charge, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true})
	once := activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, OncePerRun: true})
	key := func(d *activity.Declaration, args ...any) keyspace.Key {
		k, err := d.Key("acme", "run", args)
		require.NoError(t, err)
		return k
	}
	a := BookRequest{Flight: "BA117", RequestID: "a"}
	assert.Equal(t, key(all, a), key(all, a), "a retry")
	assert.NotEqual(t, key(all, a), key(all, BookRequest{Flight: "BA118", RequestID: "a"}), "another order")
	assert.NotEqual(t, key(all, a), key(all, BookRequest{Flight: "BA117", RequestID: "b"}), "every argument is in the key")
	assert.Equal(t, key(allPositional, "4242", 100, "r1"), key(allPositional, "4242", 100, "r1"))
	assert.NotEqual(t, key(allPositional, "4242", 100, "r1"), key(allPositional, "4242", 101, "r1"))
	assert.NotEqual(t, key(all, a), key(once, a))

	// The key a declaration without key arguments had before OncePerRun.
	old, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "run", Activity: "Book", Arguments: a})
	require.NoError(t, err)
	assert.Equal(t, old, key(once, a))
	assert.Equal(t, old, key(once, BookRequest{Flight: "BA118"}), "one key per run, whatever the arguments")
}

// DefiniteErrors applies to EFFECTFUL, non-transactional declarations, and
// names each type once; IsDefinite matches an application error of a named
// type anywhere in the chain.
func TestDefiniteErrors(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]activity.Policy{
		"Idempotent":    {Kind: activity.KindIdempotent, KeyArguments: []string{"flight"}, DefiniteErrors: []string{"Declined"}},
		"Transactional": {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, Transactional: true, DefiniteErrors: []string{"Declined"}},
		"Twice":         {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, DefiniteErrors: []string{"Declined", "Declined"}},
		"Empty":         {Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, DefiniteErrors: []string{""}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := activity.Declare(Book, p)
			var de *activity.DeclarationError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "Policy.DefiniteErrors", de.Field)
		})
	}
	d := activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, DefiniteErrors: []string{"Declined"}})
	assert.True(t, d.IsDefinite(fmt.Errorf("charging: %w", temporal.NewNonRetryableApplicationError("no", "Declined", nil))))
	assert.False(t, d.IsDefinite(temporal.NewApplicationError("no", "Timeout")))
	assert.False(t, d.IsDefinite(errors.New("Declined")))
	assert.False(t, activity.Effectful(Book, "flight").IsDefinite(temporal.NewApplicationError("no", "Declined")))
}

// TestIdentityIsKeyAndCheck: Identity derives what KeyUnder and CheckUnder
// derive, under no secret and under one, for struct and positional
// declarations, with and without checked arguments, and fails where
// either would.
func TestIdentityIsKeyAndCheck(t *testing.T) {
	secret, err := keyspace.NewSecret(1, []byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	decls := map[string]*activity.Declaration{
		"Struct":        activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}}),
		"StructChecked": activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seat"}}),
		"StructAll":     activity.MustDeclare(Book, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true}),
		"PositionalAll": activity.MustDeclare(Charge, activity.Policy{Kind: activity.KindEffectful, KeyAllArguments: true}),
		"PositionalNamed": activity.MustDeclare(Charge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card", "amount", "requestID"},
			KeyArguments: []string{"card"}, CheckArguments: []string{"amount"}}),
	}
	argsOf := map[string][][]any{
		"Book":   {{BookRequest{Flight: "BA117", Seat: "4A"}}, {BookRequest{Flight: "BA117"}}, nil},
		"Charge": {{"acct", 100}, {"acct"}, nil},
	}
	for name, d := range decls {
		fn := "Book"
		if strings.HasPrefix(name, "Positional") {
			fn = "Charge"
		}
		for _, s := range []*keyspace.Secret{nil, secret} {
			for _, args := range argsOf[fn] {
				key, check, err := d.Identity(s, "acme", "run-1", args)
				wantKey, kerr := d.KeyUnder(s, "acme", "run-1", args)
				wantCheck, cerr := d.CheckUnder(s, "acme", "run-1", args)
				if kerr != nil || cerr != nil {
					assert.Error(t, err, "%s %v", name, args)
					continue
				}
				require.NoError(t, err, "%s %v", name, args)
				assert.Equal(t, wantKey, key, "%s %v", name, args)
				assert.Equal(t, wantCheck, check, "%s %v", name, args)
			}
		}
	}
}
