package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/internal/testenv"
)

// TestSmoke runs every benchmark once at tiny sizes, so that the harness
// cannot rot between the runs of `make bench`. It checks that each section
// printed its table, not how fast anything was.
func TestSmoke(t *testing.T) {
	var out strings.Builder
	progress := io.Discard
	if testing.Verbose() {
		progress = testWriter{t}
	}
	err := run(context.Background(), smokeConfig(), &out, progress)
	var down *servicesError
	if errors.As(err, &down) {
		testenv.Unreachable(t, down.service, down.err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 1.", "## 2.", "## 3.", "## 4.", "## 5.", "## 6.", "| PostgreSQL | floor | 4 |", "| Redis | redisstore | 4 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(out.String())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
