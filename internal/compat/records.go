package compat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// RecordsFile is the name of a store set's file of the records it holds, as
// the store that wrote them read them back.
const RecordsFile = "records.json"

// Epoch is the store clock's time when [WriteRecords] writes a set's first
// record. A fixed time keeps a set's timestamps the same from one run to the
// next; only the fencing tokens, random, differ.
var Epoch = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// The tenants of the records: a plain one, and one a store must keep byte
// for byte through whatever it encodes tenants with (the Redis store's
// base64url hash tag).
const (
	TenantPlain   = "acme"
	TenantUnicode = "zürich-ä"
)

// The outcomes the records hold. OutcomeConfirmation is what
// interceptor.EncodeOutcome made, at r1, of the string "CONF-BA117-Ada"
// with the default data converter (a json/plain payload in protobuf wire
// form); OutcomeBinary holds a NUL, bytes that are not UTF-8 and a
// trailing space, which a store must keep exactly.
var (
	OutcomeConfirmation = []byte("\n*\n\x16\n\bencoding\x12\njson/plain\x12\x10\"CONF-BA117-Ada\"")
	OutcomeBinary       = []byte("\x00\x01\xfe\xff seat 12A \xc3\x28 ")
	OutcomeDecided      = []byte("\n*\n\x16\n\bencoding\x12\njson/plain\x12\x10\"CONF-LH400-Bob\"")
)

// Record is a store.Record as a set keeps it, named.
type Record struct {
	// Name says which record of the set it is ("completed", "pending", …).
	Name       string           `json:"name"`
	Tenant     string           `json:"tenant"`
	Key        string           `json:"key"`
	State      string           `json:"state"`
	Holder     string           `json:"holder"`
	Token      int64            `json:"token"`
	LeaseUntil time.Time        `json:"lease_until"`
	ExpiresAt  time.Time        `json:"expires_at"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
	Outcome    []byte           `json:"outcome,omitempty"`
	Reason     string           `json:"reason"`
	Origin     store.Origin     `json:"origin"`
	Resolution store.Resolution `json:"resolution"`
	// Check and Retention are kept since r2.
	Check     string        `json:"check,omitempty"`
	Retention time.Duration `json:"retention,omitempty"`
}

// Records is a store set's records file.
type Records struct {
	// Now is the store clock's time after the last write: a reader reads
	// at this time, when the "pending" record is within its lease and the
	// "stale" one past it.
	Now     time.Time `json:"now"`
	Records []Record  `json:"records"`
}

// find returns the record named name, if the set holds it.
func (rs Records) find(name string) (Record, bool) {
	for _, r := range rs.Records {
		if r.Name == name {
			return r, true
		}
	}
	return Record{}, false
}

// ByName returns the record named name.
func (rs Records) ByName(t testing.TB, name string) Record {
	t.Helper()
	for _, r := range rs.Records {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("compat: no record named %q", name)
	return Record{}
}

func recordOf(name string, r store.Record) Record {
	return Record{
		Name: name, Tenant: r.Tenant, Key: r.Key, State: r.State.String(), Holder: r.Holder, Token: r.Token,
		LeaseUntil: r.LeaseUntil.UTC(), ExpiresAt: r.ExpiresAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Outcome: nilIfEmpty(r.Outcome), Reason: r.Reason, Origin: r.Origin, Resolution: resolutionUTC(r.Resolution),
		Check: r.Check, Retention: r.Retention,
	}
}

func resolutionUTC(r store.Resolution) store.Resolution {
	if !r.At.IsZero() {
		r.At = r.At.UTC()
	}
	return r
}

// sameRecord checks that got, as a store returned it, is want exactly. It
// compares the two as JSON text, which spells every field (tokens to the
// last digit, times to the nanosecond).
func sameRecord(t testing.TB, want Record, got store.Record, msgAndArgs ...any) {
	t.Helper()
	assert.Equal(t, string(MarshalIndent(t, want)), string(MarshalIndent(t, recordOf(want.Name, got))), msgAndArgs...)
}

// origin returns the origin of the record named name, as the dispatcher
// writes one.
func origin(name, activityType string) store.Origin {
	return store.Origin{
		WorkflowID:   "booking/" + name,
		RunID:        "0193a1b2-c3d4-7e5f-8a9b-" + fmt.Sprintf("%012x", len(name)),
		ActivityType: activityType,
		ActivityID:   "5",
		Attempt:      1,
	}
}

// check returns the digest of a checked fare, as the dispatcher derives
// one for a declaration that checks "fare".
func check(t testing.TB, tenant, activityType, flight, fare string) string {
	t.Helper()
	c, err := keyspace.DeriveCheck(keyspace.CheckInput{
		Tenant: tenant, Run: "0193a1b2-c3d4-7e5f-8a9b-000000000001", Activity: activityType,
		Arguments: map[string]any{"flight": flight, "fare": fare}, Names: []string{"fare"},
	})
	require.NoError(t, err)
	return string(c)
}

func key(t testing.TB, tenant, activityType, flight string) string {
	t.Helper()
	k, err := keyspace.Derive(keyspace.Input{
		Tenant: tenant, Run: "0193a1b2-c3d4-7e5f-8a9b-000000000001", Activity: activityType,
		Arguments: map[string]any{"flight": flight, "request_id": "r-1"}, KeyArguments: []string{"flight"},
	})
	require.NoError(t, err)
	return string(k)
}

// WriteRecords writes a set's records through st, whose clock is clock, and
// returns them as st reads them back. The clock starts at [Epoch] and
// moves a second between writes. The records:
//
//	completed              claimed with an origin, completed with an outcome
//	pending                claimed, within its lease at Records.Now
//	stale                  claimed, its lease run out at Records.Now
//	indeterminate          claimed, marked indeterminate
//	resolved               marked, then completed by a person's decision (its Resolution)
//	indeterminate-unicode  marked, in the tenant with non-ASCII bytes
//	completed-no-origin    claimed without an origin, completed with binary bytes
//	completed-empty        completed without an outcome (an activity that returns only an error)
//	recorded-if-gone       made by a decision on a key with no record (RecordIfGone)
//
// and, from r2, records that keep a check digest and a retention window
// of their own:
//
//	completed-checked      claimed with both, completed
//	pending-kept           claimed with both, within its lease at Records.Now
//	recorded-if-gone-kept  made by a decision on a gone key, with both
func WriteRecords(t testing.TB, st store.Store, clock *storetest.Clock) Records {
	t.Helper()
	ctx := context.Background()
	clock.Set(Epoch)
	step := func() { clock.Advance(time.Second) }
	keys := map[string]struct{ tenant, key string }{}
	var kept *store.ClaimParams // the check and retention of the next claim
	claim := func(name, tenant, activityType, flight string, lease time.Duration, withOrigin bool) int64 {
		t.Helper()
		p := store.ClaimParams{Tenant: tenant, Key: key(t, tenant, activityType, flight),
			Holder: fmt.Sprintf("%016x:1:4242@worker-%s", len(name)*0x1f1f1f, name), Lease: lease}
		if withOrigin {
			p.Origin = origin(name, activityType)
		}
		if kept != nil {
			p.Check, p.Retention, kept = kept.Check, kept.Retention, nil
		}
		res, err := st.Claim(ctx, p)
		require.NoError(t, err, name)
		require.Equal(t, store.StatusAcquired, res.Status, name)
		keys[name] = struct{ tenant, key string }{tenant, p.Key}
		step()
		return res.Record.Token
	}
	complete := func(name string, token int64, outcome []byte) {
		t.Helper()
		k := keys[name]
		require.NoError(t, st.Complete(ctx, store.CompleteParams{Tenant: k.tenant, Key: k.key, Token: token, Outcome: outcome}), name)
		step()
	}
	mark := func(name string, token int64, reason string) {
		t.Helper()
		k := keys[name]
		require.NoError(t, st.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: k.tenant, Key: k.key, Token: token, Reason: reason}), name)
		step()
	}

	tok := claim("completed", TenantPlain, "Book", "BA117", 30*time.Second, true)
	complete("completed", tok, OutcomeConfirmation)

	claim("pending", TenantPlain, "Book", "BA118", time.Hour, true)

	claim("stale", TenantPlain, "Charge", "card-4242", time.Second, true)

	tok = claim("indeterminate", TenantPlain, "Book", "BA119", 30*time.Second, true)
	mark("indeterminate", tok, "body_failed: read tcp 10.0.0.7:51234->10.0.0.9:443: connection reset by peer")

	tok = claim("resolved", TenantPlain, "Charge", "card-1111", 30*time.Second, true)
	mark("resolved", tok, "holder_lost: holder stopped answering without recording an outcome")
	k := keys["resolved"]
	require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: k.tenant, Key: k.key, Token: tok,
		Decision: store.ActionComplete, Outcome: OutcomeDecided,
		By: "ops@acme", Reason: "the bank confirmed the charge", Reference: "TICKET-7"}))
	step()

	tok = claim("indeterminate-unicode", TenantUnicode, "Charge", "karte-ä", 30*time.Second, true)
	mark("indeterminate-unicode", tok, "store_unavailable: Complete: dial tcp: connection refused")

	tok = claim("completed-no-origin", TenantUnicode, "Book", "LX318", 30*time.Second, false)
	complete("completed-no-origin", tok, OutcomeBinary)

	tok = claim("completed-empty", TenantUnicode, "Notify", "mail-9", 30*time.Second, true)
	complete("completed-empty", tok, nil)

	gone := struct{ tenant, key string }{TenantUnicode, key(t, TenantUnicode, "Book", "LH400")}
	require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: gone.tenant, Key: gone.key,
		Decision: store.ActionComplete, Outcome: OutcomeDecided, RecordIfGone: true,
		By: "ops@zürich", Reason: "the airline confirmed after the record expired", Reference: "PNR 5XK2"}))
	keys["recorded-if-gone"] = gone
	step()

	kept = &store.ClaimParams{Check: check(t, TenantPlain, "Book", "BA120", "120.50"), Retention: 72 * time.Hour}
	tok = claim("completed-checked", TenantPlain, "Book", "BA120", 30*time.Second, true)
	complete("completed-checked", tok, OutcomeConfirmation)

	kept = &store.ClaimParams{Check: check(t, TenantUnicode, "Charge", "karte-ö", "99"), Retention: 90 * time.Minute}
	claim("pending-kept", TenantUnicode, "Charge", "karte-ö", time.Hour, true)

	gone = struct{ tenant, key string }{TenantPlain, key(t, TenantPlain, "Book", "LH401")}
	require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: gone.tenant, Key: gone.key,
		Decision: store.ActionComplete, Outcome: OutcomeDecided, RecordIfGone: true,
		Check: check(t, TenantPlain, "Book", "LH401", "310"), Retention: 48 * time.Hour,
		By: "ops@acme", Reason: "confirmed by the airline", Reference: "PNR 7QW1"}))
	keys["recorded-if-gone-kept"] = gone
	step()

	// A minute on: the stale record's one-second lease has run out, the
	// pending one's hour has not.
	clock.Advance(time.Minute)
	out := Records{Now: clock.Now().UTC()}
	for _, name := range []string{"completed", "pending", "stale", "indeterminate", "resolved",
		"indeterminate-unicode", "completed-no-origin", "completed-empty", "recorded-if-gone",
		"completed-checked", "pending-kept", "recorded-if-gone-kept"} {
		k := keys[name]
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: k.tenant, Key: k.key})
		require.NoError(t, err, name)
		out.Records = append(out.Records, recordOf(name, rec))
	}
	return out
}

// Tokens maps every token of rs to a placeholder naming its record, for
// comparing what two writes of the same records hold: tokens are random.
func (rs Records) Tokens() map[int64]string {
	m := make(map[int64]string, len(rs.Records))
	for _, r := range rs.Records {
		m[r.Token] = "<token of " + r.Name + ">"
	}
	return m
}

func listAll(ctx context.Context, t testing.TB, list func(context.Context, store.ListParams) (store.Page, error), p store.ListParams) []store.Record {
	t.Helper()
	var out []store.Record
	for {
		page, err := list(ctx, p)
		require.NoError(t, err)
		out = append(out, page.Records...)
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
}

// newestFirst sorts records as a NewestFirst listing orders them.
func newestFirst(rs []Record) []Record {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Record) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.Tenant, a.Tenant), cmp.Compare(b.Key, a.Key))
	})
	return rs
}

func names(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// listed names the records of got by want's keys.
func listed(want []Record, got []store.Record) []string {
	byKey := map[string]string{}
	for _, r := range want {
		byKey[r.Tenant+"\x00"+r.Key] = r.Name
	}
	out := make([]string, len(got))
	for i, r := range got {
		n, ok := byKey[r.Tenant+"\x00"+r.Key]
		if !ok {
			n = fmt.Sprintf("unknown record %q/%q", r.Tenant, r.Key)
		}
		out[i] = n
	}
	return out
}

func storeState(t testing.TB, s string) store.State {
	t.Helper()
	st, err := store.ParseState(s)
	require.NoError(t, err)
	return st
}

func toStore(t testing.TB, r Record) store.Record {
	return store.Record{Tenant: r.Tenant, Key: r.Key, State: storeState(t, r.State), Holder: r.Holder, Token: r.Token,
		LeaseUntil: r.LeaseUntil, ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Outcome: r.Outcome, Reason: r.Reason, Origin: r.Origin, Resolution: r.Resolution,
		Check: r.Check, Retention: r.Retention}
}

// CheckReads checks that st, holding a set's records loaded as the store
// that wrote them left them, and whose clock is clock, reads them exactly:
// Lookup returns each as it was; List, ListAcrossTenants and CountBacklog
// see them; a duplicate claim of a completed key receives its outcome, a
// pending record within its lease is held, a stale one is reported with its
// lease run out, an indeterminate one is honoured; and none of that changes
// a record.
func CheckReads(t *testing.T, st store.Store, clock *storetest.Clock, rs Records) {
	t.Helper()
	ctx := context.Background()
	clock.Set(rs.Now)
	for _, want := range rs.Records {
		got, err := st.Lookup(ctx, store.LookupParams{Tenant: want.Tenant, Key: want.Key})
		if assert.NoError(t, err, "Lookup %s", want.Name) {
			sameRecord(t, want, got, "Lookup %s", want.Name)
		}
	}

	byTenant := map[string][]Record{}
	for _, r := range rs.Records {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], r)
	}
	for tenant, want := range byTenant {
		got := listAll(ctx, t, st.List, store.ListParams{Tenant: tenant, Limit: store.MaxListLimit})
		assert.Equal(t, names(newestFirst(want)), listed(want, got), "List of tenant %q", tenant)
		for _, g := range got {
			for _, w := range want {
				if w.Key == g.Key {
					sameRecord(t, w, g, "List of tenant %q: %s", tenant, w.Name)
				}
			}
		}
		var waiting []Record
		for _, r := range want {
			if r.State == "indeterminate" || (r.State == "pending" && !rs.Now.Before(r.LeaseUntil)) {
				waiting = append(waiting, r)
			}
		}
		got = listAll(ctx, t, st.List, store.ListParams{Tenant: tenant, Limit: store.MaxListLimit,
			States: []store.State{store.StateIndeterminate, store.StatePending}, Stale: true})
		assert.Equal(t, names(newestFirst(waiting)), listed(want, got), "what waits for a person in tenant %q", tenant)
	}
	got := listAll(ctx, t, st.ListAcrossTenants, store.ListParams{Limit: store.MaxListLimit})
	assert.Equal(t, names(newestFirst(rs.Records)), listed(rs.Records, got), "ListAcrossTenants")

	counts := map[string]*store.BacklogCount{}
	for _, r := range rs.Records {
		store.Tally(counts, toStore(t, r), rs.Now)
	}
	backlog, err := st.CountBacklog(ctx)
	require.NoError(t, err)
	assert.Equal(t, store.SortBacklog(counts), backlog, "CountBacklog")

	for _, want := range rs.Records {
		res, err := st.Claim(ctx, store.ClaimParams{Tenant: want.Tenant, Key: want.Key, Holder: "compat-reader",
			Lease: time.Minute, Origin: origin("reader", "Book")})
		if !assert.NoError(t, err, "Claim %s", want.Name) {
			continue
		}
		switch {
		case want.State == "completed":
			if assert.Equal(t, store.StatusCompleted, res.Status, "a duplicate of %s", want.Name) {
				assert.Equal(t, want.Outcome, nilIfEmpty(res.Record.Outcome), "a duplicate of %s receives its outcome", want.Name)
			}
		case want.State == "indeterminate":
			if assert.Equal(t, store.StatusIndeterminate, res.Status, "a duplicate of %s", want.Name) {
				assert.Equal(t, want.Token, res.Record.Token, "%s: the token a decision is fenced by", want.Name)
				assert.Equal(t, want.Reason, res.Record.Reason, want.Name)
			}
		case rs.Now.Before(want.LeaseUntil):
			assert.Equal(t, store.StatusHeld, res.Status, "a duplicate of %s, within its lease, is held", want.Name)
			assert.False(t, res.LeaseExpired, want.Name)
			assert.Equal(t, want.Token, res.Record.Token, want.Name)
		default:
			assert.Equal(t, store.StatusHeld, res.Status, "a duplicate of %s, its lease run out, is held", want.Name)
			assert.True(t, res.LeaseExpired, "%s: the lease ran out", want.Name)
			assert.Equal(t, want.Token, res.Record.Token, want.Name)
		}
	}
	for _, want := range rs.Records {
		got, err := st.Lookup(ctx, store.LookupParams{Tenant: want.Tenant, Key: want.Key})
		if assert.NoError(t, err, "Lookup %s after the duplicates", want.Name) {
			sameRecord(t, want, got, "duplicate claims changed %s", want.Name)
		}
	}
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// CheckWrites checks that the current code settles a set's records as the
// contract says, st holding them loaded and clock being its clock: the
// pending record's holder renews and completes it; the stale one is taken
// over (Supersede) and released; the indeterminate ones are resolved, one
// complete and one free, each fenced by the token the set holds.
func CheckWrites(t *testing.T, st store.Store, clock *storetest.Clock, rs Records) {
	t.Helper()
	ctx := context.Background()
	clock.Set(rs.Now)

	p := rs.ByName(t, "pending")
	_, err := st.Renew(ctx, store.RenewParams{Tenant: p.Tenant, Key: p.Key, Token: p.Token, Lease: 2 * time.Hour})
	require.NoError(t, err, "the holder of the pending record renews it")
	require.NoError(t, st.Complete(ctx, store.CompleteParams{Tenant: p.Tenant, Key: p.Key, Token: p.Token, Outcome: OutcomeConfirmation}),
		"the holder of the pending record completes it")
	rec, err := st.Lookup(ctx, store.LookupParams{Tenant: p.Tenant, Key: p.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, OutcomeConfirmation, rec.Outcome)
	assert.Equal(t, p.Origin, rec.Origin, "the origin the old claim wrote stays")

	if k, ok := rs.find("pending-kept"); ok {
		// Its own window, not the store's TTL, restarts with each write.
		_, err := st.Renew(ctx, store.RenewParams{Tenant: k.Tenant, Key: k.Key, Token: k.Token, Lease: time.Minute})
		require.NoError(t, err, "the holder of pending-kept renews it")
		require.NoError(t, st.Complete(ctx, store.CompleteParams{Tenant: k.Tenant, Key: k.Key, Token: k.Token, Outcome: OutcomeConfirmation}))
		rec, err := st.Lookup(ctx, store.LookupParams{Tenant: k.Tenant, Key: k.Key})
		require.NoError(t, err)
		assert.Equal(t, k.Check, rec.Check, "pending-kept keeps its check")
		assert.Equal(t, k.Retention, rec.Retention, "pending-kept keeps its retention")
		assert.WithinDuration(t, rs.Now.Add(k.Retention), rec.ExpiresAt, time.Millisecond, "pending-kept expires by its own window")
	}

	s := rs.ByName(t, "stale")
	res, err := st.Claim(ctx, store.ClaimParams{Tenant: s.Tenant, Key: s.Key, Holder: "compat-reader", Lease: time.Minute, Supersede: s.Token})
	require.NoError(t, err)
	require.Equal(t, store.StatusAcquired, res.Status, "the stale record is taken over")
	assert.NotEqual(t, s.Token, res.Record.Token)
	require.ErrorIs(t, st.Complete(ctx, store.CompleteParams{Tenant: s.Tenant, Key: s.Key, Token: s.Token}), store.ErrNotHolder,
		"the old holder is fenced off")
	require.NoError(t, st.Release(ctx, store.ReleaseParams{Tenant: s.Tenant, Key: s.Key, Token: res.Record.Token}))
	_, err = st.Lookup(ctx, store.LookupParams{Tenant: s.Tenant, Key: s.Key})
	assert.ErrorIs(t, err, store.ErrNotFound)

	ind := rs.ByName(t, "indeterminate")
	require.ErrorIs(t, st.Resolve(ctx, store.ResolveParams{Tenant: ind.Tenant, Key: ind.Key, Token: ind.Token + 1,
		Decision: store.ActionFree}), store.ErrNotHolder, "a decision fenced by another token")
	require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: ind.Tenant, Key: ind.Key, Token: ind.Token,
		Decision: store.ActionComplete, Outcome: OutcomeDecided, By: "ops@acme", Reason: "confirmed", Reference: "T-1"}))
	rec, err = st.Lookup(ctx, store.LookupParams{Tenant: ind.Tenant, Key: ind.Key})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, OutcomeDecided, rec.Outcome)
	trail := resolutionUTC(rec.Resolution)
	assert.Equal(t, store.Resolution{Action: store.ActionComplete, By: "ops@acme", Reason: "confirmed", Reference: "T-1", At: rs.Now},
		trail, "the decision's trail, at the store's clock")
	res, err = st.Claim(ctx, store.ClaimParams{Tenant: ind.Tenant, Key: ind.Key, Holder: "compat-reader", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusCompleted, res.Status)
	assert.Equal(t, OutcomeDecided, res.Record.Outcome, "a duplicate receives the decided outcome")

	u := rs.ByName(t, "indeterminate-unicode")
	require.NoError(t, st.Resolve(ctx, store.ResolveParams{Tenant: u.Tenant, Key: u.Key, Token: u.Token, Decision: store.ActionFree}))
	_, err = st.Lookup(ctx, store.LookupParams{Tenant: u.Tenant, Key: u.Key})
	assert.ErrorIs(t, err, store.ErrNotFound)
	res, err = st.Claim(ctx, store.ClaimParams{Tenant: u.Tenant, Key: u.Key, Holder: "compat-reader", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, store.StatusAcquired, res.Status, "a freed key runs again")
}

// CheckRetention checks that the current code expires, sweeps and forgets
// a set's records as the contract says, st holding them loaded and clock
// being its clock: past every retention window, Sweep deletes all but the
// indeterminate records (which never expire), and Forget erases those.
func CheckRetention(t *testing.T, st store.Store, clock *storetest.Clock, rs Records) {
	t.Helper()
	ctx := context.Background()
	var last time.Time
	for _, r := range rs.Records {
		if r.State != "indeterminate" && r.ExpiresAt.After(last) {
			last = r.ExpiresAt
		}
	}
	clock.Set(last.Add(time.Second))
	left := map[string]int{}
	expired := 0
	for _, r := range rs.Records {
		if r.State == "indeterminate" {
			left[r.Tenant]++
		} else {
			expired++
		}
	}
	swept := 0
	for {
		n, err := st.Sweep(ctx, store.SweepParams{Limit: 2})
		require.NoError(t, err)
		if n == 0 {
			break
		}
		swept += n
	}
	assert.Equal(t, expired, swept, "Sweep deletes every expired record, and only those")
	for _, r := range rs.Records {
		_, err := st.Lookup(ctx, store.LookupParams{Tenant: r.Tenant, Key: r.Key})
		if r.State == "indeterminate" {
			assert.NoError(t, err, "%s never expires", r.Name)
		} else {
			assert.True(t, errors.Is(err, store.ErrNotFound), "%s expired: %v", r.Name, err)
		}
	}
	for tenant, n := range left {
		erased, err := st.Forget(ctx, store.ForgetParams{Tenant: tenant})
		require.NoError(t, err)
		assert.Equal(t, n, erased, "Forget of tenant %q", tenant)
	}
	got := listAll(ctx, t, st.ListAcrossTenants, store.ListParams{Limit: store.MaxListLimit})
	assert.Empty(t, got, "nothing is left")
}
