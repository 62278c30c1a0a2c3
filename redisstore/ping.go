package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

var _ store.Pinger = (*Store)(nil)

// Ping implements [store.Pinger]: a PING through the store's client. Its
// error names the address (or addresses) the client dials.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return store.Unavailable(fmt.Sprintf("redisstore: Redis at %s does not answer", addresses(s.client)), err)
	}
	return nil
}

// addresses names where the store's client dials.
func addresses(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		var addrs []string
		for name, addr := range c.Options().Addrs {
			addrs = append(addrs, name+"="+addr)
		}
		return strings.Join(addrs, ",")
	default:
		return fmt.Sprintf("(a %T)", client)
	}
}
