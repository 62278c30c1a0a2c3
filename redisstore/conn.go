package redisstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Plumbing: the client and the nodes behind it. A script's run, the
// masters a SCAN must visit, the one node a replica-acknowledged write
// talks to, and a record's read in either layout.

// nodeError is an error of the replica-acknowledged path, which talks to
// one node and follows no redirection: after a failover or a resharding
// (MOVED, ASK, a dead node) it lets the next claim find the slot's new
// owner.
func nodeError(ctx context.Context, client redis.UniversalClient, err error) error {
	if c, ok := client.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
	if movedOrAsk(err) {
		return fmt.Errorf("%w: %w", errSlotMoved, err)
	}
	return err
}

// readFields reads the record at key, in either layout, as its fields by
// name; nil when there is none.
func readFields(ctx context.Context, c redis.Cmdable, key string) (map[string]string, error) {
	v, err := c.Get(ctx, key).Result()
	switch {
	case err == redis.Nil:
		return nil, nil
	case isWrongType(err):
		m, err := c.HGetAll(ctx, key).Result()
		if err != nil || len(m) == 0 {
			return nil, err
		}
		return m, nil
	case err != nil:
		return nil, err
	}
	return unpack(v)
}

// nodeFor returns the client of the one node that owns key.
func nodeFor(ctx context.Context, client redis.UniversalClient, key string) (redis.Cmdable, error) {
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Ring:
		return c.GetShardClientForKey(key)
	default:
		return client, nil
	}
}

// refreshTopology asks a Cluster client to reload its slot map after an
// error that may mean a master died. go-redis reloads it on MOVED, but a
// dead master answers nothing, and the client would keep sending that
// slot's commands to it until ClusterStateReloadInterval (a minute by
// default) passes, long after its replica was promoted. The reload is lazy
// and coalesced by go-redis, so a burst of errors costs one.
func refreshTopology(ctx context.Context, client redis.UniversalClient, err error) {
	if err == nil || ctx.Err() != nil || !unavailable(err) {
		return
	}
	if c, ok := client.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// masters returns the nodes whose keyspaces together hold every key: each
// master of a Cluster, each shard of a Ring, or the client itself.
func masters(ctx context.Context, client redis.UniversalClient) ([]redis.Cmdable, error) {
	var (
		mu    sync.Mutex
		nodes []redis.Cmdable
	)
	collect := func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, c)
		return nil
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(ctx, collect); err != nil {
			return nil, err
		}
	case *redis.Ring:
		if err := c.ForEachShard(ctx, collect); err != nil {
			return nil, err
		}
	default:
		nodes = append(nodes, client)
	}
	return nodes, nil
}

// run runs script on c and, after an error that may mean a master died,
// has a Cluster client reload its slot map (refreshTopology).
func run(ctx context.Context, c redis.UniversalClient, script *redis.Script, keys []string, args ...any) (any, error) {
	v, err := script.Run(ctx, c, keys, args...).Result()
	refreshTopology(ctx, c, err)
	return v, err
}

// readAll reads the records at keys, in either layout, in one pipeline
// (and a second for record hashes of the previous layout): their fields by
// name, nil for a key that holds none. A malformed record is an error.
func readAll(ctx context.Context, client redis.Cmdable, keys []string) ([]map[string]string, error) {
	out := make([]map[string]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	pipe := client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	var hashes []int
	for i, g := range gets {
		v, err := g.Result()
		switch {
		case err == redis.Nil:
		case isWrongType(err):
			hashes = append(hashes, i)
		case err != nil:
			return nil, err
		default:
			m, err := unpack(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", keys[i], err)
			}
			out[i] = m
		}
	}
	if len(hashes) == 0 {
		return out, nil
	}
	pipe = client.Pipeline()
	hgets := make([]*redis.MapStringStringCmd, len(hashes))
	for j, i := range hashes {
		hgets[j] = pipe.HGetAll(ctx, keys[i])
	}
	_, _ = pipe.Exec(ctx)
	for j, i := range hashes {
		m, err := hgets[j].Result()
		if err != nil && err != redis.Nil && !isWrongType(err) {
			return nil, err
		}
		if len(m) > 0 {
			out[i] = m
		}
	}
	return out, nil
}
