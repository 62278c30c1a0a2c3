// Package store is the contract between the idempotency dispatcher and the
// place it keeps the record of what already happened: the [Store] interface,
// its records, states and errors, and [Memory], a store for one process and
// for tests.
//
// The package imports the standard library only. The durable stores
// (PostgreSQL, Redis) live in packages of their own and implement [Store];
// package storetest proves that they keep this contract.
//
// # The record
//
// A [Record] is what a store keeps under one idempotency key within one
// tenant: the key's digest (never the activity's arguments), the [State] it
// is in, who claimed it ([Record.Holder]) under which fencing token
// ([Record.Token]), until when that claim's lease runs ([Record.LeaseUntil]),
// when the record expires ([Record.ExpiresAt]), and, once known, the outcome
// as opaque bytes ([Record.Outcome]) or the reason it is unknown
// ([Record.Reason]). It also keeps, as the claimer gave them, a digest of
// the arguments the activity checks ([Record.Check], opaque to the store,
// which compares nothing) and the record's own retention window
// ([Record.Retention]).
//
// # States
//
// A live record is in one of three states:
//
//   - [StatePending]: a caller holds the claim and its body may be running.
//   - [StateCompleted]: an outcome is recorded; every later claim gets it.
//   - [StateIndeterminate]: the effect may or may not have happened and
//     nobody can say which; every later claim is refused until a person
//     decides.
//
// A key with no live record is free: never claimed, released, resolved free,
// forgotten, or expired.
//
// # The claim protocol
//
// [Store.Claim] takes a free key in one atomic operation and answers with a
// [Status]: [StatusAcquired] for the caller that now holds it,
// [StatusCompleted] with the recorded outcome, [StatusIndeterminate], or
// [StatusHeld] with the current holder's record. Of any number of concurrent
// claims on a free key, exactly one is acquired.
//
// The holder then ends its claim in one of three ways:
//
//   - [Store.Complete] records the outcome;
//   - [Store.Release] frees the key, as if it had never been claimed (the
//     body failed and may safely run again);
//   - [Store.MarkIndeterminate] records that the effect's outcome is unknown.
//
// While the body runs, the holder extends its lease with [Store.Renew].
//
// A caller that saw StatusHeld waits for the holder with [Store.Wait], which
// returns when the claim ends, is taken over, or its lease runs out. A lease
// that ran out is reported ([Result.LeaseExpired]), never acted on: the
// holder may be slow rather than dead, so the caller decides, and takes the
// claim over explicitly by claiming again with [ClaimParams.Supersede] set to
// the token it saw. A takeover succeeds only against exactly that token, so
// two callers cannot both take over the same dead holder.
//
// An indeterminate record waits for a person: [Store.Resolve] either records
// the outcome they established ([ActionComplete]) or frees the key
// ([ActionFree]). A decision carries who made it, why and a reference
// (ResolveParams.By, Reason, Reference); a completed record keeps them, with
// the action and the time, as its [Resolution], and a new claim of the key
// starts without one. A decision made on one record is fenced by its token
// (ResolveParams.Token): if the key has since been freed, claimed again and
// become indeterminate anew, the late decision gets [ErrNotHolder] and the
// newer record waits for its own. A complete decision whose record expired
// meanwhile records the outcome when ResolveParams.RecordIfGone is set, so
// the effect the person confirmed does not run again. A pending record whose
// holder let its lease run out (a worker that died with the store down,
// after its effect may have landed) is settled the same way, in one fenced
// step bound to the token the person saw, with ResolveParams.Stale.
//
// # Undoing a claim
//
// A durable store may not learn whether a claim took effect: the caller's
// context ends, or the connection breaks, while the statement or script is
// in flight, and the answer (with the new token) never arrives. The store
// then undoes the claim under the token it generated, which only it knows,
// and the rule for that undo is that it removes only what the claim
// created (see [Store.Claim]). A claim of a free key is deleted. A takeover
// is not: it replaced a pending record whose holder may have landed its
// effect, and deleting the takeover would free the key for a second run.
// The store ends the takeover's lease instead, so the next claimer finds
// the key held by a holder presumed gone, as it would have found the
// superseded record.
//
// Ending the lease is one fenced write the store can always make from the
// token alone, and the next caller's path is the same as with the superseded
// record (pending, lease run out). A caller that reads a fact from the holder
// (the dispatcher reads whether a record was only ever held inside
// transactions) must claim a takeover under a holder that keeps that fact.
//
// # Fencing tokens
//
// Every claim gets a fresh, positive token ([NewToken]); a token is never
// reused for the same key. Complete, Release, MarkIndeterminate and Renew
// carry the token and succeed only while the record is pending under exactly
// that token. A holder that was taken over, released, or outlived its
// record's retention gets [ErrNotHolder], and the record stays as it is: a
// late holder cannot overwrite its successor's outcome.
//
// # Retention
//
// A record expires [DefaultTTL] (or the store's configured TTL) after it was
// last written: Claim, Renew, Complete and Resolve start the window again.
// A record claimed with a window of its own ([ClaimParams.Retention]) keeps
// it, and every later write restarts that window instead, whether shorter
// or longer than the store's; Sweep reclaims it when it ends.
// An indeterminate record is the exception: it keeps until a person
// resolves it or its tenant is forgotten (its ExpiresAt is [NeverExpires],
// and Sweep leaves it), so a key whose effect may have landed never reads as
// free while someone decides. An expired record reads as free everywhere (Claim acquires
// the key with a new token, Lookup returns [ErrNotFound], fenced calls return
// [ErrNotHolder]) whether or not it is still physically present;
// [Store.Sweep] reclaims the space. The promise, at most one side effect per
// key, holds within the retention window, so choose one longer than the
// longest replay you intend to support.
//
// # Listing
//
// [Store.List] pages through a tenant's live records, newest or oldest
// first by the time they were claimed (ties broken by key), filtered by
// state, by staleness (pending with the lease run out: the holder is
// presumed dead) and by age ([ListParams]). Its cursor ([Page.Next]) is a
// position, not an offset: a record that stays live while an operator pages
// is listed exactly once however many are claimed or settled meanwhile.
// What waits for a person is
//
//	store.ListParams{Tenant: t, States: []store.State{store.StateIndeterminate, store.StatePending}, Stale: true}
//
// [Store.ListAcrossTenants] is the same across every tenant, for operators
// only; it and [Store.CountBacklog], which counts what waits per activity
// type for a gauge (never per tenant or key), are the methods that cross
// the tenant boundary.
//
// # Tenant scoping
//
// Every record belongs to a tenant, and every method names one, except
// [Store.ListAcrossTenants] and [Store.CountBacklog]. Nothing done through one tenant reads or
// changes a record of another. Tenants and keys
// are compared as bytes: two Unicode spellings of one name are two tenants
// (the keyspace package normalises what it hashes). [Store.Forget] erases a
// tenant's records outright.
//
// # Transactions
//
// A store whose records live in a database an activity's body can write to
// may implement the optional [Transactor] capability: the body runs in a
// transaction of that database, and the outcome is recorded in the same
// transaction, fenced by the claim's token, before it commits. The
// dispatcher detects it for activities declared transactional and refuses
// such a declaration on a store without it ([ErrNotTransactional]). The
// memory store does not implement it.
//
// # Errors
//
// Stores return the sentinel errors of this package, wrapped with context;
// test for them with errors.Is:
//
//   - [ErrNotFound]: the key has no live record (Lookup, Resolve).
//   - [ErrNotHolder]: the token no longer holds a pending claim (or, for a
//     fenced Resolve, the indeterminate record is not the one decided on).
//   - [ErrNotIndeterminate]: Resolve on a record that is not indeterminate
//     (nor, with ResolveParams.Stale, stale).
//   - [ErrLeaseLive]: Resolve with ResolveParams.Stale on a pending record
//     whose holder's lease has not run out.
//   - [ErrUnavailable]: the store could not be reached; it never reads as
//     permission to run an effect. Stores wrap backend failures with
//     [Unavailable].
//   - [ErrInvalid]: malformed parameters, as an [*InvalidError] naming the
//     field; nothing was written.
//
// A cancelled or expired context returns an error matching the context's
// error; a claim it interrupts is undone as "Undoing a claim" describes.
//
// # For implementers
//
// A user of the library calls a store's methods with their parameters and
// reads what comes back: records, statuses, pages and errors. The names
// below are for whoever implements [Store] (the PostgreSQL, Redis and
// memory stores, or another), so that every implementation answers alike;
// a user need not read them. They are in implement.go and serverclock.go,
// apart from the contract:
//
//   - answers and tokens: [ResultOf], [NewToken], [Unavailable],
//     [ResolveHolder] and [ResolveParams.Resolution];
//   - retention: [RetentionOr];
//   - listings: [ListPosition], [PositionOf], [ListPosition.Cursor],
//     [ListParams.After], [ComparePosition] and [Order.Beyond], and, for a
//     store that counts in Go, [Tally] and [SortBacklog];
//   - the store's clock: [ServerClock] and [NewServerClock];
//   - reading parameters: each one's Validate, [ListParams.EffectiveLimit],
//     [ListParams.EffectiveStates], [ListParams.Keeps],
//     [ListParams.ValidateAcrossTenants] and [SweepParams.EffectiveLimit].
//
// Package storetest checks an implementation against the contract.
package store
