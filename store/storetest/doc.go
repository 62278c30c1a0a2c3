// Package storetest is the conformance suite for [store.Store]
// implementations. A store proves it keeps the contract by passing it:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, cfg storetest.Config) store.Store {
//			s, err := mystore.New(mystore.Options{
//				Prefix: testenv.UniqueName("conformance"), // records of its own
//				TTL:    cfg.TTL,
//				Clock:  cfg.Clock,
//			})
//			require.NoError(t, err)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// [Run] builds a fresh store for every case and hands it a fake [Clock]
// that the case moves by hand to pass leases and retention windows, so the
// store must read the time from [Config.Clock] and never from its backend.
// Cases run in parallel; each store must share no records with the others.
// Times are compared to within a millisecond, so stores that keep
// milliseconds or microseconds pass.
//
// # Areas
//
// The cases are grouped by area, one file each:
//
//   - Claim: acquisition, held claims, 64 racing callers with exactly one
//     winner, claims on completed and indeterminate keys, lease expiry,
//     takeover with Supersede, cancelled contexts.
//   - Fence: every fenced call with a wrong, stale, released, completed,
//     marked or superseded token is refused with store.ErrNotHolder and
//     leaves the record as it was; Renew; a holder keeps its claim after its
//     lease runs out until somebody takes it over.
//   - Wait: waking on complete, release, mark, takeover and Forget; lease
//     expiry by the fake clock; expiry; context deadlines.
//   - Resolve: both decisions, and refusals on pending, completed, missing
//     and expired records.
//   - Tenant: isolation of every method, Forget, tenants and keys that a
//     store joining strings or matching patterns would confuse, Unicode
//     compared as bytes.
//   - Retention: expiry of every state, windows restarted by Complete,
//     MarkIndeterminate and Resolve, Sweep and its limit.
//   - Outcome: every byte value, NUL bytes, invalid UTF-8, 1 MiB, nil and
//     empty outcomes round-trip exactly, and callers cannot mutate records.
//   - Validation: every method refuses malformed parameters with
//     store.ErrInvalid naming the field, and writes nothing.
//
// The suite asks nothing of a store beyond the contract, so there is no way
// to opt out of a case: a store that cannot pass one does not keep the
// contract.
//
// # The transactional capability
//
// A store that also implements [store.Transactor] proves it with
// [RunTransactor], given a way to make and count an effect in its database
// ([Transactional]): commits land the record and the effect together,
// rollbacks neither, a commit whose claim was taken over, released,
// completed or marked is refused with store.ErrNotHolder and lands nothing,
// and a waiting duplicate is woken with the committed outcome. A store
// without the capability does not run it; the dispatcher refuses
// transactional declarations on it.
//
// # Every store also runs
//
// [Replicas], two replicas of the store (their own clients, one backend)
// racing 10,000 claims over 1,000 keys: one winner per key, every loser
// with the winner's outcome. And [Benchmark], the store's Claim and
// Complete against its [Floor] (the same job written by hand on the same
// client), reported as one metric, lib/floor, so the stores' figures
// compare (go test -run '^$' -bench BenchmarkStore ./store/ ./pgstore/
// ./redisstore/).
package storetest
