package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DetectPortable reports whether the database pool connects to needs
// [Options.Portable], and which engine says so: CockroachDB and YugabyteDB
// by the version() they report, Citus by its extension being installed.
// PostgreSQL itself needs it not. Only PostgreSQL runs in this project's
// tests: the strings it looks for are the engines' documented version
// strings, checked by TestDetectPortableNames, not against the engines.
func DetectPortable(ctx context.Context, pool *pgxpool.Pool) (bool, string, error) {
	var version string
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return false, "", fmt.Errorf("pgstore: detecting the engine: %w", err)
	}
	if engine := engineOf(version); engine != "" {
		return true, engine, nil
	}
	var citus bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		return false, "", fmt.Errorf("pgstore: detecting the engine: %w", err)
	}
	if citus {
		return true, "Citus", nil
	}
	return false, "", nil
}

// engineOf names the distributed engine a version() string is from, or "".
func engineOf(version string) string {
	switch {
	case strings.Contains(version, "CockroachDB"):
		return "CockroachDB"
	case strings.Contains(version, "-YB-"):
		return "YugabyteDB"
	}
	return ""
}
