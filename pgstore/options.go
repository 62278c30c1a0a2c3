package pgstore

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/tesserix/idempotency/store"
)

// Defaults applied by [New] to the zero fields of [Options].
const (
	// DefaultSchema is the schema the store's table lives in.
	DefaultSchema = "public"
	// DefaultTable is the name of the store's table.
	DefaultTable = "idempotency_records"
	// DefaultPollInterval is the first interval [Store.Wait] re-reads a
	// record at when no notification arrives.
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultMaxPollInterval bounds the backoff of [Store.Wait]'s polling.
	DefaultMaxPollInterval = 2 * time.Second
	// DefaultPollOnlyInterval is [Options.PollInterval]'s default for a
	// store without [Capabilities.Notify], whose waiters learn of a
	// settlement only by polling.
	DefaultPollOnlyInterval = 20 * time.Millisecond
	// DefaultPollOnlyMaxInterval is [Options.MaxPollInterval]'s default
	// for a store without [Capabilities.Notify].
	DefaultPollOnlyMaxInterval = 500 * time.Millisecond
)

// maxIdentifierLength is PostgreSQL's NAMEDATALEN-1: longer names are
// silently truncated by the server, so they are refused here instead.
const maxIdentifierLength = 63

// Options configure [New]. The zero value is usable.
type Options struct {
	// Schema holds the store's table. It is used exactly as written
	// (quoted, so case-sensitive) and must be 1–63 ASCII letters, digits or
	// underscores, not starting with a digit. Defaults to "public"
	// ([DefaultSchema]).
	Schema string
	// Table is the store's table, under the same rules as Schema. Defaults
	// to "idempotency_records" ([DefaultTable]).
	Table string
	// TTL is the retention window: a record expires this long after its
	// claim, completion or marking, and an expired key is free again. Must
	// not be negative. Defaults to 24 hours ([store.DefaultTTL]).
	TTL time.Duration
	// Clock tells the store the time. Every timestamp the store writes and
	// every lease and expiry it judges comes from it. Defaults to a
	// store.ServerClock that follows PostgreSQL's clock (clock_timestamp(),
	// measured again every store.DefaultServerClockSync), so workers whose
	// own clocks disagree still agree on whether a lease has run out. Set it
	// only to control time in tests.
	Clock store.Clock
	// PollInterval is how long [Store.Wait] first waits for a notification
	// before re-reading the record; it doubles on each quiet poll up to
	// MaxPollInterval. Polling only covers lost notifications and leases
	// running out — except without [Capabilities.Notify], where it is how
	// every waiter learns of a settlement. Must not be negative. Defaults
	// to 250 milliseconds ([DefaultPollInterval]) with Notify. Defaults to
	// 20 milliseconds ([DefaultPollOnlyInterval]) without it.
	PollInterval time.Duration
	// MaxPollInterval bounds PollInterval's backoff. Must not be negative
	// nor, when set, below PollInterval. Defaults to 2 seconds
	// ([DefaultMaxPollInterval]) with [Capabilities.Notify]. Defaults to
	// 500 milliseconds ([DefaultPollOnlyMaxInterval]) without it. Either
	// way, PollInterval when that is larger.
	MaxPollInterval time.Duration
	// NotifyChannel is the LISTEN/NOTIFY channel state changes are announced
	// on. Every store on the same table must use the same channel. Same
	// rules as Schema. Defaults to a name derived from Schema and Table.
	NotifyChannel string
	// Capabilities are the features of PostgreSQL the store may use
	// beyond what distributed engines share: nil is every one
	// ([AllCapabilities]), the store's mode on PostgreSQL itself; the zero
	// Capabilities is the portable mode, for Citus, YugabyteDB or
	// CockroachDB (see [Capabilities] for what each costs, and
	// [DetectCapabilities] to ask the server). With every capability on,
	// the store sends exactly the statements it sends with nil. Every
	// store on one table must agree on Capabilities.Notify. Defaults to
	// nil; [Store.Options] returns the set in use, never nil.
	Capabilities *Capabilities
	// Batch lets the claims and completions this Store is asked for at the
	// same moment share round trips. A call that finds a connection of the
	// pool free is sent at once, alone, exactly as without Batch; once a
	// call arrives while every connection is taken, and until none of the
	// store's claims (or completions) is out, calls wait for the next of
	// them to return and go together, as one multi-row statement and one
	// commit. So a lone caller never waits, and under load many calls
	// share a commit. Only the common cases are batched (a claim of a free
	// or held key, a completion by its holder); a batch answers every call
	// as the call alone would have, and sends back to its caller what it
	// cannot settle. The rows are the ones a call alone writes, so
	// releases without Batch read them. Defaults to false. It pays where
	// a process has many more calls at once than connections (measured:
	// 1.1–2.2× the per-call floor at 32 callers on 4 or 16 connections)
	// and costs where it has only a few more (0.55–0.67× at 8 callers on
	// 4 connections, where the batches are small and each waits for the
	// one before): measure before turning it on. See docs/BENCHMARKS.md
	// section 8.
	Batch bool
	// RequireSynchronousReplication, when true, makes every claim refuse
	// (with a [*ReplicationError], which matches [ErrNotSynchronous] and
	// store.ErrUnavailable) unless the server's commits wait for a
	// synchronous standby: synchronous_standby_names names a standby that
	// is streaming as sync or quorum, and the session's synchronous_commit
	// is on, remote_write or remote_apply (see [DetectReplication]). With
	// an asynchronous standby a failover loses the claims the standby had
	// not received, and the promoted standby lets a second caller claim
	// the same key and run its effect again; with a synchronous one it
	// loses none (docs/SCALING.md, "Failover"). The answer is asked before
	// the first claim, again every [DefaultReplicationCheckInterval] and
	// after the server was unavailable. PostgreSQL makes the commit wait,
	// not the store: the check only refuses to claim on a server that
	// would not. Only claims are refused, as redisstore's ReplicaAcks
	// waits only for claims. The session needs pg_read_all_stats (or
	// pg_monitor) to read pg_stat_replication's sync_state. Defaults to
	// false: no check.
	RequireSynchronousReplication bool
}

// resolve validates o and fills in its defaults. Errors name the field.
func (o Options) resolve() (Options, error) {
	o.Schema = cmp.Or(o.Schema, DefaultSchema)
	o.Table = cmp.Or(o.Table, DefaultTable)
	if err := validateIdentifier("pgstore.Options.Schema", o.Schema); err != nil {
		return o, err
	}
	if err := validateIdentifier("pgstore.Options.Table", o.Table); err != nil {
		return o, err
	}
	o.NotifyChannel = cmp.Or(o.NotifyChannel, defaultChannel(o.Schema, o.Table))
	if err := validateIdentifier("pgstore.Options.NotifyChannel", o.NotifyChannel); err != nil {
		return o, err
	}
	switch {
	case o.TTL < 0:
		return o, &store.OptionsError{Field: "pgstore.Options.TTL", Reason: "must not be negative"}
	case o.PollInterval < 0:
		return o, &store.OptionsError{Field: "pgstore.Options.PollInterval", Reason: "must not be negative"}
	case o.MaxPollInterval < 0:
		return o, &store.OptionsError{Field: "pgstore.Options.MaxPollInterval", Reason: "must not be negative"}
	case o.MaxPollInterval > 0 && o.PollInterval > o.MaxPollInterval:
		return o, &store.OptionsError{Field: "pgstore.Options.MaxPollInterval", Reason: fmt.Sprintf("%v is below PollInterval %v", o.MaxPollInterval, o.PollInterval)}
	}
	o.TTL = cmp.Or(o.TTL, store.DefaultTTL)
	o.Clock = cmp.Or[store.Clock](o.Clock, store.SystemClock{})
	caps := AllCapabilities()
	if o.Capabilities != nil {
		caps = *o.Capabilities
	}
	o.Capabilities = &caps // a copy: the caller's may change after New
	poll, maxPoll := DefaultPollInterval, DefaultMaxPollInterval
	if !caps.Notify {
		poll, maxPoll = DefaultPollOnlyInterval, DefaultPollOnlyMaxInterval
	}
	o.PollInterval = cmp.Or(o.PollInterval, poll)
	o.MaxPollInterval = cmp.Or(o.MaxPollInterval, max(maxPoll, o.PollInterval))
	return o, nil
}

// validateIdentifier accepts what PostgreSQL accepts unquoted, minus
// non-ASCII letters and '$': [A-Za-z_][A-Za-z0-9_]{0,62}. Names are quoted
// anyway; the rule keeps operators from ever needing to.
func validateIdentifier(field, name string) error {
	if name == "" {
		return &store.OptionsError{Field: field, Reason: "must not be empty"}
	}
	if len(name) > maxIdentifierLength {
		return &store.OptionsError{Field: field, Reason: fmt.Sprintf("%q is longer than %d bytes", name, maxIdentifierLength)}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return &store.OptionsError{Field: field, Reason: fmt.Sprintf("%q is not an identifier: only ASCII letters, digits and underscores, not starting with a digit", name)}
		}
	}
	return nil
}

// defaultChannel derives a channel name from the table's qualified name, so
// stores on different tables do not wake each other.
func defaultChannel(schema, table string) string {
	sum := sha256.Sum256([]byte(schema + "." + table))
	return "idempotency_" + hex.EncodeToString(sum[:8])
}

// indexName is the expiry index's name: the table's name with a suffix,
// shortened (with a digest, to stay unique) when it would pass 63 bytes.
func indexName(table string) string { return indexNameWith(table, "_expires_at_idx") }

// listIndexName is the name of the index of the records that are not
// completed, which the listings read, named like indexName.
func listIndexName(table string) string { return indexNameWith(table, "_waiting_idx") }

// guardName is the name of the table and trigger that refuse a COMMIT a
// transactional body sends itself (see txguard.go), named like indexName.
func guardName(table string) string { return indexNameWith(table, "_txguard") }

func indexNameWith(table, suffix string) string {
	if len(table)+len(suffix) <= maxIdentifierLength {
		return table + suffix
	}
	sum := sha256.Sum256([]byte(table))
	tag := "_" + hex.EncodeToString(sum[:4])
	return table[:maxIdentifierLength-len(suffix)-len(tag)] + tag + suffix
}
