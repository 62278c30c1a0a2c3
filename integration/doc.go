// Package integration holds the tests that run the library against a real
// Temporal server started in-process (go.temporal.io/server/temporaltest),
// with the memory, PostgreSQL and Redis stores. It is a module of its own so
// that the server's dependencies never reach the library's go.mod; it needs
// GOTOOLCHAIN=go1.27.3, which the Makefile exports.
package integration
