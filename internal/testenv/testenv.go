// Package testenv is what every test that talks to a real service shares:
// the rule for a service that does not answer, unique names, and the
// environment. The services themselves are in its subpackages, one per
// client, so a test binary links only the client it uses: pgenv (a
// PostgreSQL pool in a schema of its own) and redisenv (a Redis client under
// a key prefix of its own). Packages run in parallel without seeing each
// other's data.
//
// Addresses come from the environment, with defaults for this machine:
//
//	IDEMPOTENCY_TEST_POSTGRES_URL  postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	IDEMPOTENCY_TEST_REDIS_ADDR    127.0.0.1:6379
//
// A test whose service does not answer fails, naming the service and how to
// start it (make services): a run never passes by skipping. Set
// IDEMPOTENCY_SKIP_MISSING_SERVICES=1 to skip those tests instead, on a
// machine without them; IDEMPOTENCY_REQUIRE_SERVICES=1 (as .ci/run sets
// it) fails them whatever the other says.
package testenv

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// RequireServicesEnv names the variable that keeps a missing service a
// failure even when SkipMissingServicesEnv is set (CI sets it).
const RequireServicesEnv = "IDEMPOTENCY_REQUIRE_SERVICES"

// SkipMissingServicesEnv names the variable that, set to 1, turns a missing
// service from a failure into a skip.
const SkipMissingServicesEnv = "IDEMPOTENCY_SKIP_MISSING_SERVICES"

// Unreachable fails the test for a service that did not answer, or skips it
// when SkipMissingServicesEnv is 1 and RequireServicesEnv is not.
func Unreachable(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv(SkipMissingServicesEnv) == "1" && os.Getenv(RequireServicesEnv) != "1" {
		t.Skipf("%s did not answer (skipped: %s=1): %v", service, SkipMissingServicesEnv, err)
		return
	}
	t.Fatalf("%s did not answer: %v; start it ('make services' starts PostgreSQL and Redis), or set %s=1 to skip the tests that need it",
		service, err, SkipMissingServicesEnv)
}

var seq atomic.Int64

// UniqueName returns a name no other test in any process is likely to use,
// made of lower-case letters, digits and underscores so it is a valid
// PostgreSQL identifier and a readable Redis prefix.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d_%d_%d", strings.ToLower(prefix), os.Getpid(), time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

// Getenv returns the environment variable name, or def when it is unset or
// empty.
func Getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// FreePort returns a loopback port nothing listens on, for a private
// server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
