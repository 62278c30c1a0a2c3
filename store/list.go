package store

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
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

// Tally adds rec, a live record, to counts (by activity type) at now when
// it waits for a person. Stores that count in Go use it, then [SortBacklog].
func Tally(counts map[string]*BacklogCount, rec Record, now time.Time) {
	stale := rec.State == StatePending && !now.Before(rec.LeaseUntil)
	if rec.State != StateIndeterminate && !stale {
		return
	}
	c := counts[rec.Origin.ActivityType]
	if c == nil {
		c = &BacklogCount{ActivityType: rec.Origin.ActivityType}
		counts[rec.Origin.ActivityType] = c
	}
	if stale {
		c.Stale++
	} else {
		c.Indeterminate++
	}
}

// SortBacklog returns counts as CountBacklog reports them.
func SortBacklog(counts map[string]*BacklogCount) []BacklogCount {
	out := make([]BacklogCount, 0, len(counts))
	for _, c := range counts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b BacklogCount) int { return cmp.Compare(a.ActivityType, b.ActivityType) })
	return out
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

// ListPosition is where a listing stands: the sort key of the last record
// a page returned. Stores build cursors from it with [ListPosition.Cursor]
// and read them back with [ListParams.After].
type ListPosition struct {
	CreatedAt time.Time
	// Tenant is part of the position only across tenants.
	Tenant string
	Key    string
}

// PositionOf returns the position of rec in a listing.
func PositionOf(rec Record, across bool) ListPosition {
	pos := ListPosition{CreatedAt: rec.CreatedAt, Key: rec.Key}
	if across {
		pos.Tenant = rec.Tenant
	}
	return pos
}

// cursor is the wire form of a listing cursor: version, scope ("t:" and the
// tenant, or "*" across tenants), order, and the position.
type cursor struct {
	V     int    `json:"v"`
	Scope string `json:"s"`
	Order Order  `json:"o"`
	At    int64  `json:"c"` // unix nanoseconds
	T     string `json:"t,omitempty"`
	K     string `json:"k"`
}

func (p ListParams) scope(across bool) string {
	if across {
		return "*"
	}
	return "t:" + p.Tenant
}

// Cursor returns the opaque cursor that continues the listing p after pos.
func (pos ListPosition) Cursor(p ListParams, across bool) string {
	b, _ := json.Marshal(cursor{V: 1, Scope: p.scope(across), Order: p.Order, At: pos.CreatedAt.UnixNano(), T: pos.Tenant, K: pos.Key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// After returns the position p.Cursor continues after, and ok false when
// p.Cursor is empty. A cursor that is malformed, or was made by another
// operation, tenant or Order, is an [*InvalidError].
func (p ListParams) After(across bool) (pos ListPosition, err error) {
	if p.Cursor == "" {
		return ListPosition{}, nil
	}
	bad := func(why string) error { return &InvalidError{Field: "Cursor", Reason: why} }
	b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
	if err != nil {
		return ListPosition{}, bad("not a listing cursor")
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.V != 1 {
		return ListPosition{}, bad("not a listing cursor")
	}
	switch {
	case c.Scope != p.scope(across):
		return ListPosition{}, bad("made by a listing of another tenant or operation")
	case c.Order != p.Order:
		return ListPosition{}, bad("made by a listing in " + c.Order.String() + " order")
	}
	return ListPosition{CreatedAt: time.Unix(0, c.At).UTC(), Tenant: c.T, Key: c.K}, nil
}

// ComparePosition orders two positions as an OldestFirst listing does.
func ComparePosition(a, b ListPosition) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Key, b.Key))
}

// Beyond reports whether pos comes after the cursor position after in
// order o, that is whether a page continuing from after may hold it.
func (o Order) Beyond(pos, after ListPosition) bool {
	c := ComparePosition(pos, after)
	if o == OldestFirst {
		return c > 0
	}
	return c < 0
}
