package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/store"
)

// List implements [store.Store.List] with one keyset query. The listings
// of records that wait (pending, stale or indeterminate) of a tenant read
// the partial index on (tenant, created_at, key) of the records that are
// not completed (see EnsureSchema), so they cost the page, not the tenant's
// completed records. A listing that keeps completed records reads the
// tenant's rows through the primary key and sorts them.
func (s *Store) List(ctx context.Context, p store.ListParams) (store.Page, error) {
	const op = "list"
	if err := begin(ctx, op, p); err != nil {
		return store.Page{}, err
	}
	return s.list(ctx, op, p, false)
}

// ListAcrossTenants implements [store.Store.ListAcrossTenants]. It is for
// operators, and no index gives its order (claim time across tenants): a
// listing of what waits (pending and indeterminate records) reads the whole
// of the partial index of the records that are not completed for each page
// and sorts what passes the filters, so its cost follows the backlog of
// every tenant, not the table, as CountBacklog's does; a listing that keeps
// completed records reads the table's live rows.
func (s *Store) ListAcrossTenants(ctx context.Context, p store.ListParams) (store.Page, error) {
	const op = "list across tenants"
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if err := p.ValidateAcrossTenants(); err != nil {
		return store.Page{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return s.list(ctx, op, p, true)
}

func (s *Store) list(ctx context.Context, op string, p store.ListParams, across bool) (store.Page, error) {
	limit := p.EffectiveLimit()
	var page store.Page
	err := retry(ctx, func(ctx context.Context) error {
		page = store.Page{}
		sql, args, err := s.listQuery(p, across, s.now(ctx))
		if err != nil {
			return err
		}
		rows, err := s.pool.Query(ctx, sql, planned(s.pool, args)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rec store.Record
			if err := scanRecord(rows, &rec); err != nil {
				return err
			}
			page.Records = append(page.Records, rec)
		}
		return rows.Err()
	})
	if err != nil {
		return store.Page{}, s.interpret(ctx, op, err)
	}
	if len(page.Records) > limit {
		page.Records = page.Records[:limit]
		page.Next = store.PositionOf(page.Records[limit-1], across).Cursor(p, across)
	}
	return page, nil
}

// listQuery builds the listing's statement: limit+1 rows, so the store
// knows whether a next page exists. The states are spelled as literals, so
// the planner can prove a listing of pending and indeterminate records
// implies the partial index's predicate (a bind parameter would hide it
// from a generic plan). Text is ordered and compared byte-wise (COLLATE
// "C"), as every store orders it.
func (s *Store) listQuery(p store.ListParams, across bool, now time.Time) (string, []any, error) {
	after, err := p.After(across)
	if err != nil {
		return "", nil, err
	}
	var (
		args  []any
		where []string
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !across {
		where = append(where, "tenant = "+arg(p.Tenant))
	}
	where = append(where, "expires_at > "+arg(now))
	states := p.EffectiveStates()
	if len(states) < 3 {
		lit := make([]string, len(states))
		for i, st := range states {
			lit[i] = stateSQL(st)
		}
		where = append(where, "state IN ("+strings.Join(lit, ", ")+")")
	}
	if p.Stale {
		where = append(where, "(state <> "+stateSQL(store.StatePending)+" OR lease_until <= "+arg(now)+")")
	}
	if p.OlderThan > 0 {
		where = append(where, "created_at <= "+arg(now.Add(-p.OlderThan)))
	}
	dir, cmp := "DESC", "<"
	if p.Order == store.OldestFirst {
		dir, cmp = "ASC", ">"
	}
	keyCols := `created_at, key COLLATE "C"`
	if across {
		keyCols = `created_at, tenant COLLATE "C", key COLLATE "C"`
	}
	if p.Cursor != "" {
		pos := arg(after.CreatedAt) + ", "
		if across {
			pos += arg(after.Tenant) + ", "
		}
		pos += arg(after.Key)
		where = append(where, "("+keyCols+") "+cmp+" ("+pos+")")
	}
	var order []string
	for _, c := range strings.Split(keyCols, ", ") {
		order = append(order, c+" "+dir)
	}
	sql := "SELECT " + columns + " FROM " + s.tableName + " WHERE " + strings.Join(where, " AND ") +
		" ORDER BY " + strings.Join(order, ", ") + " LIMIT " + arg(p.EffectiveLimit()+1)
	return sql, args, nil
}

// planned returns the arguments of a listing's statement (or the backlog
// count's) with, first, the query mode that has PostgreSQL plan it for
// these arguments on every call, when the pool would otherwise run it as a
// cached prepared statement (pgx's default). After five executions
// PostgreSQL may settle a prepared statement on its generic plan, which
// cannot see the clock: it prices "expires_at > $1" at a third of the
// table, where it is nearly all of it, and where many records wait it reads
// a listing across tenants, or the count, through the expiry index, every
// live row, instead of the partial index of what waits (TestListPlans
// shows both plans, TestListingsPlanWithTheirArguments the switch). A
// listing is rare and its planning cheap beside a page; the count runs once
// per sweep. QueryExecModeCacheDescribe still sends the statement in one
// round trip, in the binary format, but as the unnamed statement, planned
// at each Bind. The other modes use the unnamed statement or the simple
// protocol already, and are left as the deployment chose them.
func planned(pool *pgxpool.Pool, args []any) []any {
	if pool.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

// CountBacklog implements [store.Store.CountBacklog] in one query over the
// records that are not completed, which the planner reads through the
// listings' partial index: its cost follows the backlog, not the table.
func (s *Store) CountBacklog(ctx context.Context) ([]store.BacklogCount, error) {
	const op = "count backlog"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var out []store.BacklogCount
	err := retry(ctx, func(ctx context.Context) error {
		out = []store.BacklogCount{}
		rows, err := s.pool.Query(ctx, s.sql.countBacklog, planned(s.pool, backlogArgs{now: s.now(ctx)}.params().values())...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c store.BacklogCount
			var ind, stale int64
			if err := rows.Scan(&c.ActivityType, &ind, &stale); err != nil {
				return err
			}
			c.Indeterminate, c.Stale = int(ind), int(stale)
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.interpret(ctx, op, err)
	}
	return out, nil
}
