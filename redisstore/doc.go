// Package redisstore is a [store.Store] kept in Redis, through
// github.com/redis/go-redis/v9. Records survive a worker restart (as far as
// the Redis deployment persists them) and are shared by every replica that
// uses the same Redis and prefix.
//
// # Wiring
//
// The caller owns the client; any [redis.UniversalClient] works: a single
// node, a Sentinel failover client or a Cluster client.
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	defer client.Close()
//	s, err := redisstore.New(client, redisstore.Options{Prefix: "booking", TTL: 24 * time.Hour})
//	if err != nil { ... }
//	defer s.Close()
//
// [Options] are validated once, in [New], with an error naming the field.
//
// # Key layout
//
// For a prefix P and a tenant T, with E the unpadded base64url encoding of
// T's bytes:
//
//	P:{E}:r:<key>   string   one record, packed (below)
//	P:{E}:age       zset     the tenant's record keys scored by their
//	                         claim's time (unix microseconds), for List,
//	                         Forget, Sweep and CountBacklog
//	P:events        channel  pub/sub: the Redis key of a waited-on record
//	                         that changed
//	P:{E}:events    channel  the same per tenant, as a sharded channel, on a
//	                         Cluster of Redis 7.0+
//	P:unindexed     string   set by a Store with Options.IndexOnlyWhatWaits:
//	                         some records are in no age index, so listings,
//	                         counts and sweeps walk the record keys (below)
//
// A record is one string:
//
//	2|state|token|lease|exp|updated|created|ret|sup|w|<n>:holder<n>:check<n>:origin<n>:outcome<n>:reason<n>:resolution
//
// the version, then fixed fields in decimal text ("" when unset), each ended
// by '|': the state (pending, completed, indeterminate), the fencing token,
// the lease's end, the logical expiry, the last write and the claim's time
// (unix microseconds), ret (the record's own retention window, microseconds),
// sup (the token a takeover superseded) and w ("1" once a Wait registered);
// then the variable fields, each its length in bytes, a colon and its bytes:
// the holder, check (the digest of checked arguments), origin and resolution
// (JSON), the outcome (binary-safe) and the reason.
//
// The store also reads the earlier layout (a hash per record, and a set
// P:{E}:idx of the tenant's keys), converts a record when it writes it, and
// [Store.Migrate] converts the rest (docs/COMPATIBILITY.md).
//
// E is the Cluster hash tag, so a tenant's records, index and sharded channel
// live in one slot and a MULTI or a script may touch them together. Tenants may be any UTF-8, braces,
// colons and emoji included: base64url never contains '{' or '}', and it is
// injective, so two different tenants never map to the same Redis key. The
// prefix may not contain braces or glob characters.
//
// # Claims, and the scripts
//
// A claim of a free key runs no script: one MULTI (one command with
// [Options.IndexOnlyWhatWaits], below) holds SET key record NX GET PX ttl, which writes the packed record when the key is free and otherwise
// answers the record that holds it (a duplicate learns the outcome in the same
// round trip), and ZADD NX of the key to the age index; about once a minute per
// tenant it also holds PEXPIRE NX and PEXPIRE GT of the age index, which keep
// it alive without ever shortening it. A takeover, a record whose logical
// expiry has passed while Redis still keeps it, and a record hash of the
// previous layout go to the claim script. Renew, Complete, Release,
// MarkIndeterminate and Resolve are each one Lua script, run with EVALSHA
// (EVAL when Redis does not have it cached, as after a restart), which parses
// and rewrites the packed string: a read followed by a write inside a script is
// not a window another replica fits through. Forget and Sweep run a script per
// bounded batch.
//
// Leases and expiries are judged by Redis's clock, so replicas whose own
// clocks disagree still agree on whether a lease has run out: the store keeps
// a [store.ServerClock] that measures the offset of Redis's TIME from the
// local clock on first use and every [store.DefaultServerClockSync] after.
// The client passes "now" (the local clock corrected by that offset, or
// [Options.Clock] where a test sets one) in unix microseconds, and a script
// treats a record whose exp <= now as free. Redis also expires each record physically (PEXPIRE, the retention
// window's remainder plus a minute), which only reclaims memory; the logical
// check decides. Fencing tokens come from [store.NewToken] on the client and
// are compared as strings, since int64 does not fit a Lua number. Outcomes are
// binary-safe.
//
// # Forget, Sweep and listing
//
// [Store.Forget] deletes the tenant's keys from its age index in batches, one
// script each, then scans the tenant's record keys for any record no index
// names. [Store.Sweep] finds the age indexes with SCAN (on every master of a
// Cluster), walks them with ZSCAN, and deletes records expired by the store's
// clock up to the limit. A claim or renewal keeps the index alive one record
// lifetime past the record it wrote, so a Complete never touches it.
//
// [Store.List] pages through the tenant's age index by score (ZRANGE
// BYSCORE), reads each batch of records in one pipeline, and keeps the live
// ones that pass the filters. There is no index by state: a listing of the
// few indeterminate records of a tenant with many completed ones reads past
// the completed ones; one call walks at most 8192 entries and returns what it
// found with a cursor to go on from. [Store.ListAcrossTenants] finds the
// tenants with SCAN and merges a page of each.
//
// # Indexing only what waits
//
// With [Options.IndexOnlyWhatWaits] (off by default) the age index holds
// only the records that can need an operator, and the claim of a free key
// is the one command SET NX GET PX (with [Options.ReplicaAcks], then WAIT).
// A record enters the index when the claim script writes it (a takeover, a
// claim of an expired record), when it is renewed, and when it is marked
// indeterminate; records are packed the same either way.
//
// So that no listing misses a record the index leaves out, a Store with the
// option sets P:unindexed before its first unindexed claim (with
// [Options.ReplicaAcks], acknowledged by the replicas, or the claim is
// indexed instead), and every Store on the prefix that finds it walks the
// record keys (SCAN on every master) for the listings, [Store.CountBacklog]
// and the sweep: they find every record, and each costs a walk of the
// keyspace. [Store.ListByScan] walks the tenant's keys whatever the prefix
// holds; idempotencyctl forget looks for held records with it. Releases up
// to 0.2.0 know nothing of the mark: turn the option on only once every
// worker and operator tool runs a release that does.
//
// # Waiting
//
// A [Store.Wait] subscribes first, then registers on the record (it sets
// the record's w in the same script that reads it), so every script that
// later changes the record publishes its Redis key, and a change made before
// is in what the Wait read. A record nobody waits on is never published.
// The first Wait starts one subscriber per Store, which fans the messages
// out to the waiters; [Store.Close] stops it. A waiter re-reads
// the record on every wake-up, and also polls with a backoff up to
// [Options.PollInterval], because messages are lost while the subscriber
// reconnects and a lease runs out by the clock with no write at all.
//
// On a single node, Sentinel, or a Cluster of servers before 7.0, changes go
// to P:events with PUBLISH (which a Cluster broadcasts to every node). On a
// Cluster whose servers have sharded pub/sub (the store asks COMMAND INFO
// SPUBLISH once), they go with SPUBLISH to the tenant's channel P:{E}:events,
// which lives on the master that owns the tenant's slot, so a wake-up crosses
// no other node; the Store subscribes (SSUBSCRIBE) per tenant while Waits run
// on it, and keeps each subscription 30 s past its last Wait.
//
// # Replicas, Cluster and failover
//
// Redis replicates asynchronously: a claim a master acknowledged and had not
// yet sent to its replica is lost if the master dies and the replica is
// promoted, and a second call may then claim the key and run the effect
// again. The window is small, but it is outside the promise. Set
// [Options.ReplicaAcks] (and [Options.ReplicaAckTimeout]) to make every
// acquired claim wait, with WAIT on the connection that wrote it, until that
// many replicas have it; a claim not acknowledged in time is taken back and
// fails with [ErrNotReplicated], which matches [store.ErrUnavailable], so
// the body never runs on it. Taking it back removes only what the claim
// created (the rule of [store.Store.Claim]): a claim of a free key is
// deleted, a takeover is left pending with its lease ended. It costs a
// replica round trip per claim and makes a master's slots refuse claims while
// it has no live replica. docs/RELIABILITY.md says what each deployment shape
// promises, measured on a real Cluster failing over.
//
// With a Cluster client the store asks go-redis to reload its slot map after
// any "unavailable" error, so the calls of a dead master's slots reach the
// promoted replica within a reload, not after ClusterStateReloadInterval.
// The client's ReadTimeout must outlast ReplicaAckTimeout.
//
// # Errors
//
// Errors are translated at the edge: a client or pool that is closed, a
// connection refused, reset or timed out, and Redis's "not now" replies
// (LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY, NOREPLICAS, and MOVED
// or ASK past the client's redirections) match [store.ErrUnavailable] and
// keep the cause. The caller's own cancelled or
// expired context returns the context's error; a Claim interrupted that way,
// or whose answer a broken connection or a timeout lost, takes back the
// claim it may have made, by the same rule. A claim script that go-redis
// sends again after a lost answer finds its own claim and answers
// "acquired". Other Redis errors are wrapped with the operation's name.
package redisstore
