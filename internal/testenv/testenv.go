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
// A test whose service does not answer is skipped on a developer's machine.
// With IDEMPOTENCY_REQUIRE_SERVICES=1 (as .ci/run sets it) it fails instead:
// CI never passes by skipping.
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

// RequireServicesEnv names the variable that turns a missing service from a
// skip into a failure.
const RequireServicesEnv = "IDEMPOTENCY_REQUIRE_SERVICES"

// Unreachable skips the test, or fails it when services are required, for a
// service that did not answer.
func Unreachable(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv(RequireServicesEnv) == "1" {
		t.Fatalf("%s is required (%s=1) but did not answer: %v", service, RequireServicesEnv, err)
	}
	t.Skipf("%s did not answer (set %s=1 to fail instead): %v", service, RequireServicesEnv, err)
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
