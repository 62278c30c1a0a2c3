package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tesserix/idempotency/store"
)

// maxByLength bounds -by, a person's or system's name.
const maxByLength = 256

// resolveRequest is a parsed resolve command.
type resolveRequest struct {
	p          store.ResolveParams
	shown      []byte // the outcome as compact JSON, to show back
	by, reason string
	dryRun     bool
	// temporal reaches the workflow that may wait on the key; force
	// resolves even when one does.
	temporal temporalConfig
	force    bool
	// yes confirms -free: the record resolve settles is indeterminate or
	// stale, so its effect may have landed.
	yes bool
}

func resolveFlags(fs *flag.FlagSet, env func(string) string) func() (action, error) {
	tenant, key := scopeFlags(fs)
	free := fs.Bool("free", false, "the effect did not happen: free the key")
	outcome := fs.String("outcome", "", "the effect happened: record this JSON value as its result")
	by := fs.String("by", "", "who decides: a person or system (kept in the record's resolution)")
	reason := fs.String("reason", "", "why: what established the outcome (kept in the record's resolution)")
	reference := fs.String("reference", "", "where the evidence is: a ticket, the downstream's confirmation (kept in the record's resolution)")
	dryRun := fs.Bool("dry-run", false, "show the record and the decision, change nothing")
	force := fs.Bool("force", false, "resolve even when the record's workflow waits on the key (it keeps waiting until 'decide -retry')")
	yes := fs.Bool("yes", false, "confirm -free: if the effect did happen, the activity runs it a second time")
	tf := defineTemporalFlags(fs, env)
	return func() (action, error) {
		if err := checkScope(*tenant, *key); err != nil {
			return nil, err
		}
		outcomeSet := false
		fs.Visit(func(f *flag.Flag) { outcomeSet = outcomeSet || f.Name == "outcome" })
		switch {
		case *free && outcomeSet:
			return nil, errors.New("-free and -outcome are exclusive: decide whether the effect happened")
		case !*free && !outcomeSet:
			return nil, errors.New("one of -outcome JSON (the effect happened) or -free (it did not) is required")
		case len(*by) > maxByLength:
			return nil, fmt.Errorf("-by is %d bytes; at most %d", len(*by), maxByLength)
		case len(*reason) > store.MaxResolutionTextLength:
			return nil, fmt.Errorf("-reason is %d bytes; at most %d", len(*reason), store.MaxResolutionTextLength)
		case len(*reference) > store.MaxResolutionTextLength:
			return nil, fmt.Errorf("-reference is %d bytes; at most %d", len(*reference), store.MaxResolutionTextLength)
		}
		req := resolveRequest{
			p: store.ResolveParams{Tenant: *tenant, Key: *key, Decision: store.ActionFree,
				By: strings.TrimSpace(*by), Reason: *reason, Reference: *reference},
			by: strings.TrimSpace(*by), reason: *reason, dryRun: *dryRun, force: *force, yes: *yes,
		}
		tc, err := tf.resolve()
		if err != nil {
			return nil, err
		}
		req.temporal = tc
		if outcomeSet {
			enc, js, err := encodeOutcome(*outcome)
			if err != nil {
				return nil, outcomeError(*outcome, err)
			}
			req.p.Decision, req.p.Outcome, req.shown = store.ActionComplete, enc, js
		}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			return resolve(ctx, b, out, req)
		}, nil
	}
}

// will, did and then describe the decision before and after it is applied.
func (r resolveRequest) describe() (will, did, then string) {
	if r.p.Decision == store.ActionComplete {
		return "record the outcome " + string(r.shown), "recorded the outcome " + string(r.shown), "duplicates of the key will receive it"
	}
	return "free the key", "freed the key", "the next attempt may run the effect"
}

// confirmFree refuses -free without -yes, as decide -free does: every record
// resolve settles (indeterminate, or stale: its holder gone) may hold an
// effect that landed, and freeing it runs the effect again.
func (r resolveRequest) confirmFree() error {
	if r.p.Decision == store.ActionFree && !r.yes {
		return errors.New(freeCost(r.p.Key))
	}
	return nil
}

// signature names who decided and why, for the last line.
func (r resolveRequest) signature() string {
	var s string
	if r.by != "" {
		s += " by " + printable(r.by)
	}
	if r.reason != "" {
		s += " (reason: " + printable(r.reason) + ")"
	}
	return s
}

func resolve(ctx context.Context, b *backend, out io.Writer, req resolveRequest) error {
	p := req.p
	rec, err := lookup(ctx, b, p.Tenant, p.Key)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "record: tenant %s key %s is %s%s\n", printable(rec.Tenant), printable(rec.Key), rec.State, reasonSuffix(rec))
	switch rec.State {
	case store.StateIndeterminate:
	case store.StatePending:
		return settleStale(ctx, b, out, req, rec)
	default:
		return notIndeterminate(rec.State)
	}
	if err := refuseWhileWaiting(ctx, out, req, rec); err != nil {
		return err
	}
	will, did, then := req.describe()
	if req.dryRun {
		fmt.Fprintf(out, "dry run: would %s; nothing changed\n", will)
		return nil
	}
	if err := req.confirmFree(); err != nil {
		return err
	}
	// Fenced: the decision applies to the record shown, not to one claimed
	// and marked again meanwhile.
	p.Token = rec.Token
	err = b.Resolve(ctx, p)
	switch {
	case errors.Is(err, store.ErrNotHolder):
		return errors.New("the record changed while being resolved (the key was claimed again); look at it again and repeat the decision")
	case errors.Is(err, store.ErrNotFound):
		return errors.New("no record: it expired or was erased while being resolved")
	case errors.Is(err, store.ErrNotIndeterminate):
		// Decided by someone else between the two calls: name the state.
		if now, lerr := b.Lookup(ctx, store.LookupParams{Tenant: p.Tenant, Key: p.Key}); lerr == nil {
			if now.State == store.StateIndeterminate {
				return errors.New("the record changed while being resolved; look at it again and repeat the decision")
			}
			return notIndeterminate(now.State)
		}
		return errors.New("the record stopped being indeterminate while being resolved: nothing to resolve")
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "resolved%s: %s; %s\n", req.signature(), did, then)
	return nil
}

// settleStale applies the decision to a pending record whose holder is
// gone: its lease ran out by the store's clock (a holder that died with
// the store down, say, after its effect landed). It is one fenced store
// call (store.ResolveParams.Stale) bound to the token of the record shown:
// the store checks, by its own clock, that the claim under that token is
// still pending with its lease run out, and records the outcome or frees
// the key in the same step, keeping the decision's trail. No duplicate
// ever sees the record half-settled (taken over, or marked indeterminate
// and waiting on a decision already being made). A holder still within
// its lease is left alone.
func settleStale(ctx context.Context, b *backend, out io.Writer, req resolveRequest, rec store.Record) error {
	p := req.p
	will, did, then := req.describe()
	if req.dryRun {
		return dryRunStale(ctx, b, out, p, rec, will)
	}
	if err := req.confirmFree(); err != nil {
		return err
	}
	p.Token, p.Stale = rec.Token, true
	err := b.Resolve(ctx, p)
	switch {
	case errors.Is(err, store.ErrLeaseLive):
		// Name the lease as it stands now: the holder may have renewed it.
		if now, lerr := b.Lookup(ctx, store.LookupParams{Tenant: p.Tenant, Key: p.Key}); lerr == nil && now.Token == rec.Token {
			rec = now
		}
		return liveLease(rec)
	case errors.Is(err, store.ErrNotHolder):
		return errors.New("the record changed while being resolved (the key was taken over or claimed again); look at it again and repeat the decision")
	case errors.Is(err, store.ErrNotFound):
		return errors.New("no record: it expired or was erased while being resolved")
	case errors.Is(err, store.ErrNotIndeterminate):
		if now, lerr := b.Lookup(ctx, store.LookupParams{Tenant: p.Tenant, Key: p.Key}); lerr == nil {
			return fmt.Errorf("the holder settled the record while it was being resolved: it is %s now; look at it again", now.State)
		}
		return errors.New("the holder settled the record while it was being resolved; look at it again")
	case err != nil:
		return err
	}
	fmt.Fprintln(out, staleLine(rec))
	fmt.Fprintf(out, "resolved%s: settled the stale claim and %s; %s\n", req.signature(), did, then)
	return nil
}

// dryRunStale says what resolve would do to a pending record without
// changing it. A claim of a held key writes nothing and says, by the
// store's own clock, whether the holder's lease has run out; should the
// record have expired meanwhile, the claim takes the free key and gives it
// back at once.
func dryRunStale(ctx context.Context, b *backend, out io.Writer, p store.ResolveParams, rec store.Record, will string) error {
	probe, err := b.Claim(ctx, store.ClaimParams{Tenant: p.Tenant, Key: p.Key, Holder: name + " resolve -dry-run", Lease: time.Minute})
	if err != nil {
		return err
	}
	switch {
	case probe.Status == store.StatusAcquired:
		if err := b.Release(ctx, store.ReleaseParams{Tenant: p.Tenant, Key: p.Key, Token: probe.Record.Token}); err != nil {
			return fmt.Errorf("the record expired while being looked at, and freeing the key again failed: %w", err)
		}
		return errors.New("the record expired while being looked at: the key is free; nothing to resolve")
	case probe.Status != store.StatusHeld:
		return fmt.Errorf("the holder settled the record while it was being looked at: it is %s now; look at it again", probe.Status)
	case probe.Record.Token != rec.Token:
		return errors.New("the record changed while being looked at (the key was taken over or claimed again); look at it again")
	case !probe.LeaseExpired:
		return liveLease(probe.Record)
	}
	fmt.Fprintln(out, staleLine(probe.Record))
	fmt.Fprintf(out, "dry run: would settle the stale claim and %s; nothing changed\n", will)
	return nil
}

// staleLine names the holder presumed gone and where it came from.
func staleLine(rec store.Record) string {
	return fmt.Sprintf("stale: holder %s (workflow %s, activity %s, attempt %s) let its lease run out at %s; it is presumed gone",
		printable(rec.Holder), printableOrDash(rec.Origin.WorkflowID), printableOrDash(rec.Origin.ActivityType),
		attemptText(rec.Origin.Attempt), formatTime(rec.LeaseUntil))
}

// liveLease is the refusal of a pending record whose holder may still be
// running.
func liveLease(rec store.Record) error {
	return fmt.Errorf("the record is pending and its holder %s holds a lease until %s: it may still be running; a pending record is resolved only once its lease has run out",
		printable(rec.Holder), formatTime(rec.LeaseUntil))
}

func notIndeterminate(s store.State) error {
	return fmt.Errorf("the record is %s, not indeterminate: nothing to resolve", s)
}

// waitCheckTimeout bounds the question to Temporal whether a workflow waits
// on the key: resolve is a store command, and Temporal may be out of reach.
const waitCheckTimeout = 5 * time.Second

// refuseWhileWaiting refuses to resolve a record its workflow waits on
// (AwaitDecision): decide settles it there, and checks the result against
// the activity's declared type, where resolve can check only that it is
// JSON — a wrong shape here failed the workflow at its 'decide -retry'.
// When Temporal cannot be asked, it says so and lets resolve go on.
func refuseWhileWaiting(ctx context.Context, out io.Writer, req resolveRequest, rec store.Record) error {
	wfID := rec.Origin.WorkflowID
	if wfID == "" || req.force {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, waitCheckTimeout)
	defer cancel()
	c, err := req.temporal.dial(ctx)
	if err == nil {
		defer c.Close()
		var waits bool
		if waits, err = waitsOnKey(ctx, c, wfID, rec.Origin.RunID, rec.Key); err == nil {
			if !waits {
				return nil
			}
			return fmt.Errorf("workflow %s waits on this key for a decision: send it there with '%s decide -tenant %s -key %s (-outcome JSON | -free) -by WHO', which checks the result against the activity's declared type and wakes the workflow (resolve would leave it waiting; -force resolves anyway)",
				printable(wfID), name, printable(rec.Tenant), printable(rec.Key))
		}
	}
	fmt.Fprintf(out, "note: could not ask Temporal whether workflow %s waits on the key (%v); if it does, use '%s decide' instead\n",
		printable(wfID), err, name)
	return nil
}
