package integration

import (
	"os"
	"testing"

	"go.temporal.io/server/temporaltest"
)

// server is one in-process Temporal server shared by every test in the
// package; each test works on a task queue of its own.
var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	if os.Getenv(txWorkerEnv) == "1" {
		// A worker process a test started (see txWorkerProcess).
		if err := txWorkerProcess(); err != nil {
			_, _ = os.Stderr.WriteString("transactional worker: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	server = temporaltest.NewServer()
	code := m.Run()
	removeCtlBinary()
	server.Stop()
	os.Exit(code)
}
