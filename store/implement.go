package store

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// For implementers: what a store's own code calls, so that every
// implementation of [Store] answers alike. A user of the library never
// calls these; the package documentation ("For implementers") lists them
// with [ServerClock] (serverclock.go) and the parameters' methods a store
// reads them with.

// ResultOf is the answer of a [Store.Claim] or a [Store.Wait] that found
// rec, live at now, and did not take it: StatusCompleted or
// StatusIndeterminate with the record, or StatusHeld with it and
// LeaseExpired set when its lease had run out at now. It is for the
// implementations of [Store], so that each answers from a found record
// alike.
func ResultOf(rec Record, now time.Time) Result {
	switch rec.State {
	case StateCompleted:
		return Result{Status: StatusCompleted, Record: rec}
	case StateIndeterminate:
		return Result{Status: StatusIndeterminate, Record: rec}
	default:
		return Result{Status: StatusHeld, Record: rec, LeaseExpired: !now.Before(rec.LeaseUntil)}
	}
}

// NewToken returns a fresh fencing token: positive, random, and for all
// practical purposes never reused.
func NewToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	t := int64(binary.BigEndian.Uint64(b[:]) >> 1)
	if t == 0 {
		t = 1
	}
	return t
}

// Unavailable wraps a backend error so that it matches both [ErrUnavailable]
// and the original error. Stores call it at their edge for connection
// failures, timeouts and closed clients.
func Unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// RetentionOr returns retention when it is positive, and ttl, the store's
// own window, otherwise: the window a write of a record that keeps
// retention starts.
func RetentionOr(retention, ttl time.Duration) time.Duration {
	if retention > 0 {
		return retention
	}
	return ttl
}

// Resolution returns the trail a store keeps for p applied at now.
func (p ResolveParams) Resolution(now time.Time) Resolution {
	return Resolution{Action: p.Decision, By: p.By, Reason: p.Reason, Reference: p.Reference, At: now}
}

// ResolveHolder is the Holder of a record [Store.Resolve] creates for
// ResolveParams.RecordIfGone.
const ResolveHolder = "idempotency.resolve"

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

// Listing positions and cursors: a store builds a page's Next from the
// position of its last record, and reads a cursor back to the position it
// continues after.

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
