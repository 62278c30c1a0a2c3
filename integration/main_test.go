package integration

import (
	"os"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"
)

// server is one in-process Temporal server shared by every test in the
// package; each test works on a task queue of its own.
var server *temporaltest.TestServer

// clientMu serialises newClient: temporaltest's NewClientWithOptions
// appends to its server's list of clients without a lock, so parallel tests
// that each make a client race on it (go test -race reports it).
var clientMu sync.Mutex

// newClient returns a client of srv with opts. Every test makes its
// clients through it, never with srv.NewClientWithOptions directly.
func newClient(srv *temporaltest.TestServer, opts client.Options) client.Client {
	clientMu.Lock()
	defer clientMu.Unlock()
	return srv.NewClientWithOptions(opts)
}

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
