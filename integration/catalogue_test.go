package integration

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// catalogueRequest is the argument of the catalogue's activities.
type catalogueRequest struct {
	Flight    string `json:"flight"`
	Passenger string `json:"passenger"`
	secret    string // a non-exported field no declaration may name
}

func catalogueBook(_ context.Context, req catalogueRequest) (string, error) { return req.secret, nil }
func catalogueCharge(context.Context, string, int) (string, error)          { return "", nil }
func catalogueDepart(context.Context, departure) (string, error)            { return "", nil }
func catalogueProbe(context.Context, activity.ProbeRequest) (activity.ProbeAnswer, error) {
	return activity.AnswerCannotTell(), nil
}

type departure struct {
	time.Time
	Flight string `json:"flight"`
}

// catalogueDerive derives a key for one key argument "a" holding v.
func catalogueDerive(v any) error {
	_, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "r", Activity: "Book",
		Arguments: map[string]any{"a": v}, KeyArguments: []string{"a"}})
	return err
}

// The bad-input catalogue: every row is input a user, an operator or a
// hostile caller can give, and the answer it gets — a clear, typed error
// (or, where the rule is to accept, the documented answer) — with nothing
// written: the store under the row holds no record afterwards.
func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := store.NewMemory(store.MemoryOptions{})
	require.NoError(t, err)
	d := openDurableStores(t)
	pool, schema, pg, rc, prefix, rs := d.pool, d.schema, d.pg, d.rc, d.prefix, d.rs
	stores := map[string]store.Store{"memory": mem, "postgres": pg, "redis": rs}
	resolver, err := interceptor.New(interceptor.Options{Store: mem})
	require.NoError(t, err)
	resolve := resolver.ResolveActivity()

	cycle := map[string]any{}
	cycle["self"] = cycle
	deep := any(nil)
	for range 100_000 {
		deep = []any{deep}
	}
	claimAll := func(tenant string) error {
		var errs []error
		for name, s := range stores {
			if _, err := s.Claim(ctx, store.ClaimParams{Tenant: tenant, Key: "k", Holder: "h", Lease: time.Minute}); err != nil {
				errs = append(errs, err)
			} else {
				errs = append(errs, errors.New(name+" accepted it"))
			}
		}
		return errors.Join(errs...)
	}
	declare := func(fn any, p activity.Policy) error { _, err := activity.Declare(fn, p); return err }
	typed := func(target error) func(t *testing.T, err error) {
		return func(t *testing.T, err error) {
			t.Helper()
			require.ErrorIs(t, err, target)
		}
	}
	invalidStore := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrInvalid)
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			require.ErrorIs(t, e, store.ErrInvalid, "every store refuses it")
		}
	}
	options := func(field string) func(t *testing.T, err error) {
		return func(t *testing.T, err error) {
			t.Helper()
			var oe *interceptor.OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "interceptor.Options."+field, oe.Field)
		}
	}
	nonRetryable := func(t *testing.T, err error) {
		t.Helper()
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		assert.True(t, appErr.NonRetryable())
	}
	rows := []struct {
		name string
		do   func() error
		want func(t *testing.T, err error)
	}{
		// Declarations.
		{"DeclarationMissingKeyArgument", func() error {
			return declare(catalogueBook, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flihgt"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationDuplicateKeyArgument", func() error {
			return declare(catalogueBook, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "flight"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationNonExportedField", func() error {
			return declare(catalogueBook, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"secret"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationPositionalWithoutParams", func() error {
			return declare(catalogueCharge, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"card"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationParamsCountMismatch", func() error {
			return declare(catalogueCharge, activity.Policy{Kind: activity.KindEffectful, Params: []string{"card"}, KeyArguments: []string{"card"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationEmbeddedTimeHasNoMembers", func() error {
			return declare(catalogueDepart, activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight"}})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationProbeOnIdempotent", func() error {
			return declare(catalogueBook, activity.Policy{Kind: activity.KindIdempotent, KeyArguments: []string{"flight"}, Probe: catalogueProbe})
		}, typed(activity.ErrInvalidDeclaration)},
		{"DeclarationUnknownKind", func() error { return declare(catalogueBook, activity.Policy{Kind: 9}) }, typed(activity.ErrInvalidDeclaration)},
		// Key arguments.
		{"KeyArgumentNaN", func() error { return catalogueDerive(math.NaN()) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentPlusInf", func() error { return catalogueDerive(math.Inf(1)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentMinusInf", func() error { return catalogueDerive(math.Inf(-1)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentChannel", func() error { return catalogueDerive(make(chan int)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentFunc", func() error { return catalogueDerive(func() {}) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentCycle", func() error { return catalogueDerive(cycle) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgument100kDeep", func() error { return catalogueDerive(deep) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentAmbiguousFloat", func() error { return catalogueDerive(float64(1 << 60)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentDuplicateMembers", func() error { return catalogueDerive(json.RawMessage(`{"a":1,"a":2}`)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentYear10000", func() error { return catalogueDerive(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) }, typed(keyspace.ErrUnencodable)},
		{"KeyArgumentInvalidUTF8IsAnswered", func() error {
			// The rule is encoding/json's: invalid bytes become U+FFFD, as
			// on the wire, so the key is the one the wire text derives.
			a, errA := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": "x\xffy"}, KeyArguments: []string{"a"}})
			b, errB := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": "x\ufffdy"}, KeyArguments: []string{"a"}})
			if err := errors.Join(errA, errB); err != nil {
				return err
			}
			if a != b {
				return errors.New("invalid UTF-8 and its U+FFFD spelling derive different keys")
			}
			return nil
		}, func(t *testing.T, err error) { require.NoError(t, err) }},
		{"KeyArgument10MiBIsAnswered", func() error {
			big := strings.Repeat("x", 10<<20)
			a, errA := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": big}, KeyArguments: []string{"a"}})
			b, errB := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": big + "y"}, KeyArguments: []string{"a"}})
			if err := errors.Join(errA, errB); err != nil {
				return err
			}
			if a == b {
				return errors.New("two 10 MiB strings that differ in their last byte share a key")
			}
			return nil
		}, func(t *testing.T, err error) { require.NoError(t, err) }},
		{"KeyArgumentAbsent", func() error {
			_, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{}, KeyArguments: []string{"flight"}})
			return err
		}, typed(keyspace.ErrMissingArgument)},
		// Tenants, at every store.
		{"TenantEmpty", func() error { return claimAll("") }, invalidStore},
		{"TenantOversized", func() error { return claimAll(strings.Repeat("t", store.MaxTenantLength+1)) }, invalidStore},
		{"TenantNUL", func() error { return claimAll("ac\x00me") }, invalidStore},
		{"TenantInvalidUTF8", func() error { return claimAll("acme\xff") }, invalidStore},
		{"DefaultTenantRefused", func() error {
			_, err := interceptor.New(interceptor.Options{Store: mem, DefaultTenant: "a\x00b"})
			return err
		}, options("DefaultTenant")},
		// Hostile names for the stores' own objects.
		{"SchemaNameSQL", func() error {
			_, err := pgstore.New(pool, pgstore.Options{Schema: `public"; DROP TABLE x; --`})
			return err
		}, typed(store.ErrInvalid)},
		{"TableNameTooLong", func() error {
			_, err := pgstore.New(pool, pgstore.Options{Table: strings.Repeat("t", 64)})
			return err
		}, typed(store.ErrInvalid)},
		{"RedisPrefixHashTag", func() error {
			_, err := redisstore.New(rc, redisstore.Options{Prefix: "a{b}"})
			return err
		}, typed(store.ErrInvalid)},
		{"RedisPrefixGlob", func() error {
			_, err := redisstore.New(rc, redisstore.Options{Prefix: "a*"})
			return err
		}, typed(store.ErrInvalid)},
		// Options that would crash a worker.
		{"LeaseTwoNanoseconds", func() error {
			_, err := interceptor.New(interceptor.Options{Store: mem, Lease: 2})
			return err
		}, options("Lease")},
		{"NegativeClaimTimeout", func() error {
			_, err := interceptor.New(interceptor.Options{Store: mem, StoreTimeout: -1})
			return err
		}, options("StoreTimeout")},
		// Decisions applied through the Resolve activity.
		{"DecisionUnknownAction", func() error {
			return resolve(ctx, decision.ResolveRequest{Tenant: "acme", Key: "k", Action: "book-it"})
		}, nonRetryable},
		{"DecisionHostileTenant", func() error {
			return resolve(ctx, decision.ResolveRequest{Tenant: "a\x00", Key: "k", Action: decision.ActionFree})
		}, nonRetryable},
		{"DecisionNoKey", func() error {
			return resolve(ctx, decision.ResolveRequest{Tenant: "acme", Key: "", Action: decision.ActionFree})
		}, nonRetryable},
	}
	require.GreaterOrEqual(t, len(rows), 25, "the catalogue has at least 25 rows")
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = row.do() })
			row.want(t, err)
		})
	}
	assert.Zero(t, mem.Len(), "nothing was written to the memory store")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.`+pgstore.DefaultTable).Scan(&n))
	assert.Zero(t, n, "nothing was written to PostgreSQL")
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing was written to Redis")
}
