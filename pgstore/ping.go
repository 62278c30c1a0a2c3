package pgstore

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/tesserix/idempotency/store"
)

var _ store.Pinger = (*Store)(nil)

// Ping implements [store.Pinger]: a ping on a connection of the store's
// pool. Its error names the server the pool dials.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		cfg := s.pool.Config().ConnConfig
		return store.Unavailable(fmt.Sprintf("pgstore: PostgreSQL at %s does not answer",
			net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))), err)
	}
	return nil
}
