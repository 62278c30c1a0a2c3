package pgstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/internal/testenv/pgenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/store/storetest"
)

// The compatibility fixtures of the PostgreSQL store (see internal/compat):
// each set under testdata/compat holds
//
//	schema.json   the table as EnsureSchema made it: columns (type, NOT NULL,
//	              default), constraints and indexes, from the catalogs
//	schema.sql    the same table as DDL, to load
//	rows.sql      the rows compat.WriteRecords left, one INSERT each, every
//	              column's value explicit
//	records.json  the same records as that release's Lookup read them
//
// with the schema written "{{schema}}" and the table under its default name.

const (
	compatSchemaJSON = "schema.json"
	compatSchemaSQL  = "schema.sql"
	compatRowsSQL    = "rows.sql"
	schemaMarker     = "{{schema}}"
)

// pgColumn is a column as the catalogs describe it.
type pgColumn struct {
	Type    string  `json:"type"`
	NotNull bool    `json:"not_null"`
	Default *string `json:"default"`
}

// pgCatalog is a table as the catalogs describe it, keyed by name (so a
// table a later version added columns to compares with a fresh one).
type pgCatalog struct {
	Columns     map[string]pgColumn `json:"columns"`
	Constraints map[string]string   `json:"constraints"`
	// Indexes are the index definitions, the schema written schemaMarker;
	// Backing says which of them a constraint made.
	Indexes map[string]string `json:"indexes"`
	Backing map[string]bool   `json:"constraint_indexes"`
	// order is the columns' order in the table.
	order []string
}

func readCatalog(t testing.TB, pool *pgxpool.Pool, schema, table string) pgCatalog {
	t.Helper()
	ctx := context.Background()
	name := pgx.Identifier{schema, table}.Sanitize()
	c := pgCatalog{Columns: map[string]pgColumn{}, Constraints: map[string]string{}, Indexes: map[string]string{}, Backing: map[string]bool{}}
	rows, err := pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, name)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		var col pgColumn
		require.NoError(t, rows.Scan(&n, &col.Type, &col.NotNull, &col.Default))
		c.Columns[n] = col
		c.order = append(c.order, n)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, c.Columns, "table %s", name)
	rows, err = pool.Query(ctx, `SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass($1)`, name)
	require.NoError(t, err)
	for rows.Next() {
		var n, def string
		require.NoError(t, rows.Scan(&n, &def))
		c.Constraints[n] = def
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid),
	EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass($1)`, name)
	require.NoError(t, err)
	for rows.Next() {
		var n, def string
		var backing bool
		require.NoError(t, rows.Scan(&n, &def, &backing))
		c.Indexes[n] = strings.ReplaceAll(def, " ON "+schema+".", " ON "+schemaMarker+".")
		c.Backing[n] = backing
	}
	require.NoError(t, rows.Err())
	return c
}

// ddl is the catalog as statements that make the table again.
func (c pgCatalog) ddl(table string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s.%s (\n", schemaMarker, table)
	var lines []string
	for _, n := range c.order {
		col := c.Columns[n]
		l := "\t" + n + " " + col.Type
		if col.NotNull {
			l += " NOT NULL"
		}
		if col.Default != nil {
			l += " DEFAULT " + *col.Default
		}
		lines = append(lines, l)
	}
	for _, n := range sortedKeys(c.Constraints) {
		lines = append(lines, "\tCONSTRAINT "+n+" "+c.Constraints[n])
	}
	b.WriteString(strings.Join(lines, ",\n"))
	b.WriteString("\n);\n")
	for _, n := range sortedKeys(c.Indexes) {
		if !c.Backing[n] {
			b.WriteString(c.Indexes[n] + ";\n")
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// dumpRows returns the table's rows as INSERT statements, every column's
// value an explicit literal (timestamps in UTC, bytea in hex), in key
// order.
func dumpRows(t testing.TB, pool *pgxpool.Pool, schema, table string, c pgCatalog) string {
	t.Helper()
	ctx := context.Background()
	quoted := make([]string, len(c.order))
	for i, n := range c.order {
		quoted[i] = "quote_nullable(" + pgx.Identifier{n}.Sanitize() + "::text)"
	}
	var b strings.Builder
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL bytea_output = 'hex'"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+strings.Join(quoted, ", ")+" FROM "+pgx.Identifier{schema, table}.Sanitize()+
			` ORDER BY tenant COLLATE "C", key COLLATE "C"`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			vals := make([]string, len(c.order))
			dst := make([]any, len(vals))
			for i := range vals {
				dst[i] = &vals[i]
			}
			if err := rows.Scan(dst...); err != nil {
				return err
			}
			fmt.Fprintf(&b, "INSERT INTO %s.%s (%s)\nVALUES (%s);\n", schemaMarker, table, strings.Join(c.order, ", "), strings.Join(vals, ", "))
		}
		return rows.Err()
	})
	require.NoError(t, err)
	return b.String()
}

// compatWrite is what the current code writes for a set.
type compatWrite struct {
	catalog pgCatalog
	rows    string
	records compat.Records
}

// writeCompat writes the set's records with the current code, in a fresh
// schema, and reads back what it wrote.
func writeCompat(t testing.TB) compatWrite {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	clock := storetest.NewClock(compat.Epoch)
	st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureSchema(context.Background()))
	recs := compat.WriteRecords(t, st, clock)
	cat := readCatalog(t, pool, schema, pgstore.DefaultTable)
	return compatWrite{catalog: cat, rows: dumpRows(t, pool, schema, pgstore.DefaultTable, cat), records: recs}
}

// TestCompatWrite writes a new fixture set, with IDEMPOTENCY_WRITE_COMPAT
// naming it; see internal/compat.
func TestCompatWrite(t *testing.T) {
	set := compat.ToWrite(t)
	w := writeCompat(t)
	set.WriteJSON(t, compatSchemaJSON, w.catalog)
	set.Write(t, compatSchemaSQL, []byte(w.catalog.ddl(pgstore.DefaultTable)))
	set.Write(t, compatRowsSQL, []byte(w.rows))
	set.WriteJSON(t, compat.RecordsFile, w.records)
	set.WriteREADME(t, "pgstore", `the PostgreSQL table as EnsureSchema created it
(schema.json from the catalogs, schema.sql to load it) and the rows of the records
internal/compat.WriteRecords writes (rows.sql: one INSERT per row, every column
explicit, timestamps in UTC, bytea in hex), with records.json, the same records as
Lookup read them. "{{schema}}" stands for the schema; the table has its default
name.`)
}

// loadSet makes the set's table in a fresh schema, loads its rows, and
// returns the pool and the schema.
func loadSet(t testing.TB, set compat.Set) (*pgxpool.Pool, string) {
	t.Helper()
	pool, schema := pgenv.Postgres(t)
	ident := pgx.Identifier{schema}.Sanitize()
	ctx := context.Background()
	for _, f := range []string{compatSchemaSQL, compatRowsSQL} {
		sql := strings.ReplaceAll(string(set.Read(t, f)), schemaMarker, ident)
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, "loading %s of set %s", f, set.Name)
	}
	return pool, schema
}

func readSet(t testing.TB, set compat.Set) (pgCatalog, compat.Records) {
	t.Helper()
	var cat pgCatalog
	set.ReadJSON(t, compatSchemaJSON, &cat)
	var recs compat.Records
	set.ReadJSON(t, compat.RecordsFile, &recs)
	return cat, recs
}

// catalogJSON is the catalog as JSON, for compat.Equal and compat.Covers.
func catalogJSON(t testing.TB, c pgCatalog) []byte { return compat.MarshalIndent(t, c) }

// Every committed set loads into a fresh table, as that release left it;
// the current EnsureSchema brings it to the current schema (the same as a
// fresh table's, which covers every column, constraint and index the set
// had); and the current code reads every record exactly, settles them as
// the contract says, and sweeps and forgets them. See internal/compat.
func TestCompatRead(t *testing.T) {
	t.Parallel()
	fresh := writeCompat(t).catalog
	for _, set := range compat.Sets(t) {
		t.Run(set.Name, func(t *testing.T) {
			t.Parallel()
			cat, recs := readSet(t, set)
			require.NotEmpty(t, recs.Records)
			assert.NoError(t, compat.Covers(catalogJSON(t, cat), catalogJSON(t, fresh)),
				"today's table lacks or changed what the table of %s had", set.Name)

			for _, part := range []string{"reads and writes", "retention"} {
				t.Run(part, func(t *testing.T) {
					t.Parallel()
					pool, schema := loadSet(t, set)
					require.NoError(t, compat.Equal(catalogJSON(t, cat), catalogJSON(t, readCatalog(t, pool, schema, pgstore.DefaultTable))),
						"the set loads as it was written")
					clock := storetest.NewClock(recs.Now)
					st, err := pgstore.New(pool, pgstore.Options{Schema: schema, Clock: clock})
					require.NoError(t, err)
					t.Cleanup(st.Close)
					require.NoError(t, st.EnsureSchema(context.Background()), "upgrading the table of %s", set.Name)
					assert.NoError(t, compat.Equal(catalogJSON(t, fresh), catalogJSON(t, readCatalog(t, pool, schema, pgstore.DefaultTable))),
						"EnsureSchema brings the table of %s to the current schema", set.Name)
					if part == "retention" {
						compat.CheckRetention(t, st, clock, recs)
						return
					}
					compat.CheckReads(t, st, clock, recs)
					compat.CheckWrites(t, st, clock, recs)
				})
			}
		})
	}
}

// The current code writes what the newest set holds: the same schema, and
// the same rows, fencing tokens aside (they are random). A change of the
// table or of what a row holds fails here until a release adds a set of
// its own (make compat-fixtures), whose notes say how the earlier sets are
// still read.
func TestCompatWritesNewest(t *testing.T) {
	t.Parallel()
	newest := compat.Newest(compat.Sets(t))
	cat, recs := readSet(t, newest)
	w := writeCompat(t)
	assert.NoError(t, compat.Equal(catalogJSON(t, cat), catalogJSON(t, w.catalog)), "the table differs from the one of %s", newest.Name)
	assert.Equal(t, string(newest.Read(t, compatSchemaSQL)), w.catalog.ddl(pgstore.DefaultTable), "schema.sql of %s", newest.Name)
	assert.Equal(t, normalizeTokens(string(newest.Read(t, compatRowsSQL)), recs), normalizeTokens(w.rows, w.records),
		"the rows differ from those of %s", newest.Name)
	assert.JSONEq(t, string(compat.MarshalIndent(t, withoutTokens(recs))), string(compat.MarshalIndent(t, withoutTokens(w.records))),
		"the records read back differ from those of %s", newest.Name)
}

// normalizeTokens replaces every token of recs in sql, a quoted literal,
// by a placeholder naming its record.
func normalizeTokens(sql string, recs compat.Records) string {
	for tok, name := range recs.Tokens() {
		sql = strings.ReplaceAll(sql, "'"+strconv.FormatInt(tok, 10)+"'", name)
	}
	return sql
}

func withoutTokens(recs compat.Records) compat.Records {
	out := compat.Records{Now: recs.Now}
	for _, r := range recs.Records {
		r.Token = 0
		out.Records = append(out.Records, r)
	}
	return out
}
