package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// translate turns an error from go-redis into the contract's errors, with op
// as context:
//   - the caller's own context ending returns the context's error;
//   - a closed client or pool, a connection that cannot be made or broke, a
//     timeout, and the server's "not now" replies (LOADING, MASTERDOWN,
//     CLUSTERDOWN, TRYAGAIN, READONLY during a failover, max clients,
//     NOREPLICAS, MOVED or ASK past the client's redirections) and
//     ErrNotReplicated match store.ErrUnavailable;
//   - anything else is wrapped as it is.
func translate(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	op = "redisstore: " + op
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", op, ctxErr)
	}
	if unavailable(err) {
		return store.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable reports whether err means Redis could not be reached or did not
// answer, as opposed to answering with an error.
func unavailable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, redis.ErrClosed),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		// A deadline that is not the caller's: go-redis's own timeouts.
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr):
		return true
	}
	return replicaUnavailable(err) ||
		redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) ||
		redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) ||
		redis.IsReadOnlyError(err) ||
		redis.IsMaxClientsError(err)
}

// timedOut reports whether err leaves it unknown whether a command reached
// the server and ran.
func timedOut(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}
