package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // as main does
	goleak.VerifyTestMain(m)
}

// Keys as the dispatcher derives them: "v1:" and 64 hex digits.
const (
	testKey   = "v1:6f1d5c8a1b2e4d3f9a7c0b1e2d3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5"
	absentKey = "v1:0000000000000000000000000000000000000000000000000000000000000000"
)

// result is what one invocation of the command produced.
type result struct {
	code           int
	stdout, stderr string
}

// invoke runs the command with args, the environment env and open as the
// way to open a store.
func invoke(t *testing.T, env map[string]string, open func(context.Context, config) (*backend, error), args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	// No developer's own temporal.toml: a configuration file that does
	// not exist, unless env names one.
	absent := filepath.Join(t.TempDir(), "absent.toml")
	c := &cli{
		stdout: &out,
		stderr: &errOut,
		getenv: func(k string) string {
			if v, ok := env[k]; ok || k != envTemporalConfigFile {
				return v
			}
			return absent
		},
		open: open,
	}
	code := c.run(context.Background(), args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// invokeReal runs the command exactly as main does, through the real flags.
func invokeReal(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// requireOneErrorLine checks that a failed run wrote one line to stderr
// holding want.
func requireOneErrorLine(t *testing.T, r result, want string) {
	t.Helper()
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr should be one line: %q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, "idempotencyctl: "), "stderr: %q", r.stderr)
	assert.Contains(t, r.stderr, want)
}

// noOpen fails the test if the command tries to open a store.
func noOpen(t *testing.T) func(context.Context, config) (*backend, error) {
	return func(context.Context, config) (*backend, error) {
		t.Errorf("the command opened a store; a usage error must not")
		return nil, errors.New("no store in this test")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	pg := []string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x"}
	with := func(args ...string) []string { return append(append([]string{}, pg...), args...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", pg, "no command given"},
		{"unknown command", with("delete"), `unknown command "delete"`},
		{"unknown global flag", []string{"-stor", "redis", "show"}, "flag provided but not defined: -stor"},
		{"unknown command flag", with("show", "-tenant", "a", "-key", testKey, "-verbose"), "show: flag provided but not defined: -verbose"},
		{"positional argument", with("show", "-tenant", "a", "-key", testKey, "extra"), `unexpected argument "extra"`},
		{"no store", []string{"show", "-tenant", "a", "-key", testKey}, "no store given"},
		{"unknown store", []string{"-store", "mysql", "show", "-tenant", "a", "-key", testKey}, `unknown store "mysql"`},
		{"store flag after the command, misspelt", with("show", "-tenant", "a", "-key", testKey, "-tabel", "x"), "show: flag provided but not defined: -tabel"},
		{"zero timeout", append([]string{"-timeout", "0s"}, with("sweep")...), "-timeout must be positive"},
		{"show without tenant", with("show", "-key", testKey), "show: -tenant is required"},
		{"show without key", with("show", "-tenant", "a"), "show: -key is required"},
		{"show with a NUL in the tenant", with("show", "-tenant", "a\x00b", "-key", testKey), "invalid Tenant"},
		{"resolve without a decision", with("resolve", "-tenant", "a", "-key", testKey), "one of -outcome JSON"},
		{"resolve with both decisions", with("resolve", "-tenant", "a", "-key", testKey, "-free", "-outcome", "1"), "-free and -outcome are exclusive"},
		{"resolve with bad JSON", with("resolve", "-tenant", "a", "-key", testKey, "-outcome", "{seat:12A}"), "-outcome is not one JSON value"},
		{"resolve with an empty outcome", with("resolve", "-tenant", "a", "-key", testKey, "-outcome", ""), "-outcome is not one JSON value"},
		{"show with a key that is not a key", with("show", "-tenant", "a", "-key", "k"), `-key "k" is not an idempotency key: a key is "v1:" (or "k1:") and 64 lower-case hex digits`},
		{"show with an upper-case key", with("show", "-tenant", "a", "-key", strings.ToUpper(testKey)), "is not an idempotency key"},
		{"resolve with bare words", with("resolve", "-tenant", "a", "-key", testKey, "-outcome", "seat 14C"), `a JSON string needs quotes: -outcome '"seat 14C"'`},
		{"resolve with a bare word", with("resolve", "-tenant", "a", "-key", testKey, "-outcome", "14C"), `a JSON string needs quotes: -outcome '"14C"'`},
		{"resolve with a long -by", with("resolve", "-tenant", "a", "-key", testKey, "-free", "-by", strings.Repeat("x", 257)), "-by is 257 bytes; at most 256"},
		{"resolve with two JSON values", with("resolve", "-tenant", "a", "-key", testKey, "-outcome", "1 2"), "-outcome is not one JSON value"},
		{"decide without a decision", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops"), "one of -outcome JSON (the effect happened), -free (it did not), -retry"},
		{"decide with two decisions", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-fail"), "-free and -fail are exclusive"},
		{"decide without -by", with("decide", "-tenant", "a", "-key", testKey, "-free"), "-by is required"},
		{"decide with a bare word", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-outcome", "14C"), `a JSON string needs quotes: -outcome '"14C"'`},
		{"decide with a key that is not a key", with("decide", "-tenant", "a", "-key", "k", "-by", "ops", "-free"), "is not an idempotency key"},
		{"decide -run-id without -workflow-id", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-run-id", "r"), "-run-id needs -workflow-id"},
		{"decide with a certificate and no key", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-tls-cert-path", "/nonexistent.pem"), "the client certificate and its key go together"},
		{"decide with a missing certificate", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-tls-cert-path", "/nonexistent.pem", "-tls-key-path", "/nonexistent.key"), "failed loading client cert/key path: open /nonexistent.pem"},
		{"decide with a missing CA", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-tls-ca-path", "/nonexistent-ca.pem"), "the server CA certificate: open /nonexistent-ca.pem"},
		{"decide with -tls=false and an API key", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-tls=false", "-api-key", "k"), "-tls=false contradicts"},
		{"decide with an empty namespace", with("decide", "-tenant", "a", "-key", testKey, "-by", "ops", "-free", "-namespace", ""), "-namespace is empty"},
		{"list without a tenant", with("list"), "list: -tenant is required (or -all-tenants, to list every tenant)"},
		{"list with a tenant and every tenant", with("list", "-tenant", "a", "-all-tenants"), "-tenant and -all-tenants are exclusive"},
		{"list with an unknown state", with("list", "-tenant", "a", "-state", "indeterminate,stuck"), `-state stuck: want pending, indeterminate, completed or all`},
		{"list with a zero limit", with("list", "-tenant", "a", "-limit", "0"), "-limit must be between 1 and 1000, got 0"},
		{"list with a huge limit", with("list", "-tenant", "a", "-limit", "5000"), "-limit must be between 1 and 1000"},
		{"list with a negative age", with("list", "-tenant", "a", "-older-than", "-1h"), "-older-than must not be negative"},
		{"list with -json and -keys", with("list", "-tenant", "a", "-json", "-keys"), "-json and -keys are exclusive"},
		{"list with a bad cursor", with("list", "-tenant", "a", "-cursor", "xyz"), "-cursor: not a listing cursor; use the cursor the previous page printed"},
		{"resolve with a long -reason", with("resolve", "-tenant", "a", "-key", testKey, "-free", "-reason", strings.Repeat("x", 1025)), "-reason is 1025 bytes; at most 1024"},
		{"forget without tenant", with("forget", "-yes"), "forget: -tenant is required"},
		{"forget without -yes", with("forget", "-tenant", "acme"), "without -yes"},
		{"sweep with a negative limit", with("sweep", "-limit", "-1"), "-limit must be positive"},
		{"bad postgres schema name", []string{"-store", "postgres", "-postgres-url", "postgres://127.0.0.1:1/x", "-schema", "a-b", "sweep"}, "-schema/-table"},
		{"bad redis prefix", []string{"-store", "redis", "-redis-addr", "127.0.0.1:1", "-prefix", "a*", "sweep"}, "-prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			open := noOpen(t)
			if strings.HasPrefix(tt.name, "bad ") {
				// Store options are checked by the stores' constructors,
				// which contact nothing.
				open = openBackend
			}
			r := invoke(t, nil, open, tt.args...)
			assert.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			requireOneErrorLine(t, r, tt.want)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"global", []string{"-h"}, []string{"Usage: idempotencyctl -store postgres|redis", "-postgres-url", "resolve", "Exit status"}},
		{"help command", []string{"help"}, []string{"Commands:", "sweep"}},
		{"schema", []string{"schema", "-h"}, []string{"idempotencyctl [store flags] schema"}},
		{"show", []string{"show", "-h"}, []string{"show -tenant T -key K [-json]", "-json"}},
		{"resolve", []string{"-store", "redis", "resolve", "-help"}, []string{"(-outcome JSON | -free -yes)", "-dry-run", `{"seat":"12A"}`, "-by", "-reason", "-reference", "stale"}},
		{"list", []string{"list", "-h"}, []string{"(-tenant T | -all-tenants)", "-stale", "-older-than", "-oldest", "-cursor", "-all-tenants", "(default 100)"}},
		{"decide", []string{"decide", "-h"}, []string{"(-outcome JSON | -free -yes | -retry | -fail) -by WHO", "$TEMPORAL_ADDRESS", "$TEMPORAL_NAMESPACE", "$TEMPORAL_API_KEY",
			"$TEMPORAL_TLS)", "$TEMPORAL_TLS_CLIENT_CERT_PATH", "$TEMPORAL_TLS_CLIENT_KEY_PATH", "$TEMPORAL_TLS_SERVER_CA_CERT_PATH", "$TEMPORAL_TLS_SERVER_NAME",
			"-profile", "$TEMPORAL_PROFILE", "-config-file", "$TEMPORAL_CONFIG_FILE", "$TEMPORAL_TLS_CERT, $TEMPORAL_TLS_KEY and $TEMPORAL_TLS_CA", "-workflow-id", "-reference"}},
		{"forget", []string{"forget", "-h"}, []string{"forget -tenant T -yes [-force]", "cannot be undone", "a second time"}},
		{"sweep", []string{"sweep", "-h"}, []string{"sweep [-limit N]", "(default 1000)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invoke(t, nil, noOpen(t), tt.args...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stderr)
			for _, w := range tt.want {
				assert.Contains(t, r.stdout, w)
			}
		})
	}
}

func TestHelpNeverPrintsTheEnvironment(t *testing.T) {
	t.Parallel()
	const secret = "postgres://ops:s3cret@db.internal/prod"
	r := invoke(t, map[string]string{envPostgresURL: secret}, noOpen(t), "-h")
	require.Equal(t, exitOK, r.code)
	assert.NotContains(t, r.stdout, "s3cret")
	r = invoke(t, map[string]string{"TEMPORAL_API_KEY": "s3cret-key", "TEMPORAL_ADDRESS": "s3cret.internal:7233"}, noOpen(t), "decide", "-h")
	require.Equal(t, exitOK, r.code)
	assert.NotContains(t, r.stdout, "s3cret")
}

func TestEnvironmentFillsUnsetFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		envStore:       "postgres",
		envPostgresURL: "postgres://from-env/db",
		envRedisAddr:   "redis-from-env:6379",
	}
	tests := []struct {
		name string
		args []string
		want config
	}{
		{"all from the environment", nil, config{store: "postgres", postgresURL: "postgres://from-env/db", redisAddr: "redis-from-env:6379"}},
		{"flags win", []string{"-store", "redis", "-redis-addr", "flag:6379", "-prefix", "p", "-timeout", "3s"},
			config{store: "redis", postgresURL: "postgres://from-env/db", redisAddr: "flag:6379", prefix: "p", timeout: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got config
			open := func(_ context.Context, cfg config) (*backend, error) {
				got = cfg
				return nil, errors.New("stop here")
			}
			r := invoke(t, env, open, append(tt.args, "sweep")...)
			require.Equal(t, exitFailed, r.code)
			requireOneErrorLine(t, r, "stop here")
			assert.Equal(t, tt.want.store, got.store)
			assert.Equal(t, tt.want.postgresURL, got.postgresURL)
			assert.Equal(t, tt.want.redisAddr, got.redisAddr)
			if tt.want.prefix != "" {
				assert.Equal(t, tt.want.prefix, got.prefix)
			}
			if tt.want.timeout != 0 {
				assert.Equal(t, tt.want.timeout, got.timeout)
			}
		})
	}
}

func TestUnreachableStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"postgres", []string{"-store", "postgres", "-postgres-url", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"}},
		{"redis", []string{"-store", "redis", "-redis-addr", "127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invokeReal(t, append(tt.args, "-timeout", "5s", "show", "-tenant", "acme", "-key", testKey)...)
			assert.Equal(t, exitFailed, r.code)
			assert.Empty(t, r.stdout)
			requireOneErrorLine(t, r, store.ErrUnavailable.Error())
		})
	}
}

// TestUnreachableRedisPrintsOneLine runs the built command, as a person
// would, against a Redis that does not answer: go-redis's own logging of
// failed dials must not reach the terminal, only the command's one line.
func TestUnreachableRedisPrintsOneLine(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	// The client gives up on the refused address after about 3 s of its
	// own retries; -timeout must outlast them, or the command reports the
	// deadline instead (it did, at 3s, on a loaded machine).
	cmd := exec.Command(bin, "-store", "redis", "-redis-addr", "127.0.0.1:1", "-timeout", "60s",
		"show", "-tenant", "acme", "-key", testKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, exitFailed, exit.ExitCode())
	assert.Empty(t, stdout.String())
	requireOneErrorLine(t, result{stderr: stderr.String()}, store.ErrUnavailable.Error())
}

// fixture is a store the tests seed and check, and the same store handed to
// the command.
type fixture struct {
	// global are the store flags the command is given; the store itself is
	// injected.
	global []string
	st     store.Store
	b      *backend
	// withClock returns a store on the same records that reads time from
	// clock.
	withClock func(t *testing.T, clock store.Clock) store.Store
}

// run runs the command on the fixture's store.
func (f fixture) run(t *testing.T, args ...string) result {
	t.Helper()
	open := func(context.Context, config) (*backend, error) { return f.b, nil }
	return invoke(t, nil, open, append(append([]string{}, f.global...), args...)...)
}

func postgresFixture(t *testing.T) fixture {
	pool, schema := pgenv.Postgres(t)
	newStore := func(t *testing.T, clock store.Clock) *pgstore.Store {
		st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Clock: clock})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	st := newStore(t, nil)
	require.NoError(t, st.EnsureSchema(context.Background()))
	return fixture{
		global:    []string{"-store", "postgres", "-postgres-url", "injected"},
		st:        st,
		b:         &backend{Store: st, ensureSchema: st.EnsureSchema, where: "PostgreSQL table " + schema + ".idempotency_records"},
		withClock: func(t *testing.T, c store.Clock) store.Store { return newStore(t, c) },
	}
}

func redisFixture(t *testing.T) fixture {
	client, prefix := redisenv.Redis(t)
	newStore := func(t *testing.T, clock store.Clock) *redisstore.Store {
		st, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	st := newStore(t, nil)
	return fixture{
		global:    []string{"-store", "redis", "-redis-addr", "injected"},
		st:        st,
		b:         redisBackend(st, "Redis prefix "+prefix, nil),
		withClock: func(t *testing.T, c store.Clock) store.Store { return newStore(t, c) },
	}
}

var fixtures = []struct {
	name string
	make func(t *testing.T) fixture
}{
	{"postgres", postgresFixture},
	{"redis", redisFixture},
}

// testOrigin is the execution the origin tests claim from.
var testOrigin = store.Origin{WorkflowID: "booking-42", RunID: "4b1f0c9e-run", ActivityType: "BookSeat", ActivityID: "5", Attempt: 3}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// claim takes a fresh key of tenant and returns its token.
func claim(t *testing.T, st store.Store, tenant, key string) int64 {
	t.Helper()
	res, err := st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: key, Holder: "test-holder", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return res.Record.Token
}

// seedIndeterminate leaves an indeterminate record under key, as the
// dispatcher does when an effect's outcome is unknown.
func seedIndeterminate(t *testing.T, st store.Store, tenant, key, reason string) {
	t.Helper()
	token := claim(t, st, tenant, key)
	require.NoError(t, st.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{
		Tenant: tenant, Key: key, Token: token, Reason: reason,
	}))
}

// seedStale leaves a pending record under testKey whose holder's lease ran
// out an hour ago, as a worker that died with the store down leaves it, and
// returns its token.
func seedStale(t *testing.T, f fixture, tenant string) int64 {
	t.Helper()
	past := f.withClock(t, fixedClock(time.Now().Add(-time.Hour)))
	res, err := past.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "dead-worker", Lease: time.Minute, Origin: testOrigin})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status)
	return res.Record.Token
}

// seedCompleted leaves a completed record with outcome under key.
func seedCompleted(t *testing.T, st store.Store, tenant, key string, outcome []byte) {
	t.Helper()
	token := claim(t, st, tenant, key)
	require.NoError(t, st.Complete(context.Background(), store.CompleteParams{
		Tenant: tenant, Key: key, Token: token, Outcome: outcome,
	}))
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := interceptor.EncodeOutcome(nil, v)
	require.NoError(t, err)
	return b
}

func lookupState(t *testing.T, st store.Store, tenant, key string) (store.State, error) {
	t.Helper()
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: key})
	return rec.State, err
}

func TestStores(t *testing.T) {
	t.Parallel()
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			f := fx.make(t)
			for _, tc := range storeCases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, f, testenv.UniqueName("tenant"))
				})
			}
		})
	}
}

var storeCases = []struct {
	name string
	run  func(t *testing.T, f fixture, tenant string)
}{
	{"show on a missing key", func(t *testing.T, f fixture, tenant string) {
		r := f.run(t, "show", "-tenant", tenant, "-key", absentKey)
		assert.Equal(t, exitFailed, r.code)
		assert.Empty(t, r.stdout)
		requireOneErrorLine(t, r, "no record")
	}},
	{"show an indeterminate record", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "charge timed out")
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Empty(t, r.stderr)
		for _, want := range []string{
			"tenant       " + tenant + "\n",
			"key          " + testKey + "\n",
			"state        indeterminate\n",
			"holder       test-holder\n",
			"reason       charge timed out\n",
			"outcome      (none)\n",
			"expires_at   never (kept until a person decides)\n",
		} {
			assert.Contains(t, r.stdout, want)
		}
		for _, field := range []string{"token", "lease_until", "expires_at", "created_at", "updated_at"} {
			assert.Contains(t, r.stdout, "\n"+field+" ")
		}
	}},
	{"show a recorded definite failure", func(t *testing.T, f fixture, tenant string) {
		b, err := interceptor.EncodeFailure(nil, temporal.NewNonRetryableApplicationError("card declined", "CardDeclined", nil))
		require.NoError(t, err)
		seedCompleted(t, f.st, tenant, testKey, b)
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "outcome      failed: card declined (type CardDeclined) (a definite failure, ")
	}},
	{"show names the execution that made the record", func(t *testing.T, f fixture, tenant string) {
		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "test-holder", Lease: time.Minute, Origin: testOrigin})
		require.NoError(t, err)
		require.NoError(t, f.st.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: tenant, Key: testKey, Token: res.Record.Token, Reason: "timed out"}))

		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		for _, want := range []string{
			"workflow_id  booking-42\n",
			"run_id       4b1f0c9e-run\n",
			"activity     BookSeat\n",
			"activity_id  5\n",
			"attempt      3\n",
		} {
			assert.Contains(t, r.stdout, want)
		}

		r = f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got recordJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		assert.Equal(t, testOrigin, store.Origin{WorkflowID: got.WorkflowID, RunID: got.RunID, ActivityType: got.ActivityType, ActivityID: got.ActivityID, Attempt: got.Attempt})
	}},
	{"show a record without an origin", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "")
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		for _, field := range []string{"workflow_id", "run_id", "activity", "activity_id", "attempt"} {
			assert.Contains(t, r.stdout, "\n"+field+strings.Repeat(" ", 13-len(field))+"-\n")
		}
		r = f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		assert.Equal(t, "", got["workflow_id"])
		assert.Equal(t, float64(0), got["attempt"])
	}},
	{"show the retention and the check a record keeps", func(t *testing.T, f fixture, tenant string) {
		const check = "c1:a3515ec52eab311b:c9265cd8bd7a76c50211580b050c6c618ef94ca07b7d8dcf76e86dffc6b48009"
		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "test-holder",
			Lease: time.Minute, Check: check, Retention: 72 * time.Hour})
		require.NoError(t, err)
		require.NoError(t, f.st.Complete(context.Background(), store.CompleteParams{Tenant: tenant, Key: testKey, Token: res.Record.Token}))
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "retention    72h0m0s (the activity's own)\n")
		assert.Contains(t, r.stdout, "checked      yes, digest "+check+"\n")
		r = f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		assert.Equal(t, float64(72*3600), got["retention_seconds"])
		assert.Equal(t, check, got["check"])

		other := testKey[:len(testKey)-1] + "0"
		seedCompleted(t, f.st, tenant, other, nil)
		r = f.run(t, "show", "-tenant", tenant, "-key", other)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "retention    the store's\n")
		assert.Contains(t, r.stdout, "checked      no (no digest of checked arguments kept)\n")
	}},
	{"show quotes text that could break a line", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "line one\nline two \x1b[31m")
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, `reason       "line one\nline two \x1b[31m"`+"\n")
	}},
	{"show -json a completed record", func(t *testing.T, f fixture, tenant string) {
		// 2^63-1 does not survive a float64: it must come back as recorded.
		seedCompleted(t, f.st, tenant, testKey, encode(t, map[string]any{"seat": "12A", "order": int64(9223372036854775807)}))
		r := f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, 1, strings.Count(r.stdout, "\n"), "one JSON object on one line")
		var got map[string]any
		d := json.NewDecoder(strings.NewReader(r.stdout))
		d.UseNumber()
		require.NoError(t, d.Decode(&got))
		assert.Equal(t, tenant, got["tenant"])
		assert.Equal(t, testKey, got["key"])
		assert.Equal(t, "completed", got["state"])
		assert.Equal(t, "test-holder", got["holder"])
		assert.Equal(t, true, got["outcome_decoded"])
		assert.Equal(t, "json/plain", got["outcome_encoding"])
		assert.Equal(t, map[string]any{"seat": "12A", "order": json.Number("9223372036854775807")}, got["outcome"])
		for _, field := range []string{"token", "lease_until", "expires_at", "created_at", "updated_at", "reason", "outcome_bytes"} {
			assert.Contains(t, got, field)
		}
		_, err := time.Parse(time.RFC3339Nano, got["expires_at"].(string))
		assert.NoError(t, err)
		// The token is a string: JSON readers that hold numbers as doubles
		// round a 64-bit integer.
		rec, err := f.st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: testKey})
		require.NoError(t, err)
		assert.Equal(t, strconv.FormatInt(rec.Token, 10), got["token"])
	}},
	{"show an outcome a payload codec wrote", func(t *testing.T, f fixture, tenant string) {
		enc, err := proto.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{{
			Metadata: map[string][]byte{"encoding": []byte("binary/encrypted")},
			Data:     []byte{0x8a, 0x01, 0x7f, 0x00, 0x33},
		}}})
		require.NoError(t, err)
		seedCompleted(t, f.st, tenant, testKey, enc)

		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "outcome      (encoded: ")
		assert.Contains(t, r.stdout, "encoding binary/encrypted;")

		r = f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got recordJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		assert.False(t, got.OutcomeDecoded)
		assert.Equal(t, "null", string(got.Outcome))
		assert.Equal(t, len(enc), got.OutcomeBytes)
		assert.Equal(t, "binary/encrypted", got.OutcomeEncoding)
	}},
	{"resolve -outcome records the outcome", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "book timed out")
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", `{"seat":"12A"}`)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Empty(t, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 2, "stdout: %s", r.stdout)
		assert.Equal(t, "record: tenant "+tenant+" key "+testKey+" is indeterminate (reason: book timed out)", lines[0])
		assert.Equal(t, `resolved: recorded the outcome {"seat":"12A"}; duplicates of the key will receive it`, lines[1])

		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "retry", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, res.Status)
		var got map[string]any
		require.NoError(t, interceptor.DecodeOutcome(nil, res.Record.Outcome, &got))
		assert.Equal(t, map[string]any{"seat": "12A"}, got)
	}},
	{"resolve -outcome keeps large numbers exact", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "")
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", "12345678901234567890")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		rec, err := f.st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: testKey})
		require.NoError(t, err)
		var got json.Number
		require.NoError(t, interceptor.DecodeOutcome(nil, rec.Outcome, &got))
		assert.Equal(t, json.Number("12345678901234567890"), got)
	}},
	{"resolve -free frees the key", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "charge timed out")
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-yes")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "is indeterminate (reason: charge timed out)\n")
		assert.Contains(t, r.stdout, "resolved: freed the key; the next attempt may run the effect\n")

		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "retry", Lease: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, store.StatusAcquired, res.Status)
	}},
	{"resolve -dry-run changes nothing", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "charge timed out")
		for _, decision := range [][]string{{"-free"}, {"-outcome", `"12A"`}} {
			args := append([]string{"resolve", "-tenant", tenant, "-key", testKey, "-dry-run"}, decision...)
			r := f.run(t, args...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stdout, "dry run: would ")
			assert.NotContains(t, r.stdout, "resolved:")
			state, err := lookupState(t, f.st, tenant, testKey)
			require.NoError(t, err)
			assert.Equal(t, store.StateIndeterminate, state)
		}
	}},
	{"resolve a completed record", func(t *testing.T, f fixture, tenant string) {
		seedCompleted(t, f.st, tenant, testKey, encode(t, "12A"))
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-yes")
		assert.Equal(t, exitFailed, r.code)
		assert.Equal(t, "record: tenant "+tenant+" key "+testKey+" is completed\n", r.stdout)
		requireOneErrorLine(t, r, "resolve: the record is completed, not indeterminate: nothing to resolve")
		state, err := lookupState(t, f.st, tenant, testKey)
		require.NoError(t, err)
		assert.Equal(t, store.StateCompleted, state)
	}},
	{"resolve a pending record whose holder is within its lease", func(t *testing.T, f fixture, tenant string) {
		token := claim(t, f.st, tenant, testKey)
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", "1", "-by", "ops")
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "the record is pending and its holder test-holder holds a lease until ")
		assert.Contains(t, r.stderr, "a pending record is resolved only once its lease has run out")
		rec, err := f.st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: testKey})
		require.NoError(t, err)
		assert.Equal(t, store.StatePending, rec.State)
		assert.Equal(t, token, rec.Token, "the live holder keeps its claim")
	}},
	{"resolve -outcome settles a stale pending record", func(t *testing.T, f fixture, tenant string) {
		token := seedStale(t, f, tenant)
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", `"12A"`, "-by", "ops@acme", "-reason", "the airline has the booking")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 3, "stdout: %s", r.stdout)
		assert.Equal(t, "record: tenant "+tenant+" key "+testKey+" is pending", lines[0])
		assert.True(t, strings.HasPrefix(lines[1], "stale: holder dead-worker (workflow booking-42, activity BookSeat, attempt 3) let its lease run out at "), lines[1])
		assert.True(t, strings.HasSuffix(lines[1], "; it is presumed gone"), lines[1])
		assert.Equal(t, `resolved by ops@acme (reason: the airline has the booking): settled the stale claim and recorded the outcome "12A"; duplicates of the key will receive it`, lines[2])

		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "retry", Lease: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, res.Status)
		assert.Equal(t, "dead-worker", res.Record.Holder, "settled in place: the record keeps its holder")
		assert.Equal(t, token, res.Record.Token, "and the token the decision was bound to")
		assert.Equal(t, testOrigin, res.Record.Origin, "and its origin")
		assert.Equal(t, "ops@acme", res.Record.Resolution.By, "the decision keeps its trail")
		assert.Equal(t, "the airline has the booking", res.Record.Resolution.Reason)
		assert.Equal(t, store.ActionComplete, res.Record.Resolution.Action)
		var got string
		require.NoError(t, interceptor.DecodeOutcome(nil, res.Record.Outcome, &got))
		assert.Equal(t, "12A", got)
		err = f.st.Complete(context.Background(), store.CompleteParams{Tenant: tenant, Key: testKey, Token: token, Outcome: encode(t, "late")})
		assert.ErrorIs(t, err, store.ErrNotHolder, "the holder, should it come back, is fenced off")
	}},
	{"resolve -free without -yes frees nothing", func(t *testing.T, f fixture, tenant string) {
		// As decide -free: a record resolve settles (indeterminate, or
		// stale: its holder gone) may hold an effect that landed, and
		// freeing it runs the effect again — two charges. The record
		// stays as it was.
		for _, seed := range []func() store.State{
			func() store.State {
				seedIndeterminate(t, f.st, tenant, testKey, "charge timed out")
				return store.StateIndeterminate
			},
			func() store.State { seedStale(t, f, tenant); return store.StatePending },
		} {
			want := seed()
			r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops")
			assert.Equal(t, exitFailed, r.code)
			requireOneErrorLine(t, r, "without -yes")
			assert.Contains(t, r.stderr, "two charges")
			state, err := lookupState(t, f.st, tenant, testKey)
			require.NoError(t, err)
			assert.Equal(t, want, state, "the record was changed")
			_, err = f.st.Forget(context.Background(), store.ForgetParams{Tenant: tenant})
			require.NoError(t, err)
		}
	}},
	{"resolve -free settles a stale pending record", func(t *testing.T, f fixture, tenant string) {
		seedStale(t, f, tenant)
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-yes")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "resolved: settled the stale claim and freed the key; the next attempt may run the effect\n")
		_, err := lookupState(t, f.st, tenant, testKey)
		assert.ErrorIs(t, err, store.ErrNotFound)
	}},
	{"resolve -dry-run leaves a stale pending record", func(t *testing.T, f fixture, tenant string) {
		token := seedStale(t, f, tenant)
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-dry-run")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "stale: holder dead-worker ")
		assert.Contains(t, r.stdout, "dry run: would settle the stale claim and free the key; nothing changed\n")
		rec, err := f.st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: testKey})
		require.NoError(t, err)
		assert.Equal(t, store.StatePending, rec.State)
		assert.Equal(t, token, rec.Token)
		assert.Equal(t, "dead-worker", rec.Holder)
	}},
	{"resolve a missing key", func(t *testing.T, f fixture, tenant string) {
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-free", "-yes")
		assert.Equal(t, exitFailed, r.code)
		assert.Empty(t, r.stdout)
		requireOneErrorLine(t, r, "no record")
	}},
	{"decide a record that does not name its workflow", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "timed out")
		r := f.run(t, "decide", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops")
		assert.Equal(t, exitFailed, r.code)
		assert.Contains(t, r.stdout, "is indeterminate (reason: timed out)\n")
		requireOneErrorLine(t, r, "the record does not name its workflow (it was written before records kept their origin): pass -workflow-id, or settle the record in the store with 'idempotencyctl resolve'")
	}},
	{"decide a record a standalone activity made", func(t *testing.T, f fixture, tenant string) {
		origin := store.Origin{ActivityType: "BookSeat", ActivityID: "book-ada-ba117", Attempt: 2}
		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "h", Lease: time.Minute, Origin: origin})
		require.NoError(t, err)
		require.NoError(t, f.st.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: tenant, Key: testKey, Token: res.Record.Token, Reason: "holder_lost"}))

		r := f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "workflow_id  - (no workflow: a standalone activity or a Nexus operation)\n")
		assert.Contains(t, r.stdout, "activity_id  book-ada-ba117\n")

		// Nothing waits: decide says so before reaching for Temporal.
		r = f.run(t, "decide", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops")
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "the record was made outside any workflow, by BookSeat book-ada-ba117 (a standalone activity's ID, or a Nexus operation's request ID): no workflow waits on the key; settle the record in the store with 'idempotencyctl resolve'")
		state, err := lookupState(t, f.st, tenant, testKey)
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, state)
	}},
	{"decide a pending record", func(t *testing.T, f fixture, tenant string) {
		claim(t, f.st, tenant, testKey)
		r := f.run(t, "decide", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops")
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "the record is pending: its holder may still be running")
	}},
	{"decide a missing key", func(t *testing.T, f fixture, tenant string) {
		r := f.run(t, "decide", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops")
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "no record")
	}},
	{"decide reaches Temporal where $TEMPORAL_ADDRESS says", func(t *testing.T, f fixture, tenant string) {
		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "h", Lease: time.Minute, Origin: testOrigin})
		require.NoError(t, err)
		require.NoError(t, f.st.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: tenant, Key: testKey, Token: res.Record.Token}))
		open := func(context.Context, config) (*backend, error) { return f.b, nil }
		env := map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_NAMESPACE": "ops-ns"}
		args := append(append([]string{"-timeout", "3s"}, f.global...), "decide", "-tenant", tenant, "-key", testKey, "-free", "-by", "ops", "-yes")
		r := invoke(t, env, open, args...)
		assert.Equal(t, exitFailed, r.code)
		requireOneErrorLine(t, r, "cannot reach Temporal at 127.0.0.1:1 (namespace ops-ns)")
		state, err := lookupState(t, f.st, tenant, testKey)
		require.NoError(t, err)
		assert.Equal(t, store.StateIndeterminate, state)
	}},
	{"list what waits for a person", func(t *testing.T, f fixture, tenant string) {
		const indKey = "v1:1111111111111111111111111111111111111111111111111111111111111111"
		const liveKey = "v1:2222222222222222222222222222222222222222222222222222222222222222"
		const doneKey = "v1:3333333333333333333333333333333333333333333333333333333333333333"
		seedStale(t, f, tenant)
		res, err := f.st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: indKey, Holder: "w", Lease: time.Minute, Origin: testOrigin})
		require.NoError(t, err)
		require.NoError(t, f.st.MarkIndeterminate(context.Background(), store.MarkIndeterminateParams{Tenant: tenant, Key: indKey, Token: res.Record.Token, Reason: "body_failed: gateway timeout"}))
		claim(t, f.st, tenant, liveKey)
		seedCompleted(t, f.st, tenant, doneKey, encode(t, "12A"))

		r := f.run(t, "list", "-tenant", tenant)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 4, "header, two records, count: %s", r.stdout)
		assert.Equal(t, []string{"TENANT", "KEY", "STATE", "AGE", "ACTIVITY", "WORKFLOW", "ID", "REASON", "DECIDED", "BY"}, strings.Fields(lines[0]))
		// Newest first: the indeterminate record was claimed now, the stale
		// one an hour ago.
		assert.Equal(t, []string{tenant, indKey, "indeterminate"}, strings.Fields(lines[1])[:3])
		assert.Contains(t, lines[1], "BookSeat")
		assert.Contains(t, lines[1], "booking-42")
		assert.Contains(t, lines[1], "body_failed: gateway timeout")
		assert.Equal(t, []string{tenant, testKey, "pending", "(stale)"}, strings.Fields(lines[2])[:4])
		assert.Contains(t, lines[2], " 1h00m ")
		assert.Equal(t, "2 records", lines[3])

		r = f.run(t, "list", "-tenant", tenant, "-oldest", "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got listJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		require.Len(t, got.Records, 2)
		assert.Equal(t, testKey, got.Records[0].Key, "oldest first")
		assert.Equal(t, "pending", got.Records[0].State)
		assert.Equal(t, "booking-42", got.Records[0].WorkflowID)
		assert.Equal(t, indKey, got.Records[1].Key)
		assert.Empty(t, got.Next)

		r = f.run(t, "list", "-tenant", tenant, "-keys")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, indKey+"\n"+testKey+"\n", r.stdout, "only the keys, newest first")

		r = f.run(t, "list", "-tenant", tenant, "-state", "completed")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, doneKey)
		assert.Contains(t, r.stdout, "\n1 record\n")

		r = f.run(t, "list", "-tenant", tenant, "-stale")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, testKey)
		assert.NotContains(t, r.stdout, liveKey)
		assert.NotContains(t, r.stdout, indKey)

		r = f.run(t, "list", "-tenant", tenant, "-state", "all", "-older-than", "30m")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, testKey)
		assert.Contains(t, r.stdout, "\n1 record\n", "only the record claimed an hour ago")
	}},
	{"an empty listing names the tenants that have waiting work", func(t *testing.T, f fixture, tenant string) {
		// The worker took its tenant from elsewhere than the starter: the
		// charge waits under another tenant than the one asked about.
		other := tenant + "-default"
		seedIndeterminate(t, f.st, other, testKey, "charge timed out")
		r := f.run(t, "list", "-tenant", tenant)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "nothing waits for a person in tenant "+tenant)
		assert.Contains(t, r.stdout, "other tenants have work waiting for a person: ")
		assert.Contains(t, r.stdout, other+" (1)")
		assert.Contains(t, r.stdout, "-all-tenants")
	}},
	{"list an empty backlog", func(t *testing.T, f fixture, tenant string) {
		claim(t, f.st, tenant, testKey) // live: nobody needs to look at it
		r := f.run(t, "list", "-tenant", tenant)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		// The answer names what it read: an empty answer from another
		// table must not pass for a quiet backlog.
		first, _, _ := strings.Cut(r.stdout, "\n")
		assert.Equal(t, "nothing waits for a person in tenant "+tenant+" of "+f.b.where+": no indeterminate records and no stale pending ones", first)
		assert.NotContains(t, r.stdout, tenant+" (", "the tenant asked about is not among the others")

		r = f.run(t, "list", "-tenant", tenant, "-state", "completed", "-older-than", "1h")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, "no records in tenant "+tenant+" of "+f.b.where+" match: state completed; older than 1h0m0s\n", r.stdout)

		r = f.run(t, "list", "-tenant", tenant, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, `{"records":[],"next":""}`+"\n", r.stdout)

		r = f.run(t, "list", "-tenant", tenant, "-keys")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Empty(t, r.stdout, "-keys prints nothing when nothing matches")
	}},
	{"list pages with -cursor", func(t *testing.T, f fixture, tenant string) {
		keys := []string{
			"v1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			"v1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
			"v1:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
		}
		for _, k := range keys {
			seedIndeterminate(t, f.st, tenant, k, "")
		}
		seen := map[string]bool{}
		args := []string{"list", "-tenant", tenant, "-limit", "2", "-oldest"}
		for page := 0; ; page++ {
			require.Less(t, page, 3, "the listing ends")
			r := f.run(t, args...)
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			for _, k := range keys {
				if strings.Contains(r.stdout, k) {
					assert.False(t, seen[k], "listed once: %s", k)
					seen[k] = true
				}
			}
			_, next, more := strings.Cut(r.stdout, "; more: run again with -cursor ")
			if !more {
				break
			}
			args = []string{"list", "-tenant", tenant, "-limit", "2", "-oldest", "-cursor", strings.TrimSpace(next)}
		}
		assert.Len(t, seen, 3)

		r := f.run(t, "list", "-tenant", tenant+"_other", "-cursor", strings.TrimPrefix(args[len(args)-1], ""))
		assert.Equal(t, exitUsage, r.code, "a cursor of another tenant: stdout %s", r.stdout)
		requireOneErrorLine(t, r, "-cursor: ")
	}},
	{"resolve keeps who decided, why and the evidence", func(t *testing.T, f fixture, tenant string) {
		seedIndeterminate(t, f.st, tenant, testKey, "timed out")
		r := f.run(t, "resolve", "-tenant", tenant, "-key", testKey, "-outcome", `"12A"`, "-by", "ops@acme", "-reason", "airline confirmed", "-reference", "TICKET-7")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		rec, err := f.st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: testKey})
		require.NoError(t, err)
		assert.Equal(t, store.Resolution{Action: store.ActionComplete, By: "ops@acme", Reason: "airline confirmed", Reference: "TICKET-7", At: rec.Resolution.At}, rec.Resolution)
		assert.False(t, rec.Resolution.At.IsZero())

		r = f.run(t, "show", "-tenant", tenant, "-key", testKey)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "decided      complete by ops@acme at ")
		assert.Contains(t, r.stdout, "; reason: airline confirmed; reference: TICKET-7\n")

		r = f.run(t, "show", "-tenant", tenant, "-key", testKey, "-json")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		var got recordJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
		require.NotNil(t, got.Resolution)
		assert.Equal(t, "complete", got.Resolution.Action)
		assert.Equal(t, "ops@acme", got.Resolution.By)
		assert.Equal(t, "TICKET-7", got.Resolution.Reference)

		r = f.run(t, "list", "-tenant", tenant, "-state", "completed")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Contains(t, r.stdout, "airline confirmed")
		assert.Contains(t, r.stdout, "ops@acme")
	}},
	{"forget", func(t *testing.T, f fixture, tenant string) {
		other := tenant + "_other"
		keys := []string{"a", "b", "c"}
		for _, k := range keys {
			seedCompleted(t, f.st, tenant, k, encode(t, k))
		}
		seedIndeterminate(t, f.st, other, "a", "kept")

		r := f.run(t, "forget", "-tenant", tenant)
		assert.Equal(t, exitUsage, r.code)
		requireOneErrorLine(t, r, "without -yes")
		for _, k := range keys {
			_, err := lookupState(t, f.st, tenant, k)
			require.NoError(t, err, "forget without -yes must erase nothing")
		}

		r = f.run(t, "forget", "-tenant", tenant, "-yes")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, "erased 3 records of tenant "+tenant+"\n", r.stdout)
		for _, k := range keys {
			_, err := lookupState(t, f.st, tenant, k)
			assert.ErrorIs(t, err, store.ErrNotFound)
		}
		state, err := lookupState(t, f.st, other, "a")
		require.NoError(t, err, "another tenant's records are not erased")
		assert.Equal(t, store.StateIndeterminate, state)
	}},
	{"forget refuses while records are held or indeterminate", func(t *testing.T, f fixture, tenant string) {
		seedCompleted(t, f.st, tenant, "done", encode(t, "done"))
		claim(t, f.st, tenant, "running")
		seedIndeterminate(t, f.st, tenant, "waiting", "charge timed out")

		r := f.run(t, "forget", "-tenant", tenant, "-yes")
		assert.Equal(t, exitFailed, r.code, "stdout: %s", r.stdout)
		requireOneErrorLine(t, r, "refusing to erase tenant "+tenant+": 2 records are held or waiting for a decision")
		assert.Contains(t, r.stderr, "running (pending)")
		assert.Contains(t, r.stderr, "waiting (indeterminate)")
		assert.Contains(t, r.stderr, "-force")
		for _, k := range []string{"done", "running", "waiting"} {
			_, err := lookupState(t, f.st, tenant, k)
			require.NoError(t, err, "a refused forget erased %s", k)
		}

		r = f.run(t, "forget", "-tenant", tenant, "-yes", "-force")
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, "erased 3 records of tenant "+tenant+"\n", r.stdout)
	}},
	{"schema", func(t *testing.T, f fixture, tenant string) {
		for range 2 {
			r := f.run(t, "schema")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			if f.b.ensureSchema == nil {
				// Every record here was written by this version: indexed.
				assert.Contains(t, r.stdout, "layout ready under Redis prefix ")
				assert.Contains(t, r.stdout, ": migrated 0 records of earlier layouts\n")
				continue
			}
			assert.Contains(t, r.stdout, "schema ready: ")
		}
		// The table works after a second EnsureSchema.
		seedIndeterminate(t, f.st, tenant, testKey, "")
	}},
}

func TestSweep(t *testing.T) {
	t.Parallel()
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			f := fx.make(t) // a namespace of its own: sweep is not tenant-scoped
			// Records written two retention windows ago are expired by now.
			past := f.withClock(t, fixedClock(time.Now().Add(-2*store.DefaultTTL)))
			tenant := testenv.UniqueName("tenant")
			for _, k := range []string{"a", "b", "c"} {
				seedCompleted(t, past, tenant, k, encode(t, k))
			}
			seedIndeterminate(t, f.st, tenant, "live", "still waiting")

			// A limit of 2 makes the sweep take more than one batch.
			r := f.run(t, "sweep", "-limit", "2")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stdout, "swept 3 expired records from ")

			state, err := lookupState(t, f.st, tenant, "live")
			require.NoError(t, err, "a live record is not swept")
			assert.Equal(t, store.StateIndeterminate, state)

			r = f.run(t, "sweep")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stdout, "swept 0 expired records from ")
		})
	}
}

// TestPostgresThroughFlags runs the command as an operator does: it opens
// its own pool from -postgres-url and -schema.
//
// With -portable it runs pgstore in its portable mode (no xmax, ctid,
// NOTIFY or advisory locks), as on a distributed PostgreSQL.
func TestPostgresThroughFlags(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name  string
		flags []string
		caps  *pgstore.Capabilities
	}{{"default", nil, nil}, {"portable", []string{"-portable"}, &pgstore.Capabilities{}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			postgresThroughFlags(t, mode.flags, mode.caps)
		})
	}
}

func postgresThroughFlags(t *testing.T, flags []string, caps *pgstore.Capabilities) {
	pool, schema := pgenv.Postgres(t)
	global := append([]string{"-store", "postgres", "-postgres-url", pgenv.PostgresURL(), "-schema", schema}, flags...)
	with := func(args ...string) []string { return append(append([]string{}, global...), args...) }

	r := invokeReal(t, with("show", "-tenant", "acme", "-key", testKey)...)
	assert.Equal(t, exitFailed, r.code)
	requireOneErrorLine(t, r, "'idempotencyctl schema' creates the table")

	for range 2 {
		r := invokeReal(t, with("schema")...)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, "schema ready: PostgreSQL table "+schema+".idempotency_records at "+testPostgresPlace(t)+" and its indexes exist\n", r.stdout)
	}
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()).Scan(&exists))
	require.True(t, exists, "schema must create the table")

	st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Capabilities: caps})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	const tenant = "acme"
	seedIndeterminate(t, st, tenant, testKey, "book timed out")

	r = invokeReal(t, with("show", "-tenant", tenant, "-key", testKey, "-json")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	var rec recordJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	assert.Equal(t, "indeterminate", rec.State)
	assert.Equal(t, "book timed out", rec.Reason)

	r = invokeReal(t, with("resolve", "-tenant", tenant, "-key", testKey, "-outcome", `{"seat":"12A"}`)...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	res, err := st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "retry", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, res.Status)
	var got map[string]any
	require.NoError(t, interceptor.DecodeOutcome(nil, res.Record.Outcome, &got))
	assert.Equal(t, map[string]any{"seat": "12A"}, got)

	r = invokeReal(t, with("list", "-tenant", tenant)...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "nothing waits for a person in tenant acme of PostgreSQL table "+schema+".idempotency_records at "+testPostgresPlace(t)+": no indeterminate records and no stale pending ones\n", r.stdout)

	r = invokeReal(t, with("forget", "-tenant", tenant, "-yes")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "erased 1 record of tenant acme\n", r.stdout)
}

// TestRedisThroughFlags runs the command as an operator does: it opens its
// own client from -redis-addr and -prefix.
func TestRedisThroughFlags(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	global := []string{"-store", "redis", "-redis-addr", redisenv.RedisAddr(), "-prefix", prefix}
	with := func(args ...string) []string { return append(append([]string{}, global...), args...) }

	st, err := redisstore.New(client, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const tenant = "acme"
	seedIndeterminate(t, st, tenant, testKey, "charge timed out")

	r := invokeReal(t, with("show", "-tenant", tenant, "-key", testKey)...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "state        indeterminate\n")

	r = invokeReal(t, with("list", "-tenant", tenant)...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, testKey)
	assert.Contains(t, r.stdout, "charge timed out")

	r = invokeReal(t, with("resolve", "-tenant", tenant, "-key", testKey, "-free", "-yes")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	res, err := st.Claim(context.Background(), store.ClaimParams{Tenant: tenant, Key: testKey, Holder: "retry", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status)

	r = invokeReal(t, with("sweep")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "swept 0 expired records from Redis prefix \""+prefix+"\" at "+redisenv.RedisAddr()+"\n", r.stdout)

	r = invokeReal(t, with("schema")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "layout ready under Redis prefix \""+prefix+"\" at "+redisenv.RedisAddr()+": migrated 0 records of earlier layouts\n", r.stdout)

	// A record hash as the previous layout kept it (redisstore's own tests
	// write them with the previous scripts): schema converts it.
	now := time.Now().UnixMicro()
	old := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}:r:old"
	require.NoError(t, client.HSet(context.Background(), old, "state", "completed", "holder", "h", "token", "7",
		"lease", now, "exp", now+int64(time.Hour/time.Microsecond), "created", now, "updated", now, "outcome", "x").Err())
	require.NoError(t, client.Expire(context.Background(), old, 2*time.Hour).Err())
	r = invokeReal(t, with("schema")...)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "layout ready under Redis prefix \""+prefix+"\" at "+redisenv.RedisAddr()+": migrated 1 record of earlier layouts\n", r.stdout)
	typ, err := client.Type(context.Background(), old).Result()
	require.NoError(t, err)
	assert.Equal(t, "string", typ)
	rec, err := st.Lookup(context.Background(), store.LookupParams{Tenant: tenant, Key: "old"})
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), rec.Outcome)
}

// list -all-tenants reads every tenant of the store (a namespace of its
// own here, since other tests' tenants share theirs).
func TestListAcrossTenants(t *testing.T) {
	t.Parallel()
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			f := fx.make(t)
			seedIndeterminate(t, f.st, "acme", testKey, "a")
			seedIndeterminate(t, f.st, "globex", testKey, "g")
			seedCompleted(t, f.st, "initech", testKey, encode(t, 1))

			r := f.run(t, "list", "-all-tenants", "-oldest")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			require.Len(t, lines, 4, "stdout: %s", r.stdout)
			assert.Equal(t, "acme", strings.Fields(lines[1])[0])
			assert.Equal(t, "globex", strings.Fields(lines[2])[0])
			assert.Equal(t, "2 records", lines[3])

			r = f.run(t, "list", "-all-tenants", "-state", "completed", "-json")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			var got listJSON
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
			require.Len(t, got.Records, 1)
			assert.Equal(t, "initech", got.Records[0].Tenant)

			_, err := f.st.Forget(context.Background(), store.ForgetParams{Tenant: "acme"})
			require.NoError(t, err)
			_, err = f.st.Forget(context.Background(), store.ForgetParams{Tenant: "globex"})
			require.NoError(t, err)
			r = f.run(t, "list", "-all-tenants")
			require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
			assert.Equal(t, "nothing waits for a person in any tenant of "+f.b.where+": no indeterminate records and no stale pending ones\n", r.stdout)
		})
	}
}

// testPostgresPlace is the server and database of the tests' PostgreSQL, as
// the command names them.
func testPostgresPlace(t *testing.T) string {
	cfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	require.NoError(t, err)
	return postgresPlace(cfg)
}

// TestStoreSettings checks where the command looks when told nothing, told
// by the environment, and told by flags before or after the command: the
// examples take the same flags, variables and defaults.
func TestStoreSettings(t *testing.T) {
	t.Parallel()
	show := []string{"show", "-tenant", "a", "-key", testKey}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, append([]string{"-store", "postgres"}, show...),
			config{store: "postgres", postgresURL: defaultPostgresURL, schema: pgstore.DefaultSchema, table: pgstore.DefaultTable,
				redisAddr: defaultRedisAddr, prefix: redisstore.DefaultPrefix, timeout: defaultTimeout}},
		{"environment", map[string]string{envStore: "redis", envPostgresURL: "postgres://db:5432/x", envSchema: "s", envTable: "t", envRedisAddr: "r:6379", envPrefix: "p"},
			show,
			config{store: "redis", postgresURL: "postgres://db:5432/x", schema: "s", table: "t", redisAddr: "r:6379", prefix: "p", timeout: defaultTimeout}},
		{"flags before the command win over the environment", map[string]string{envTable: "t", envPrefix: "p"},
			append([]string{"-store", "postgres", "-table", "booking_records", "-prefix", "booking", "-timeout", "3s"}, show...),
			config{store: "postgres", postgresURL: defaultPostgresURL, schema: pgstore.DefaultSchema, table: "booking_records",
				redisAddr: defaultRedisAddr, prefix: "booking", timeout: 3 * time.Second}},
		{"flags after the command", map[string]string{envTable: "t"},
			append(append([]string{"-timeout", "3s"}, show...), "-store", "postgres", "-table", "booking_records", "-schema", "s"),
			config{store: "postgres", postgresURL: defaultPostgresURL, schema: "s", table: "booking_records",
				redisAddr: defaultRedisAddr, prefix: redisstore.DefaultPrefix, timeout: 3 * time.Second}},
		{"the same flag on both sides: the later wins", nil,
			append(append([]string{"-store", "postgres", "-table", "first"}, show...), "-table", "second"),
			config{store: "postgres", postgresURL: defaultPostgresURL, schema: pgstore.DefaultSchema, table: "second",
				redisAddr: defaultRedisAddr, prefix: redisstore.DefaultPrefix, timeout: defaultTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got config
			open := func(_ context.Context, cfg config) (*backend, error) {
				got = cfg
				return nil, errors.New("opened")
			}
			r := invoke(t, tt.env, open, tt.args...)
			require.Equal(t, exitFailed, r.code, "stderr: %s", r.stderr)
			requireOneErrorLine(t, r, "opened")
			assert.Equal(t, tt.want, got)
		})
	}
}
