package redisstore

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tesserix/idempotency/store"
)

// DefaultPrefix starts every key a [Store] writes when [Options.Prefix] is
// empty.
const DefaultPrefix = "idempotency"

// DefaultPollInterval is the longest a [Store.Wait] sleeps between two
// re-reads of the record when no notification arrives, when
// [Options.PollInterval] is zero.
const DefaultPollInterval = 500 * time.Millisecond

// MaxPrefixLength bounds [Options.Prefix], in bytes.
const MaxPrefixLength = 128

// physicalMargin is how long Redis keeps a record after its retention window
// ended by the store's clock, so that a clock a little ahead of Redis's own
// never loses a live record; the logical expiry in the scripts decides.
const physicalMargin = time.Minute

// minPoll is where Wait's polling backoff starts.
const minPoll = 10 * time.Millisecond

// Options configure a [Store]. The zero value is valid.
type Options struct {
	// Prefix starts every key and the notification channel the store uses,
	// so that several stores (or an application's own data) can share one
	// Redis. It must not contain '{' or '}', which would change the Cluster
	// hash tag, nor glob characters ('*', '?', '[', ']', '\'), and must be
	// valid UTF-8. Defaults to "idempotency" ([DefaultPrefix]).
	Prefix string

	// TTL is the retention window: a record expires this long after it was
	// last written, and an expired key is free again. Must not be negative.
	// Defaults to 24 hours ([store.DefaultTTL]).
	TTL time.Duration

	// Clock tells the store the time. Every timestamp and every lease and
	// expiry decision comes from it. Defaults to a store.ServerClock that
	// follows Redis's clock (TIME, measured again every
	// store.DefaultServerClockSync), so workers whose own clocks disagree
	// still agree on whether a lease has run out. Set it only to control
	// time in tests.
	Clock store.Clock

	// PollInterval is the longest [Store.Wait] sleeps between two re-reads
	// of a record when no change notification arrives (notifications can be
	// lost while the subscriber reconnects, and a lease runs out by the
	// clock without any write). Must not be negative. Defaults to
	// 500 milliseconds ([DefaultPollInterval]).
	PollInterval time.Duration

	// ReplicaAcks, when positive, makes every acquired claim wait until this
	// many replicas of the master holding the key acknowledge it (Redis
	// WAIT, on the connection that wrote it) before Claim returns it. Redis
	// replicates asynchronously: without it, a master that fails right
	// after a claim can take the claim with it, and the promoted replica
	// lets a second caller claim the same key. A claim not acknowledged in
	// time is taken back and fails with [ErrNotReplicated], which matches
	// store.ErrUnavailable. Only claims wait; completions do not (a lost
	// completion leaves the claim pending, which ends indeterminate for an
	// EFFECTFUL call, never in a second run). Must not be negative; zero
	// (the default) never waits. See docs/RELIABILITY.md for what it costs.
	ReplicaAcks int

	// ReplicaAckTimeout bounds the wait ReplicaAcks asks for. Must not be
	// negative; at least a millisecond when set. Defaults to 1 second
	// ([DefaultReplicaAckTimeout]) when ReplicaAcks is set.
	ReplicaAckTimeout time.Duration

	// IndexOnlyWhatWaits, when true, keeps in the tenant's age index only
	// the records that can need an operator, and makes the claim of a free
	// key one command: SET NX GET PX, with no MULTI and no ZADD (with
	// ReplicaAcks, followed by WAIT on the same connection). A record
	// enters the index when it is taken over (Supersede) or claimed after
	// its expiry, renewed, or marked indeterminate; a release, Forget and
	// Sweep remove it as before. The record itself is written exactly as
	// without the option.
	//
	// A listing, a count or a sweep that read the age index alone would
	// miss completed records and pending records still within their first
	// lease that nobody renewed (a claim whose holder died before its
	// first renewal among them), and an operator's command that guards
	// what is held would not see them. So before its first claim that
	// leaves a record out of the index (and again at most once a minute,
	// should the key be lost), a Store with the option sets the key
	// P:unindexed (with ReplicaAcks, acknowledged as a claim is: when it is
	// not, that claim is indexed as without the option). Every Store of this
	// release on the prefix that finds the key, with the option or without
	// it (idempotencyctl's included), then walks the record keys themselves
	// (SCAN on every master) for [Store.List], [Store.ListAcrossTenants],
	// [Store.CountBacklog] and, after the age indexes, [Store.Sweep]: they
	// see every record, at the cost of a walk of the keyspace per page,
	// count or sweep. [Store.Forget] erases every record of the tenant
	// either way (it scans the tenant's record keys once the index is
	// empty). The store never deletes P:unindexed: delete it only once no
	// worker has run with the option for longer than any record of the
	// prefix can live (its lease, then its completion or resolution, each
	// starting a retention window again), and the listings read the index
	// alone again.
	//
	// It is off by default (false) because releases up to 0.2.0 list from
	// the full index, and know nothing of P:unindexed: during a rolling
	// deploy, the claims of workers with the option on are invisible to the
	// listings of workers of the previous release, and to its
	// idempotencyctl (whose forget would erase them while they run). Turn
	// it on once every worker, and every operator tool, runs this release.
	IndexOnlyWhatWaits bool
}

// withDefaults validates o and fills in the defaults. Errors name the field.
func (o Options) withDefaults() (Options, error) {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	switch {
	case len(o.Prefix) > MaxPrefixLength:
		return o, optionError("Prefix", fmt.Sprintf("longer than %d bytes", MaxPrefixLength))
	case !utf8.ValidString(o.Prefix):
		return o, optionError("Prefix", "not valid UTF-8")
	case strings.ContainsAny(o.Prefix, "{}"):
		return o, optionError("Prefix", "must not contain '{' or '}': the tenant is the Cluster hash tag")
	case strings.ContainsAny(o.Prefix, `*?[]\`):
		return o, optionError("Prefix", `must not contain glob characters (*?[]\)`)
	case strings.IndexByte(o.Prefix, 0) >= 0:
		return o, optionError("Prefix", "contains a NUL byte")
	}
	switch {
	case o.TTL < 0:
		return o, optionError("TTL", "must not be negative")
	case o.TTL > 0 && o.TTL < time.Millisecond:
		return o, optionError("TTL", "must be at least a millisecond")
	case o.PollInterval < 0:
		return o, optionError("PollInterval", "must not be negative")
	}
	o.TTL = cmp.Or(o.TTL, store.DefaultTTL)
	o.Clock = cmp.Or[store.Clock](o.Clock, store.SystemClock{})
	o.PollInterval = cmp.Or(o.PollInterval, DefaultPollInterval)
	return o.validateReplicas()
}

func optionError(field, reason string) error {
	return &store.OptionsError{Field: "redisstore.Options." + field, Reason: reason}
}
