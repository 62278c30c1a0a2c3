package testenv

import (
	"errors"
	"fmt"
	"testing"
)

// outcome records what Unreachable did to a test.
type outcome struct {
	testing.TB
	failed, skipped string
}

func (o *outcome) Helper()                        {}
func (o *outcome) Fatalf(format string, a ...any) { o.failed = fmt.Sprintf(format, a...) }
func (o *outcome) Skipf(format string, a ...any)  { o.skipped = fmt.Sprintf(format, a...) }

// A service that does not answer fails the test unless skipping is asked
// for; CI's variable fails it whatever the other says. Before, it was
// skipped unless IDEMPOTENCY_REQUIRE_SERVICES=1: a run without the
// services passed by skipping.
func TestUnreachableFailsUnlessAskedToSkip(t *testing.T) {
	down := errors.New("connection refused")
	for _, tt := range []struct {
		name          string
		skip, require string
		skipped       bool
	}{
		{"by default", "", "", false},
		{"asked to skip", "1", "", true},
		{"asked to skip, required by CI", "1", "1", false},
		{"required", "", "1", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(SkipMissingServicesEnv, tt.skip)
			t.Setenv(RequireServicesEnv, tt.require)
			o := &outcome{}
			Unreachable(o, "PostgreSQL", down)
			if tt.skipped {
				if o.skipped == "" || o.failed != "" {
					t.Fatalf("not skipped: failed %q", o.failed)
				}
				return
			}
			if o.failed == "" {
				t.Fatalf("not failed: skipped %q", o.skipped)
			}
			for _, want := range []string{"PostgreSQL did not answer", "connection refused", "make services", SkipMissingServicesEnv + "=1"} {
				if !contains(o.failed, want) {
					t.Errorf("the failure %q does not say %q", o.failed, want)
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
