package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// The secrets a booking carries; no store may keep them.
const (
	passengerName = "Ada Lovelace-Byron"
	cardNumber    = "4111111111111111"
)

// hostileActivity is an activity type name made of what a store might
// interpret: SQL, Lua, Redis hash-tag braces and glob characters.
const hostileActivity = `Book'); DROP TABLE x; -- {tag} redis.call("FLUSHALL") *?`

// PaidBooking is the argument that carries the secrets; only Flight is a
// key argument.
type PaidBooking struct {
	Flight    string `json:"flight"`
	Passenger string `json:"passenger"`
	Card      string `json:"card"`
}

func bookPaid(_ context.Context, b PaidBooking) (string, error) {
	return "CONF-" + b.Flight, nil
}

// PaidBookingTwice books one flight twice under the hostile activity name.
func PaidBookingTwice(ctx workflow.Context, flight string) ([]string, error) {
	ctx = activityOptions(ctx, 10*time.Second, time.Second)
	req := PaidBooking{Flight: flight, Passenger: passengerName, Card: cardNumber}
	var a, b string
	if err := workflow.ExecuteActivity(ctx, hostileActivity, req).Get(ctx, &a); err != nil {
		return nil, err
	}
	if err := workflow.ExecuteActivity(ctx, hostileActivity, req).Get(ctx, &b); err != nil {
		return nil, err
	}
	return []string{a, b}, nil
}

// No arguments at rest, and hostile names matched exactly: after real
// workflows under a hostile tenant and activity name, every stored row and
// every Redis key and value is scanned for the passenger's name and card
// number, and none is found; the records name the activity and tenant
// byte for byte.
func TestNoArgumentsAtRestAndHostileNames(t *testing.T) {
	t.Parallel()
	const hostileTenant = `acme'; DELETE FROM t; -- {x} ]]`
	ctx := context.Background()

	d := openDurableStores(t)
	pool, schema, pg, rc, prefix, rs := d.pool, d.schema, d.pg, d.rc, d.prefix, d.rs

	for name, st := range map[string]store.Store{"postgres": pg, "redis": rs} {
		e := newEnv(t, st, interceptor.Options{})
		decl, err := activity.Effectful(bookPaid, "flight").WithName(hostileActivity)
		require.NoError(t, err)
		require.NoError(t, e.worker.Register(decl), name)
		e.worker.RegisterWorkflow(PaidBookingTwice)
		e.start()
		var got []string
		require.NoError(t, e.execute(hostileTenant, PaidBookingTwice, &got, "BA117"), name)
		assert.Equal(t, []string{"CONF-BA117", "CONF-BA117"}, got, name)
		assert.Equal(t, 1, e.events.count(interceptor.EventDeduplicated), "%s: the second call was answered from the record", name)
	}

	// PostgreSQL: every column of every row, as text.
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT t::text FROM %s.%s AS t`, schema, pgstore.DefaultTable))
	require.NoError(t, err)
	var pgRows int
	for rows.Next() {
		var text string
		require.NoError(t, rows.Scan(&text))
		pgRows++
		assert.NotContains(t, text, passengerName)
		assert.NotContains(t, text, cardNumber)
	}
	require.NoError(t, rows.Err())
	require.Positive(t, pgRows, "PostgreSQL holds the record")
	recs, err := pool.Query(ctx, fmt.Sprintf(`SELECT tenant, origin_activity_type FROM %s.%s`, schema, pgstore.DefaultTable))
	require.NoError(t, err)
	for recs.Next() {
		var tenant, activityType string
		require.NoError(t, recs.Scan(&tenant, &activityType))
		assert.Equal(t, hostileTenant, tenant, "the tenant is stored byte for byte")
		assert.Equal(t, hostileActivity, activityType, "the activity name is stored byte for byte")
	}
	require.NoError(t, recs.Err())

	// Redis: every key under the prefix, with every value it holds.
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "Redis holds the record")
	for _, k := range keys {
		assert.NotContains(t, k, passengerName)
		assert.NotContains(t, k, cardNumber)
		var values []string
		switch typ := rc.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range rc.HGetAll(ctx, k).Val() {
				values = append(values, f, v)
			}
		case "set":
			values = rc.SMembers(ctx, k).Val()
		case "zset":
			values = rc.ZRange(ctx, k, 0, -1).Val()
		case "string":
			values = []string{rc.Get(ctx, k).Val()}
		default:
			t.Fatalf("key %q of type %s is not scanned", k, typ)
		}
		joined := strings.Join(values, "\x00")
		assert.NotContains(t, joined, passengerName, "key %s", k)
		assert.NotContains(t, joined, cardNumber, "key %s", k)
	}
}

// durableStores are a pgstore in a schema of the test's own and a Redis
// store under a prefix of its own, with what they run on, for tests that
// look at the stored rows and keys themselves.
type durableStores struct {
	pool   *pgxpool.Pool
	schema string
	pg     *pgstore.Store
	rc     redis.UniversalClient
	prefix string
	rs     *redisstore.Store
}

func openDurableStores(t *testing.T) durableStores {
	t.Helper()
	d := durableStores{}
	d.pool, d.schema = pgenv.Postgres(t)
	var err error
	d.pg, err = pgstore.New(d.pool, pgstore.Options{Schema: d.schema})
	require.NoError(t, err)
	require.NoError(t, d.pg.EnsureSchema(context.Background()))
	t.Cleanup(d.pg.Close)
	d.rc, d.prefix = redisenv.Redis(t)
	d.rs, err = redisstore.New(d.rc, redisstore.Options{Prefix: d.prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.rs.Close() })
	return d
}
