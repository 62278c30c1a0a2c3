package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tesserix/idempotency/store"
)

// The resolve path: an operator's decision on a record that waits for a
// person, applied by resolveScript in one step (see store.ResolveParams
// for what each decision does).

// Resolve implements [store.Store.Resolve].
func (s *Store) Resolve(ctx context.Context, p store.ResolveParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return translate(ctx, "resolve", err)
	}
	now := s.now(ctx)
	// The store's window for a record that stands (the script applies the
	// record's own), the params' for a record made for RecordIfGone.
	exp, ttl := s.expiry(now, now)
	goneExp, goneTTL := expiryWithin(now, now, store.RetentionOr(keptRetention(p.Retention), s.ttl))
	if p.Decision == store.ActionFree || !p.RecordIfGone {
		goneExp, goneTTL = exp, ttl
	}
	decision := "complete"
	if p.Decision == store.ActionFree {
		decision = "free"
	}
	recordIfGone, stale := "0", "0"
	if p.RecordIfGone {
		recordIfGone = "1"
	}
	if p.Stale {
		stale = "1"
	}
	trail, err := json.Marshal(p.Resolution(now.time()))
	if err != nil {
		return fmt.Errorf("redisstore: resolve: encoding the resolution: %w", err)
	}
	pub, channel := s.notes.publisher(ctx, p.Tenant)
	a := resolveArgs{
		announce:     announce{pubcmd: pub, channel: channel},
		now:          now.arg(),
		decision:     decision,
		outcome:      p.Outcome,
		storeExp:     exp.arg(),
		storeTTLMs:   ttl,
		member:       p.Key,
		token:        strconv.FormatInt(p.Token, 10),
		resolution:   trail,
		recordIfGone: recordIfGone,
		goneHolder:   store.ResolveHolder,
		goneToken:    strconv.FormatInt(store.NewToken(), 10),
		stale:        stale,
		goneCheck:    p.Check,
		goneRet:      retentionArg(p.Retention),
		goneExp:      goneExp.arg(),
		goneTTLMs:    goneTTL,
	}
	v, err := run(ctx, s.client, resolveScript, []string{s.keys.recordKey(p.Tenant, p.Key), s.keys.ageKey(p.Tenant)}, a.params().argv()...)
	if err != nil {
		return translate(ctx, "resolve", err)
	}
	switch n, _ := v.(int64); n {
	case resolveApplied:
		return nil
	case resolveNotFound:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: %w", p.Tenant, p.Key, store.ErrNotFound)
	case resolveNotIndeterminate:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: %w", p.Tenant, p.Key, store.ErrNotIndeterminate)
	case resolveOtherToken:
		return fmt.Errorf("redisstore: resolve tenant %q key %q decided on token %d, but another claim's record stands: %w",
			p.Tenant, p.Key, p.Token, store.ErrNotHolder)
	case resolveLeaseLive:
		return fmt.Errorf("redisstore: resolve tenant %q key %q: the claim pending under token %d holds a live lease: %w",
			p.Tenant, p.Key, p.Token, store.ErrLeaseLive)
	default:
		return fmt.Errorf("redisstore: resolve: unexpected reply %v", v)
	}
}
