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

// maxByLength bounds -by: it becomes part of the holder of a taken-over
// claim, which stores bound (store.MaxHolderLength).
const maxByLength = 256

// settleLease is the lease of the claim resolve takes over from a holder
// that is gone; it completes or releases it at once.
const settleLease = time.Minute

// resolveRequest is a parsed resolve command.
type resolveRequest struct {
	p          store.ResolveParams
	shown      []byte // the outcome as compact JSON, to show back
	by, reason string
	dryRun     bool
}

func resolveFlags(fs *flag.FlagSet, _ func(string) string) func() (action, error) {
	tenant, key := scopeFlags(fs)
	free := fs.Bool("free", false, "the effect did not happen: free the key")
	outcome := fs.String("outcome", "", "the effect happened: record this JSON value as its result")
	by := fs.String("by", "", "who decides: a person or system (kept in the record's resolution; names the holder of a settled stale claim)")
	reason := fs.String("reason", "", "why: what established the outcome (kept in the record's resolution)")
	reference := fs.String("reference", "", "where the evidence is: a ticket, the downstream's confirmation (kept in the record's resolution)")
	dryRun := fs.Bool("dry-run", false, "show the record and the decision, change nothing")
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
			p: store.ResolveParams{Tenant: *tenant, Key: *key, Decision: store.DecisionFree,
				By: strings.TrimSpace(*by), Reason: *reason, Reference: *reference},
			by: strings.TrimSpace(*by), reason: *reason, dryRun: *dryRun,
		}
		if outcomeSet {
			enc, js, err := encodeOutcome(*outcome)
			if err != nil {
				return nil, outcomeError(*outcome, err)
			}
			req.p.Decision, req.p.Outcome, req.shown = store.DecisionComplete, enc, js
		}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			return resolve(ctx, b, out, req)
		}, nil
	}
}

// will, did and then describe the decision before and after it is applied.
func (r resolveRequest) describe() (will, did, then string) {
	if r.p.Decision == store.DecisionComplete {
		return "record the outcome " + string(r.shown), "recorded the outcome " + string(r.shown), "duplicates of the key will receive it"
	}
	return "free the key", "freed the key", "the next attempt may run the effect"
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
	will, did, then := req.describe()
	if req.dryRun {
		fmt.Fprintf(out, "dry run: would %s; nothing changed\n", will)
		return nil
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
// the store down, say, after its effect landed). It takes the claim over
// under the token it saw, as a waiting duplicate would, and completes or
// releases it. A holder still within its lease is left alone.
func settleStale(ctx context.Context, b *backend, out io.Writer, req resolveRequest, rec store.Record) error {
	p := req.p
	holder := name + " resolve"
	if req.by != "" {
		holder += " by " + req.by
	}
	claim := store.ClaimParams{Tenant: p.Tenant, Key: p.Key, Holder: holder, Lease: settleLease}
	// A claim on a held key writes nothing and says, by the store's own
	// clock, whether the holder's lease has run out.
	probe, err := b.Claim(ctx, claim)
	if err != nil {
		return err
	}
	switch probe.Status {
	case store.StatusHeld:
	case store.StatusAcquired:
		// The record expired between the two reads: give the key back.
		if err := b.Release(ctx, store.ReleaseParams{Tenant: p.Tenant, Key: p.Key, Token: probe.Record.Token}); err != nil {
			return fmt.Errorf("the record expired while being resolved, and freeing the key again failed: %w", err)
		}
		return errors.New("the record expired while being resolved: the key is free; nothing was recorded")
	default:
		return fmt.Errorf("the holder settled the record while it was being resolved: it is %s now; look at it again", probe.Status)
	}
	held := probe.Record
	if !probe.LeaseExpired {
		return fmt.Errorf("the record is pending and its holder %s holds a lease until %s: it may still be running; a pending record is resolved only once its lease has run out",
			printable(held.Holder), formatTime(held.LeaseUntil))
	}
	fmt.Fprintf(out, "stale: holder %s (workflow %s, activity %s, attempt %s) let its lease run out at %s; it is presumed gone\n",
		printable(held.Holder), printableOrDash(held.Origin.WorkflowID), printableOrDash(held.Origin.ActivityType),
		attemptText(held.Origin.Attempt), formatTime(held.LeaseUntil))
	will, did, then := req.describe()
	if req.dryRun {
		fmt.Fprintf(out, "dry run: would take the stale claim over and %s; nothing changed\n", will)
		return nil
	}
	claim.Supersede = held.Token
	taken, err := b.Claim(ctx, claim)
	if err != nil {
		return err
	}
	if taken.Status != store.StatusAcquired {
		return fmt.Errorf("the record changed while being resolved (it is %s now); look at it again and repeat the decision", taken.Status)
	}
	// Marked and then resolved under the taken-over token, the decision
	// goes through the store's Resolve and keeps its trail (by, reason,
	// reference), as it does for a record that was indeterminate.
	p.Token = taken.Record.Token
	err = b.MarkIndeterminate(ctx, store.MarkIndeterminateParams{Tenant: p.Tenant, Key: p.Key, Token: p.Token,
		Reason: "stale: holder " + held.Holder + " let its lease run out; settled by " + name + " resolve"})
	if err == nil {
		err = b.Resolve(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("took the stale claim over, then could not %s: %w; look at the record again (left pending, it reads as stale once the claim's %v lease runs out; left indeterminate, resolve settles it)", will, err, settleLease)
	}
	fmt.Fprintf(out, "resolved%s: took the stale claim over and %s; %s\n", req.signature(), did, then)
	return nil
}

func notIndeterminate(s store.State) error {
	return fmt.Errorf("the record is %s, not indeterminate: nothing to resolve", s)
}
