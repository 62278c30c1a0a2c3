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
	server = temporaltest.NewServer()
	code := m.Run()
	removeCtlBinary()
	server.Stop()
	os.Exit(code)
}
