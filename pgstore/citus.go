package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Citus: a distributed PostgreSQL, a coordinator and worker nodes, each
// table cut into shards by a distribution column. The store's table is
// distributed by tenant: every statement on a record names its tenant and
// key, so Citus routes it to the one shard, on one worker, that holds the
// tenant's records; Sweep, the listings across tenants and the backlog
// count run on every shard. EnsureSchema distributes the table it makes
// (see distribute). What else the store does there is in the portable
// mode (Capabilities, as DetectCapabilities answers on Citus) and in
// docs/SCALING.md ("Distributed PostgreSQL").

// DistributionColumn is the column the store's table is distributed by on
// Citus: the tenant. Every unique constraint of a distributed table must
// hold it, and the primary key (tenant, key) does.
const DistributionColumn = "tenant"

// ErrNotDistributed is matched (errors.Is) by the error of
// [Store.EnsureSchema] on Citus when the store's table exists but is not
// distributed by tenant and EnsureSchema will not make it so: it holds
// rows (distributing them moves them to the workers, a deployment's
// decision, not a replica's at start), or Citus already manages it in
// another way. The error names the statement that distributes it.
var ErrNotDistributed = errors.New("pgstore: the store's table on Citus is not distributed by " + DistributionColumn)

// citusInstalled reports whether the database runs Citus: whether the
// citus extension is installed in it.
func citusInstalled(ctx context.Context, tx pgx.Tx) (bool, error) {
	var citus bool
	err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus)
	return citus, err
}

// distribute makes the store's table, on Citus, a table distributed by
// tenant (create_distributed_table), in tx, the transaction that created
// it. It changes nothing on a database without Citus, nor on a table
// already distributed by tenant. It refuses (ErrNotDistributed, naming
// the statement) a table Citus does not manage that holds rows, and a
// table Citus manages otherwise: distributed by another column (a
// tenant's Forget would then span shards, which Citus refuses for the
// statement's form), a reference table, or a local one.
//
// The commit guard's table (txguard.go) stays a table of the coordinator:
// it holds a transaction's row only while that transaction lasts.
func (m schemaMaker) distribute(ctx context.Context, tx pgx.Tx) error {
	citus, err := citusInstalled(ctx, tx)
	if err != nil || !citus {
		return err
	}
	var (
		method string
		column *string
	)
	err = tx.QueryRow(ctx, `SELECT partmethod::text, column_to_column_name(logicalrelid, partkey)
FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)`, m.tableName).Scan(&method, &column)
	switch {
	case err == nil && method == "h" && column != nil && *column == DistributionColumn:
		return nil
	case err == nil:
		how := "a reference or local table of Citus"
		if method == "h" && column != nil {
			how = fmt.Sprintf("distributed by %q", *column)
		}
		return fmt.Errorf("%w: %s is %s; every statement routes by tenant, so the store runs on a table distributed by %s alone (%s)",
			ErrNotDistributed, m.tableName, how, DistributionColumn, distributeStatement(m.tableName))
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	var rows bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+m.tableName+")").Scan(&rows); err != nil {
		return err
	}
	if rows {
		return fmt.Errorf("%w: %s holds records on the coordinator alone; distributing them moves them to the workers, which a deployment decides, not a replica at start: run %s once, then EnsureSchema again",
			ErrNotDistributed, m.tableName, distributeStatement(m.tableName))
	}
	_, err = tx.Exec(ctx, "SELECT create_distributed_table($1, $2)", m.tableName, DistributionColumn)
	return err
}

// distributeStatement is the statement that distributes table (quoted and
// schema-qualified) by tenant, for an operator to run.
func distributeStatement(table string) string {
	return fmt.Sprintf("SELECT create_distributed_table('%s', '%s')", table, DistributionColumn)
}
