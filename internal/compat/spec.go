package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/store/storetest"
)

// The records scenarios of the specification's vectors
// (spec/vectors/records-postgres.json and records-redis.json, see
// spec/SPEC.md): short sequences of store operations, each on a key of its
// own, run through a real store whose clock is a storetest.Clock, after
// which the store's package reads the key's record back as the backend
// holds it (a row, a packed string). The clock starts at [Epoch] and moves
// only where a step says so, so every time is the same from one run to the
// next. Tokens are random: each is written "{{token1}}", "{{token2}}", … in
// the order they first appear in the scenario (a claim's answer, a
// token a step names, the token of a record a decision wrote), in the
// steps and in the record alike.

// SpecStep is one operation of a scenario, with the store clock's time it
// ran at, its parameters and its answer. Op is claim, renew, complete,
// release, mark_indeterminate, resolve, lookup, or advance (the clock
// moves Params["ms"] milliseconds; no store call).
type SpecStep struct {
	Op     string         `json:"op"`
	At     string         `json:"at,omitempty"`
	Params map[string]any `json:"params"`
	Result map[string]any `json:"result,omitempty"`
}

// SpecScenario is one scenario: its steps and the record its key is left
// with (Record, filled by the store's package; null when the key has no
// record).
type SpecScenario struct {
	Name   string     `json:"name"`
	About  string     `json:"about"`
	Tenant string     `json:"tenant"`
	Key    string     `json:"key"`
	Steps  []SpecStep `json:"steps"`
	Record any        `json:"record"`
}

// SpecTTL is the store's retention window (its TTL option) in the
// scenarios: the default, 24 hours.
const SpecTTL = store.DefaultTTL

// SpecMasker replaces the tokens a scenario's claims issued by their
// placeholders.
type SpecMasker struct{ tokens []int64 }

// Mask returns s with every token's decimal text replaced.
func (m *SpecMasker) Mask(s string) string {
	for i, tok := range m.tokens {
		s = strings.ReplaceAll(s, strconv.FormatInt(tok, 10), "{{token"+strconv.Itoa(i+1)+"}}")
	}
	return s
}

func (m *SpecMasker) token(tok int64) string {
	for i, t := range m.tokens {
		if t == tok {
			return "{{token" + strconv.Itoa(i+1) + "}}"
		}
	}
	m.tokens = append(m.tokens, tok)
	return "{{token" + strconv.Itoa(len(m.tokens)) + "}}"
}

// specRun runs one scenario's steps.
type specRun struct {
	t     testing.TB
	st    store.Store
	clock *storetest.Clock
	sc    *SpecScenario
	mask  *SpecMasker
}

func (r *specRun) at() string { return r.clock.Now().UTC().Format(time.RFC3339Nano) }

func errName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{store.ErrNotFound, "not_found"}, {store.ErrNotHolder, "not_holder"}, {store.ErrNotIndeterminate, "not_indeterminate"},
		{store.ErrLeaseLive, "lease_live"}, {store.ErrInvalid, "invalid"}, {store.ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return "other: " + err.Error()
}

func (r *specRun) step(op string, params map[string]any, call func() (map[string]any, error)) map[string]any {
	r.t.Helper()
	s := SpecStep{Op: op, At: r.at(), Params: params}
	res, err := call()
	if err != nil {
		res = map[string]any{"error": errName(err)}
	}
	s.Result = res
	r.sc.Steps = append(r.sc.Steps, s)
	return res
}

func (r *specRun) advance(d time.Duration) {
	r.clock.Advance(d)
	r.sc.Steps = append(r.sc.Steps, SpecStep{Op: "advance", Params: map[string]any{"ms": d.Milliseconds()}})
}

func (r *specRun) claim(p store.ClaimParams) int64 {
	r.t.Helper()
	p.Tenant, p.Key = r.sc.Tenant, r.sc.Key
	params := map[string]any{"holder": p.Holder, "lease_ms": p.Lease.Milliseconds()}
	if p.Origin != (store.Origin{}) {
		params["origin"] = p.Origin
	}
	if p.Check != "" {
		params["check"] = p.Check
	}
	if p.Retention != 0 {
		params["retention_ms"] = p.Retention.Milliseconds()
	}
	if p.Supersede != 0 {
		params["supersede"] = r.mask.token(p.Supersede)
	}
	var tok int64
	r.step("claim", params, func() (map[string]any, error) {
		res, err := r.st.Claim(context.Background(), p)
		if err != nil {
			return nil, err
		}
		tok = res.Record.Token
		out := map[string]any{"status": res.Status.String(), "token": r.mask.token(res.Record.Token)}
		if res.Status == store.StatusHeld {
			out["lease_expired"] = res.LeaseExpired
		}
		if res.Status == store.StatusCompleted {
			out["outcome_hex"] = fmt.Sprintf("%x", res.Record.Outcome)
		}
		return out, nil
	})
	return tok
}

func (r *specRun) complete(tok int64, outcome []byte) {
	r.t.Helper()
	r.step("complete", map[string]any{"token": r.mask.token(tok), "outcome_hex": fmt.Sprintf("%x", outcome)}, func() (map[string]any, error) {
		return map[string]any{}, r.st.Complete(context.Background(), store.CompleteParams{Tenant: r.sc.Tenant, Key: r.sc.Key, Token: tok, Outcome: outcome})
	})
}

func (r *specRun) renew(tok int64, lease time.Duration) {
	r.t.Helper()
	r.step("renew", map[string]any{"token": r.mask.token(tok), "lease_ms": lease.Milliseconds()}, func() (map[string]any, error) {
		rec, err := r.st.Renew(context.Background(), store.RenewParams{Tenant: r.sc.Tenant, Key: r.sc.Key, Token: tok, Lease: lease})
		if err != nil {
			return nil, err
		}
		return map[string]any{"lease_until": rec.UTC().Format(time.RFC3339Nano)}, nil
	})
}

func (r *specRun) release(tok int64) {
	r.t.Helper()
	r.step("release", map[string]any{"token": r.mask.token(tok)}, func() (map[string]any, error) {
		return map[string]any{}, r.st.Release(context.Background(), store.ReleaseParams{Tenant: r.sc.Tenant, Key: r.sc.Key, Token: tok})
	})
}

func (r *specRun) mark(tok int64, reason string) {
	r.t.Helper()
	r.step("mark_indeterminate", map[string]any{"token": r.mask.token(tok), "reason": reason}, func() (map[string]any, error) {
		return map[string]any{}, r.st.MarkIndeterminate(context.Background(),
			store.MarkIndeterminateParams{Tenant: r.sc.Tenant, Key: r.sc.Key, Token: tok, Reason: reason})
	})
}

func (r *specRun) resolve(p store.ResolveParams) {
	r.t.Helper()
	p.Tenant, p.Key = r.sc.Tenant, r.sc.Key
	params := map[string]any{"decision": string(p.Decision), "by": p.By, "reason": p.Reason, "reference": p.Reference}
	if p.Token != 0 {
		params["token"] = r.mask.token(p.Token)
	}
	if len(p.Outcome) > 0 {
		params["outcome_hex"] = fmt.Sprintf("%x", p.Outcome)
	}
	if p.RecordIfGone {
		params["record_if_gone"] = true
	}
	if p.Check != "" {
		params["check"] = p.Check
	}
	if p.Retention != 0 {
		params["retention_ms"] = p.Retention.Milliseconds()
	}
	if p.Stale {
		params["stale"] = true
	}
	r.step("resolve", params, func() (map[string]any, error) {
		if err := r.st.Resolve(context.Background(), p); err != nil {
			return nil, err
		}
		// A record a decision wrote on a gone key has a token the store
		// chose: it is masked as the next placeholder.
		if rec, err := r.st.Lookup(context.Background(), store.LookupParams{Tenant: p.Tenant, Key: p.Key}); err == nil {
			r.mask.token(rec.Token)
		}
		return map[string]any{}, nil
	})
}

// SpecScenarios runs the scenarios through st, whose clock is clock, and
// returns them with their Record filled by snapshot (called after each
// scenario's last step with its tenant, key and token masker; it returns
// nil when the key has no record).
func SpecScenarios(t testing.TB, st store.Store, clock *storetest.Clock, snapshot func(tenant, key string, m *SpecMasker) any) []SpecScenario {
	t.Helper()
	origin := func(n int) store.Origin {
		return store.Origin{WorkflowID: "booking/" + strconv.Itoa(n), RunID: "0193a1b2-c3d4-7e5f-8a9b-00000000000" + strconv.Itoa(n%10),
			ActivityType: "Book", ActivityID: "5", Attempt: 1}
	}
	holder := func(n int) string { return fmt.Sprintf("%016x:1:4242@worker-%d", n*0x1f1f1f, n) }
	var out []SpecScenario
	run := func(name, about, tenant, flight string, body func(r *specRun)) {
		t.Helper()
		clock.Set(Epoch)
		sc := SpecScenario{Name: name, About: about, Tenant: tenant, Key: key(t, tenant, "Book", flight), Steps: []SpecStep{}}
		r := &specRun{t: t, st: st, clock: clock, sc: &sc, mask: &SpecMasker{}}
		body(r)
		sc.Record = snapshot(sc.Tenant, sc.Key, r.mask)
		out = append(out, sc)
	}

	run("claim", "a claim of a free key: a pending record", TenantPlain, "SC-01", func(r *specRun) {
		r.claim(store.ClaimParams{Holder: holder(1), Lease: 30 * time.Second, Origin: origin(1)})
	})
	run("claim-no-origin", "a claim without an origin (the origin columns or member stay empty)", TenantPlain, "SC-02", func(r *specRun) {
		r.claim(store.ClaimParams{Holder: holder(2), Lease: 30 * time.Second})
	})
	run("complete", "claim, then complete with a value's outcome a second later", TenantPlain, "SC-03", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(3), Lease: 30 * time.Second, Origin: origin(3)})
		r.advance(time.Second)
		r.complete(tok, OutcomeConfirmation)
	})
	run("complete-empty", "complete without an outcome (a body whose result is nil)", TenantPlain, "SC-04", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(4), Lease: 30 * time.Second, Origin: origin(4)})
		r.advance(time.Second)
		r.complete(tok, nil)
	})
	run("complete-binary", "an outcome of arbitrary bytes (NUL, not UTF-8) is kept exactly", TenantUnicode, "SC-05", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(5), Lease: 30 * time.Second, Origin: origin(5)})
		r.complete(tok, OutcomeBinary)
	})
	run("duplicate-of-completed", "a second claim of a completed key answers completed with the outcome; nothing changes", TenantPlain, "SC-06", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(6), Lease: 30 * time.Second, Origin: origin(6)})
		r.complete(tok, OutcomeConfirmation)
		r.advance(time.Second)
		r.claim(store.ClaimParams{Holder: holder(60), Lease: 30 * time.Second, Origin: origin(7)})
	})
	run("held", "a second claim within the lease answers held (lease_expired false); nothing changes", TenantPlain, "SC-07", func(r *specRun) {
		r.claim(store.ClaimParams{Holder: holder(7), Lease: 30 * time.Second, Origin: origin(7)})
		r.advance(10 * time.Second)
		r.claim(store.ClaimParams{Holder: holder(70), Lease: 30 * time.Second})
	})
	run("held-lease-expired", "a second claim after the lease ran out answers held with lease_expired; the record stays the first holder's", TenantPlain, "SC-08", func(r *specRun) {
		r.claim(store.ClaimParams{Holder: holder(8), Lease: time.Second, Origin: origin(8)})
		r.advance(2 * time.Second)
		r.claim(store.ClaimParams{Holder: holder(80), Lease: 30 * time.Second})
	})
	run("takeover", "a claim with supersede = the stale holder's token takes the key over with a new token; the old holder is fenced off", TenantPlain, "SC-09", func(r *specRun) {
		old := r.claim(store.ClaimParams{Holder: holder(9), Lease: time.Second, Origin: origin(9)})
		r.advance(2 * time.Second)
		tok := r.claim(store.ClaimParams{Holder: holder(90), Lease: 30 * time.Second, Origin: origin(9), Supersede: old})
		r.advance(time.Second)
		r.complete(old, OutcomeBinary)
		r.complete(tok, OutcomeConfirmation)
	})
	run("renew", "the holder renews its lease ten seconds on", TenantPlain, "SC-10", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(10), Lease: 30 * time.Second, Origin: origin(10)})
		r.advance(10 * time.Second)
		r.renew(tok, time.Minute)
	})
	run("release", "the holder releases its claim: the record is deleted", TenantPlain, "SC-11", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(11), Lease: 30 * time.Second, Origin: origin(11)})
		r.release(tok)
	})
	run("fenced", "complete, release and mark with another token fail not_holder; the record is unchanged", TenantPlain, "SC-12", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(12), Lease: 30 * time.Second, Origin: origin(12)})
		r.complete(tok+1, OutcomeConfirmation)
		r.release(tok + 1)
		r.mark(tok+1, "body_failed: x")
	})
	run("mark-indeterminate", "the holder marks the outcome unknown: indeterminate, never expires", TenantPlain, "SC-13", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(13), Lease: 30 * time.Second, Origin: origin(13)})
		r.advance(time.Second)
		r.mark(tok, "body_failed: read tcp 10.0.0.7:51234->10.0.0.9:443: connection reset by peer")
		r.advance(time.Second)
		r.claim(store.ClaimParams{Holder: holder(130), Lease: 30 * time.Second})
	})
	run("mark-indeterminate-unicode", "an indeterminate record of a tenant with non-ASCII bytes", TenantUnicode, "SC-14", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(14), Lease: 30 * time.Second, Origin: origin(14)})
		r.mark(tok, "store_unavailable: Complete: dial tcp: connection refused")
	})
	run("resolve-complete", "a person's decision completes an indeterminate record, fenced by its token", TenantPlain, "SC-15", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(15), Lease: 30 * time.Second, Origin: origin(15)})
		r.mark(tok, "holder_lost: holder stopped answering without recording an outcome")
		r.advance(time.Minute)
		r.resolve(store.ResolveParams{Token: tok + 1, Decision: store.ActionFree, By: "ops@acme"})
		r.resolve(store.ResolveParams{Token: tok, Decision: store.ActionComplete, Outcome: OutcomeDecided,
			By: "ops@acme", Reason: "the bank confirmed the charge", Reference: "TICKET-7"})
		r.claim(store.ClaimParams{Holder: holder(150), Lease: 30 * time.Second})
	})
	run("resolve-free", "a person's decision frees an indeterminate record: deleted, the key runs again", TenantPlain, "SC-16", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(16), Lease: 30 * time.Second, Origin: origin(16)})
		r.mark(tok, "body_failed: timeout")
		r.resolve(store.ResolveParams{Token: tok, Decision: store.ActionFree, By: "ops@acme", Reason: "the airline has no booking"})
	})
	run("resolve-not-indeterminate", "a decision on a completed record is refused", TenantPlain, "SC-17", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(17), Lease: 30 * time.Second, Origin: origin(17)})
		r.complete(tok, OutcomeConfirmation)
		r.resolve(store.ResolveParams{Token: tok, Decision: store.ActionFree, By: "ops@acme"})
	})
	run("resolve-record-if-gone", "a decision on a key with no record writes a completed one (record_if_gone), with a check and a retention of its own", TenantUnicode, "SC-18", func(r *specRun) {
		r.resolve(store.ResolveParams{Decision: store.ActionComplete, Outcome: OutcomeDecided, RecordIfGone: true,
			Check: check(t, TenantUnicode, "Book", "SC-18", "310"), Retention: 48 * time.Hour,
			By: "ops@zürich", Reason: "the airline confirmed after the record expired", Reference: "PNR 5XK2"})
	})
	run("check-and-retention", "a claim keeping a check digest and a retention window of its own, completed: it expires by its own window", TenantPlain, "SC-19", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(19), Lease: 30 * time.Second, Origin: origin(19),
			Check: check(t, TenantPlain, "Book", "SC-19", "120.50"), Retention: 72 * time.Hour})
		r.advance(time.Second)
		r.complete(tok, OutcomeConfirmation)
	})
	run("expired-reclaim", "a completed record past its retention is free: a claim acquires it afresh", TenantPlain, "SC-20", func(r *specRun) {
		tok := r.claim(store.ClaimParams{Holder: holder(20), Lease: 30 * time.Second, Origin: origin(20)})
		r.complete(tok, OutcomeConfirmation)
		r.advance(SpecTTL + time.Second)
		r.claim(store.ClaimParams{Holder: holder(200), Lease: 30 * time.Second, Origin: origin(21)})
	})
	for _, sc := range out {
		require.NotEmpty(t, sc.Steps, sc.Name)
	}
	return out
}

// CheckSpecFile writes vectors, in the specification's envelope
// ({"version": 1, "generated_by": test, "vectors": [...]}), to path when
// update is set, and otherwise checks that path holds exactly those bytes.
func CheckSpecFile(t testing.TB, path, test string, vectors any, update bool) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(struct {
		Version     int    `json:"version"`
		GeneratedBy string `json:"generated_by"`
		Vectors     any    `json:"vectors"`
	}{1, test, vectors}))
	if update {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to write it")
	require.Equal(t, b.String(), string(got), "%s differs from what the code writes; if the file is the one that is wrong, run with -update", path)
}
