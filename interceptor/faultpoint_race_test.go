//go:build race

package interceptor_test

import "time"

// Under the race detector every call is several times slower: fewer
// fault points run at once, and an attempt has longer before it times out,
// so timing changes no scenario's calls.
const (
	fpParallel       = 16
	fpAttemptTimeout = 8 * time.Second
)
