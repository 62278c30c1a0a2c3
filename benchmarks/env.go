package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
)

// benchEnv holds the connections of one run and the private schema and key
// prefix it works in, so that it never touches another test's data.
type benchEnv struct {
	pool   *pgxpool.Pool
	schema string
	redis  *redis.Client
	prefix string
	// cluster is the Redis Cluster of -redis-cluster; nil without it.
	cluster *redis.ClusterClient
	// citus is a pool on the Citus coordinator of -citus, and citusSchema
	// the run's schema there; nil without it (citus.go).
	citus       *pgxpool.Pool
	citusSchema string
	// goals are the goals' measurements the sections recorded (goals.go).
	goals []goal
}

func openEnv(ctx context.Context, cfg config) (*benchEnv, error) {
	pcfg, err := pgxpool.ParseConfig(pgenv.PostgresURL())
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = cfg.PoolConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, &servicesError{"postgres", err}
	}
	e := &benchEnv{pool: pool, schema: testenv.UniqueName("bench"), prefix: testenv.UniqueName("bench")}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{e.schema}.Sanitize()); err != nil {
		pool.Close()
		return nil, &servicesError{"postgres", fmt.Errorf("%s: %w", pgenv.PostgresURL(), err)}
	}
	e.redis = redis.NewClient(&redis.Options{Addr: redisenv.RedisAddr(), PoolSize: 64})
	if err := e.redis.Ping(ctx).Err(); err != nil {
		e.close()
		return nil, &servicesError{"redis", fmt.Errorf("%s: %w", redisenv.RedisAddr(), err)}
	}
	if cfg.RedisCluster != "" {
		e.cluster = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cfg.RedisCluster, ","), PoolSize: 64})
		if err := e.cluster.Ping(ctx).Err(); err != nil {
			e.close()
			return nil, &servicesError{"redis cluster", fmt.Errorf("%s: %w", cfg.RedisCluster, err)}
		}
	}
	if cfg.Citus != "" {
		if err := e.openCitus(ctx, cfg); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// servicesError is a service that did not answer.
type servicesError struct {
	service string
	err     error
}

func (e *servicesError) Error() string { return e.service + ": " + e.err.Error() }
func (e *servicesError) Unwrap() error { return e.err }

// table returns the quoted name of a table in the run's schema.
func (e *benchEnv) table(name string) string {
	return pgx.Identifier{e.schema, name}.Sanitize()
}

func (e *benchEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE")
	e.pool.Close()
	if e.redis != nil {
		_ = deletePrefix(e.redis, e.prefix)
		_ = e.redis.Close()
	}
	e.closeCitus(ctx)
	if e.cluster != nil {
		_ = e.cluster.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
			return deletePrefixEach(node, e.prefix)
		})
		_ = e.cluster.Close()
	}
}

// deletePrefix unlinks every Redis key under prefix, a large SCAN page and
// one UNLINK per page at a time: the throughput benchmark leaves hundreds of
// thousands of keys, which redisenv.DeleteRedisPrefix (one UNLINK per key,
// for Clusters) takes minutes over. The keys also expire on their own
// (redisTTL) should this fail.
func deletePrefix(rc *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := rc.Scan(ctx, cursor, prefix+":*", 10_000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := rc.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// deletePrefixEach is deletePrefix for a Cluster master, whose keys of
// one page span slots: one UNLINK per key.
func deletePrefixEach(rc *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	iter := rc.Scan(ctx, 0, prefix+":*", 10_000).Iterator()
	for iter.Next(ctx) {
		_ = rc.Unlink(ctx, iter.Val()).Err()
	}
	return iter.Err()
}

// machine describes the machine the run is on.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s, %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// writeDoc replaces what stands between the markers "<!-- marker:begin -->"
// and "<!-- marker:end -->" of the markdown file at path with body; the
// prose around them is kept.
func writeDoc(path, marker, body string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	docBegin, docEnd := "<!-- "+marker+":begin -->", "<!-- "+marker+":end -->"
	i, j := bytes.Index(old, []byte(docBegin)), bytes.Index(old, []byte(docEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s markers", path, docBegin, docEnd)
	}
	var b bytes.Buffer
	b.Write(old[:i+len(docBegin)])
	b.WriteString("\n")
	b.WriteString(body)
	b.Write(old[j:])
	return os.WriteFile(path, b.Bytes(), 0o644)
}
