package store

import (
	"slices"
	"strconv"
	"time"
)

// DefaultListLimit is the page size [Store.List] uses when ListParams.Limit
// is zero.
const DefaultListLimit = 100

// MaxListLimit bounds ListParams.Limit.
const MaxListLimit = 1000

// Order is the order a listing returns records in: by CreatedAt, ties
// broken by tenant (across tenants) and then by key.
type Order uint8

// The orders a listing can take.
const (
	// NewestFirst lists the most recently claimed records first. It is
	// the zero value.
	NewestFirst Order = iota
	// OldestFirst lists the longest-waiting records first.
	OldestFirst
)

// String returns the order's name.
func (o Order) String() string {
	switch o {
	case NewestFirst:
		return "newest-first"
	case OldestFirst:
		return "oldest-first"
	default:
		return "unknown"
	}
}

// ListParams are the parameters of [Store.List] and
// [Store.ListAcrossTenants]. The filters combine: a record is listed when it
// passes every one that is set.
type ListParams struct {
	// Tenant whose records are listed. Required by List; must be empty for
	// ListAcrossTenants.
	Tenant string
	// States keeps the records in any of these states; empty keeps every
	// state.
	States []State
	// Stale narrows the pending records kept to those whose lease has run
	// out by the store's clock (the holder is presumed dead). With States
	// empty it keeps those alone; with States it narrows only the pending
	// ones, so {StateIndeterminate, StatePending} with Stale lists what
	// waits for a person.
	Stale bool
	// OlderThan, when positive, keeps the records claimed at least this
	// long ago by the store's clock (CreatedAt <= now - OlderThan).
	OlderThan time.Duration
	// Order is the order of the listing. Defaults to NewestFirst.
	Order Order
	// Cursor continues a listing where the page that returned it as
	// [Page.Next] ended. It is opaque, and only valid with the same
	// operation, tenant and Order; the filters may change between pages.
	// Empty starts at the beginning.
	Cursor string
	// Limit bounds the records of one page. Defaults to DefaultListLimit
	// (100); at most MaxListLimit (1000).
	Limit int
}

// BacklogCount is what [Store.CountBacklog] reports for one activity type.
type BacklogCount struct {
	// ActivityType is the records' Origin.ActivityType; empty for records
	// whose claimer named none.
	ActivityType string `json:"activity_type"`
	// Indeterminate counts the records a person must decide.
	Indeterminate int `json:"indeterminate"`
	// Stale counts the pending records whose lease has run out.
	Stale int `json:"stale"`
}

// Page is one page of a listing.
type Page struct {
	// Records are the page's live records, in the listing's order. A page
	// may hold fewer than the limit, even none, and still have a Next: a
	// store may bound the work of one call (the Redis store does, for
	// filters that keep few records). Page until Next is empty.
	Records []Record
	// Next continues the listing after this page; empty when the listing
	// has ended.
	Next string
}

// Validate reports the first malformed field of p as an [*InvalidError],
// for [Store.List].
func (p ListParams) Validate() error {
	if err := validateTenant(p.Tenant); err != nil {
		return err
	}
	return p.validate(false)
}

// ValidateAcrossTenants reports the first malformed field of p as an
// [*InvalidError], for [Store.ListAcrossTenants].
func (p ListParams) ValidateAcrossTenants() error {
	if p.Tenant != "" {
		return &InvalidError{Field: "Tenant", Reason: "must be empty: ListAcrossTenants lists every tenant"}
	}
	return p.validate(true)
}

func (p ListParams) validate(across bool) error {
	for _, s := range p.States {
		if s < StatePending || s > StateIndeterminate {
			return &InvalidError{Field: "States", Reason: "unknown state " + strconv.Itoa(int(s))}
		}
	}
	if p.OlderThan < 0 {
		return &InvalidError{Field: "OlderThan", Reason: "must not be negative"}
	}
	if p.Order != NewestFirst && p.Order != OldestFirst {
		return &InvalidError{Field: "Order", Reason: "unknown order " + strconv.Itoa(int(p.Order))}
	}
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return &InvalidError{Field: "Limit", Reason: "must be between 0 and " + strconv.Itoa(MaxListLimit)}
	}
	if p.Cursor != "" {
		if _, err := p.After(across); err != nil {
			return err
		}
	}
	return nil
}

// EffectiveLimit returns p.Limit, or DefaultListLimit when it is zero.
func (p ListParams) EffectiveLimit() int {
	if p.Limit == 0 {
		return DefaultListLimit
	}
	return p.Limit
}

// EffectiveStates returns the states a listing keeps, sorted and without
// repeats: p.States, or every state when it is empty, except that Stale
// with no States keeps only StatePending.
func (p ListParams) EffectiveStates() []State {
	if len(p.States) == 0 {
		if p.Stale {
			return []State{StatePending}
		}
		return []State{StatePending, StateCompleted, StateIndeterminate}
	}
	s := slices.Clone(p.States)
	slices.Sort(s)
	return slices.Compact(s)
}

// Keeps reports whether rec, a live record, passes p's filters at now (the
// store's clock). Stores that filter in Go use it; it does not look at the
// tenant or the cursor.
func (p ListParams) Keeps(rec Record, now time.Time) bool {
	if !slices.Contains(p.EffectiveStates(), rec.State) {
		return false
	}
	if p.Stale && rec.State == StatePending && now.Before(rec.LeaseUntil) {
		return false
	}
	if p.OlderThan > 0 && rec.CreatedAt.After(now.Add(-p.OlderThan)) {
		return false
	}
	return true
}
