package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
)

// pgstore on a Citus cluster (-citus; make bench-citus starts a coordinator
// and two workers on loopback): the throughput section measures it beside
// the floor on the same cluster, and the per-activity section runs a worker
// recording in it.

// openCitus opens the pool on the Citus coordinator and the run's schema
// there.
func (e *benchEnv) openCitus(ctx context.Context, cfg config) error {
	pcfg, err := pgxpool.ParseConfig(cfg.Citus)
	if err != nil {
		return fmt.Errorf("-citus: %w", err)
	}
	pcfg.MaxConns = cfg.PoolConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return &servicesError{"citus", err}
	}
	schema := testenv.UniqueName("bench")
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		return &servicesError{"citus", err}
	}
	e.citus, e.citusSchema = pool, schema
	return nil
}

func (e *benchEnv) closeCitus(ctx context.Context) {
	if e.citus == nil {
		return
	}
	_, _ = e.citus.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.citusSchema}.Sanitize()+" CASCADE")
	e.citus.Close()
}

// onCitus is the run's environment with the Citus cluster in place of
// PostgreSQL: the designs written for PostgreSQL run there unchanged.
func (e *benchEnv) onCitus() *benchEnv {
	ce := *e
	ce.pool, ce.schema = e.citus, e.citusSchema
	return &ce
}

// citusStore is pgstore on the cluster as a user builds it there: with the
// capabilities DetectCapabilities answers (none, on Citus), its table
// made by EnsureSchema, which distributes it by tenant.
func citusStore(ctx context.Context, e *benchEnv, table string) (*pgstore.Store, error) {
	engine, caps, err := pgstore.DetectCapabilities(ctx, e.citus)
	if err != nil {
		return nil, err
	}
	if engine != pgstore.EngineCitus {
		return nil, fmt.Errorf("-citus: the server is %s, not Citus", engine)
	}
	s, err := pgstore.New(e.citus, pgstore.Options{Schema: e.citusSchema, Table: table, TTL: benchTTL, Capabilities: &caps})
	if err != nil {
		return nil, err
	}
	if err := s.EnsureSchema(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// citusGroup is the throughput section's group on Citus: the floor (on
// pgstore's table, which EnsureSchema distributed), pgstore in the mode
// DetectCapabilities picks, and the floor with the duplicate's read. Every
// key is in one tenant, so on one shard of one worker: a statement is
// planned on the coordinator and run on that worker. Call the returned
// function when done.
func citusGroup(ctx context.Context, e *benchEnv) (designGroup, func(), error) {
	ce := e.onCitus()
	floor, err := floorDesign(ctx, ce, "floor", false)
	if err != nil {
		return designGroup{}, nil, err
	}
	answering, err := answeringFloorDesign(ctx, ce, "floor_read", false)
	if err != nil {
		return designGroup{}, nil, err
	}
	s, err := citusStore(ctx, e, "lib")
	if err != nil {
		return designGroup{}, nil, err
	}
	return designGroup{"Citus (coordinator + 2 workers)", floor, []design{libraryDesign("pgstore", s), answering}}, s.Close, nil
}

// citusActivityWorker names the per-activity section's worker that records
// in pgstore on Citus.
const citusActivityWorker = "pgstore on Citus"
