package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// quietRedis discards go-redis's own log lines ("failed to dial after 5
// attempts", printed once per pool attempt): the command reports the
// failure itself, on one line, through the error the store returns.
type quietRedis struct{}

// Printf discards the line.
func (quietRedis) Printf(context.Context, string, ...any) {}

// maxPostgresConns bounds the command's pool: it runs one statement at a
// time.
const maxPostgresConns = 2

// backend is an open store and what only some stores can do.
type backend struct {
	store.Store
	// ensureSchema creates the PostgreSQL table; nil for other stores.
	ensureSchema func(context.Context) error
	// migrate converts the Redis records of earlier layouts (redisstore's
	// Migrate, run to the end) and returns how many it converted; nil for
	// other stores.
	migrate func(context.Context) (int, error)
	// listEvery is a listing that trusts no index, for the guard of forget:
	// redisstore's ListByScan, which walks the tenant's record keys and
	// finds every record whatever the workers' options (a claim of
	// IndexOnlyWhatWaits in its first lease is in no index); nil where List
	// reads the records themselves (PostgreSQL).
	listEvery func(context.Context, store.ListParams) (store.Page, error)
	// where names the table or prefix, for messages.
	where string
	// release closes what the command opened; nil when it opened nothing.
	release func()
}

func (b *backend) close() {
	if b.release != nil {
		b.release()
	}
}

// openBackend opens the store cfg names. Neither store contacts its server
// here: the first operation does, under ctx.
func openBackend(ctx context.Context, cfg config) (*backend, error) {
	switch cfg.store {
	case storePostgres:
		pcfg, err := pgxpool.ParseConfig(cfg.postgresURL)
		if err != nil {
			// pgconn redacts the password from this error.
			return nil, usagef("-postgres-url: %v", err)
		}
		pcfg.MaxConns = maxPostgresConns
		pcfg.MinConns = 0
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, usagef("-postgres-url: %v", err)
		}
		opts := pgstore.Options{Schema: cfg.schema, Table: cfg.table}
		if cfg.portable {
			opts.Capabilities = &pgstore.Capabilities{}
		}
		st, err := pgstore.New(pool, opts)
		if err != nil {
			pool.Close()
			return nil, usagef("-schema/-table: %v", err)
		}
		o := st.Options()
		return &backend{
			Store:        st,
			ensureSchema: st.EnsureSchema,
			where:        fmt.Sprintf("PostgreSQL table %s.%s at %s", o.Schema, o.Table, postgresPlace(pcfg)),
			release: func() {
				st.Close()
				pool.Close()
			},
		}, nil
	case storeRedis:
		client := redis.NewClient(&redis.Options{Addr: cfg.redisAddr})
		st, err := redisstore.New(client, redisstore.Options{Prefix: cfg.prefix})
		if err != nil {
			_ = client.Close()
			return nil, usagef("-prefix: %v", err)
		}
		return redisBackend(st, fmt.Sprintf("Redis prefix %q at %s", cfg.prefix, cfg.redisAddr), func() {
			_ = st.Close()
			_ = client.Close()
		}), nil
	default:
		return nil, usagef("unknown store %q: want postgres or redis", cfg.store)
	}
}

// postgresPlace is the server and database of cfg, for messages: never the
// user or the password.
func postgresPlace(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	return fmt.Sprintf("%s/%s", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), cc.Database)
}

// redisBackend is the backend of st, a Redis store found at where, which
// release closes.
func redisBackend(st *redisstore.Store, where string, release func()) *backend {
	return &backend{Store: st, migrate: migrateRedis(st), listEvery: st.ListByScan, where: where, release: release}
}

// migrateRedis runs st's Migrate to the end.
func migrateRedis(st *redisstore.Store) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		res, err := st.Migrate(ctx, redisstore.MigrateParams{})
		return res.Migrated, err
	}
}
