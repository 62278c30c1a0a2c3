package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/store"
)

// DefaultReplicationCheckInterval is how long a passed check of
// [Options.RequireSynchronousReplication] is trusted before a claim asks
// the server again.
const DefaultReplicationCheckInterval = 5 * time.Second

// ReplicationMode is what [DetectReplication] found the pool dials.
type ReplicationMode string

// The modes [DetectReplication] tells apart.
const (
	// ReplicationSingleNode is a primary no standby streams from: a
	// failover has nothing to promote, and a lost disk loses the records.
	ReplicationSingleNode ReplicationMode = "single node"
	// ReplicationAsynchronous is a primary with standbys, none of which
	// its commits wait for: a failover loses what the promoted standby
	// had not received. A claim lost so lets a second caller run the
	// effect again.
	ReplicationAsynchronous ReplicationMode = "asynchronous standby"
	// ReplicationSynchronous is a primary whose commits wait for a
	// synchronous standby (synchronous_standby_names names a standby
	// that is streaming, and synchronous_commit is on, remote_write or
	// remote_apply): a failover to that standby loses no acknowledged
	// record.
	ReplicationSynchronous ReplicationMode = "synchronous standby"
	// ReplicationStandby is a standby itself (pg_is_in_recovery()): it
	// refuses every write. A multi-host connection string without
	// target_session_attrs=read-write can land here after a failover.
	ReplicationStandby ReplicationMode = "standby (read-only)"
	// ReplicationUnknown is a primary whose standbys' sync_state the
	// session may not read (it needs the pg_read_all_stats role).
	ReplicationUnknown ReplicationMode = "unknown (grant pg_read_all_stats to read pg_stat_replication)"
)

// Standby is one row of pg_stat_replication: a standby streaming from the
// primary.
type Standby struct {
	// Name is the standby's application_name, the name
	// synchronous_standby_names refers to.
	Name string
	// State is the WAL sender's state ("streaming", "catchup", ...).
	State string
	// SyncState is "sync", "quorum", "potential" or "async"; empty when
	// the session may not read it.
	SyncState string
	// ReplayLag is how far behind the standby's replay was at its last
	// report (zero when it has caught up or did not report).
	ReplayLag time.Duration
}

// Replication is what the server the pool dials said about its
// replication when [DetectReplication] asked.
type Replication struct {
	// Mode sums up the rest.
	Mode ReplicationMode
	// SynchronousStandbyNames is the server's synchronous_standby_names.
	SynchronousStandbyNames string
	// SynchronousCommit is the session's synchronous_commit: what the
	// store's commits run with.
	SynchronousCommit string
	// Standbys are the standbys streaming from the server.
	Standbys []Standby
}

// String reports the replication in one line, for a log at start.
func (r Replication) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (synchronous_commit=%s, synchronous_standby_names=%q, %d standby", r.Mode, r.SynchronousCommit, r.SynchronousStandbyNames, len(r.Standbys))
	if len(r.Standbys) != 1 {
		b.WriteString("s")
	}
	for i, s := range r.Standbys {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s/%s", s.Name, s.State, cmpOr(s.SyncState, "?"))
	}
	b.WriteString(")")
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// synchronousCommits are the synchronous_commit values under which a
// commit waits for a synchronous standby to have the WAL.
var synchronousCommits = map[string]bool{"on": true, "remote_write": true, "remote_apply": true}

// DetectReplication asks the server pool dials what it runs on: a single
// node, a primary with asynchronous standbys, a primary whose commits wait
// for a synchronous standby, or a standby (pg_is_in_recovery(),
// pg_stat_replication, synchronous_standby_names, synchronous_commit). It
// reads and changes nothing. Call it at start and log its String: a
// deployment that believes its records survive a failover learns here
// whether they do. An error is the query's. On engines other than
// PostgreSQL the answer is PostgreSQL's catalogs as that engine emulates
// them, if it does.
func DetectReplication(ctx context.Context, pool *pgxpool.Pool) (Replication, error) {
	r, err := detectReplication(ctx, pool)
	if err != nil {
		return Replication{}, fmt.Errorf("pgstore: detecting the server's replication: %w", err)
	}
	return r, nil
}

func detectReplication(ctx context.Context, pool *pgxpool.Pool) (Replication, error) {
	var r Replication
	var recovery bool
	// One connection for every question, so synchronous_commit is a
	// session's of the pool.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return r, err
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('synchronous_commit'), current_setting('synchronous_standby_names')`).
		Scan(&recovery, &r.SynchronousCommit, &r.SynchronousStandbyNames); err != nil {
		return r, err
	}
	if recovery {
		r.Mode = ReplicationStandby
		return r, nil
	}
	rows, err := conn.Query(ctx, `SELECT coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, ''),
coalesce(extract(epoch FROM replay_lag)::float8, 0) FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var s Standby
		var lag float64
		if err := rows.Scan(&s.Name, &s.State, &s.SyncState, &lag); err != nil {
			return r, err
		}
		s.ReplayLag = time.Duration(lag * float64(time.Second))
		r.Standbys = append(r.Standbys, s)
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	r.Mode = modeOf(r)
	return r, nil
}

// modeOf sums up a primary's answers.
func modeOf(r Replication) ReplicationMode {
	if len(r.Standbys) == 0 {
		return ReplicationSingleNode
	}
	unknown := false
	for _, s := range r.Standbys {
		switch s.SyncState {
		case "sync", "quorum":
			if s.State == "streaming" && r.SynchronousStandbyNames != "" && synchronousCommits[r.SynchronousCommit] {
				return ReplicationSynchronous
			}
		case "":
			unknown = true
		}
	}
	if unknown {
		return ReplicationUnknown
	}
	return ReplicationAsynchronous
}

// ErrNotSynchronous matches the error a claim returns under
// [Options.RequireSynchronousReplication] when the server's commits do not
// wait for a synchronous standby (see [ReplicationError]).
var ErrNotSynchronous = errors.New("pgstore: Options.RequireSynchronousReplication: the server's commits do not wait for a synchronous standby")

// ReplicationError is a claim refused under
// [Options.RequireSynchronousReplication]: what the server said it runs
// on. It matches [ErrNotSynchronous] and [store.ErrUnavailable] (the
// claim was not made; a caller retries, and a claim passes again once a
// synchronous standby streams, after a failover's promoted standby gets
// one of its own).
type ReplicationError struct {
	// Replication is what the server answered.
	Replication Replication
}

// Error names the option and what the server runs on.
func (e *ReplicationError) Error() string {
	return fmt.Sprintf("pgstore: Options.RequireSynchronousReplication is set and the server runs on %s; "+
		"set synchronous_standby_names to a streaming standby and synchronous_commit to on, remote_write or remote_apply", e.Replication)
}

// Is matches ErrNotSynchronous and store.ErrUnavailable.
func (e *ReplicationError) Is(target error) bool {
	return target == ErrNotSynchronous || target == store.ErrUnavailable
}

// replicationGate is the cached answer of Options.RequireSynchronousReplication.
type replicationGate struct {
	// passedAt is when a check last passed, in Unix nanoseconds; zero:
	// ask before the next claim. Concurrent claims that find it stale
	// each ask: no claim waits for another's question.
	passedAt atomic.Int64
}

// requireSynchronous returns nil when the store need not check, or the
// server's commits wait for a synchronous standby (asked again once the
// last passed check is older than DefaultReplicationCheckInterval).
func (s *Store) requireSynchronous(ctx context.Context) error {
	if !s.opts.RequireSynchronousReplication {
		return nil
	}
	if at := s.replication.passedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < DefaultReplicationCheckInterval {
		return nil
	}
	r, err := detectReplication(ctx, s.pool)
	if err != nil {
		return s.interpret(ctx, "claim: checking replication", err)
	}
	if r.Mode != ReplicationSynchronous {
		return &ReplicationError{Replication: r}
	}
	s.replication.passedAt.Store(time.Now().UnixNano())
	return nil
}

// forgetReplicationCheck makes the next claim ask again: after an
// unavailable server, which a failover looks like.
func (s *Store) forgetReplicationCheck() {
	if s.opts.RequireSynchronousReplication {
		s.replication.passedAt.Store(0)
	}
}
