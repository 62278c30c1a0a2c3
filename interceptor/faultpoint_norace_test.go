//go:build !race

package interceptor_test

import "time"

const (
	// fpParallel is how many fault points run at once, in the whole
	// package.
	fpParallel = 64
	// fpAttemptTimeout is each attempt's start-to-close timeout: a hanging
	// claim (which has no deadline but the activity's) ends with it.
	fpAttemptTimeout = 3 * time.Second
)
