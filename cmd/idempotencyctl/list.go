package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tesserix/idempotency/store"
)

// maxReasonColumn bounds the reason a listing shows; show prints it whole.
const maxReasonColumn = 48

// listRequest is a parsed list command.
type listRequest struct {
	p       store.ListParams
	across  bool
	waiting bool // neither -state nor -stale: what waits for a person
	asJSON  bool
	keys    bool // only the keys, one per line, for scripts
}

func listFlags(fs *flag.FlagSet, _ func(string) string) func() (action, error) {
	tenant := fs.String("tenant", "", "the tenant whose records are listed (required unless -all-tenants)")
	all := fs.Bool("all-tenants", false, "list every tenant's records (operators only: reads across tenants)")
	states := fs.String("state", "", "comma-separated states to list: pending, indeterminate, completed, or all (default: what waits for a person)")
	stale := fs.Bool("stale", false, "of pending records, only those whose holder's lease ran out (the holder is gone)")
	olderThan := fs.Duration("older-than", 0, "only records claimed at least this long ago, such as 1h or 30m")
	oldest := fs.Bool("oldest", false, "oldest first (default newest first)")
	limit := fs.Int("limit", store.DefaultListLimit, fmt.Sprintf("at most this many records, 1 to %d; -cursor continues", store.MaxListLimit))
	cursor := fs.String("cursor", "", "continue a listing where the previous page ended (same -tenant and -oldest)")
	asJSON := fs.Bool("json", false, `print one JSON object: {"records":[…as show -json…],"next":"cursor or empty"}`)
	keys := fs.Bool("keys", false, `print only the keys, one per line, and nothing when none match (for scripts: KEY=$(idempotencyctl list -tenant T -keys | head -1))`)
	return func() (action, error) {
		req := listRequest{across: *all, asJSON: *asJSON, keys: *keys}
		switch {
		case *asJSON && *keys:
			return nil, errors.New("-json and -keys are exclusive")
		case *all && *tenant != "":
			return nil, errors.New("-tenant and -all-tenants are exclusive: list one tenant or every tenant")
		case !*all && *tenant == "":
			return nil, errors.New("-tenant is required (or -all-tenants, to list every tenant)")
		case *limit < 1 || *limit > store.MaxListLimit:
			return nil, fmt.Errorf("-limit must be between 1 and %d, got %d", store.MaxListLimit, *limit)
		case *olderThan < 0:
			return nil, fmt.Errorf("-older-than must not be negative, got %v", *olderThan)
		}
		p := store.ListParams{Tenant: *tenant, Stale: *stale, OlderThan: *olderThan, Limit: *limit, Cursor: *cursor}
		if *oldest {
			p.Order = store.OldestFirst
		}
		parsed, err := parseStates(*states)
		if err != nil {
			return nil, err
		}
		p.States = parsed
		if *states == "" && !*stale {
			// What waits for a person: indeterminate records, and
			// pending ones whose holder is gone.
			p.States, p.Stale, req.waiting = []store.State{store.StatePending, store.StateIndeterminate}, true, true
		}
		validate := p.Validate
		if req.across {
			validate = p.ValidateAcrossTenants
		}
		if err := validate(); err != nil {
			var inv *store.InvalidError
			if errors.As(err, &inv) && inv.Field == "Cursor" {
				return nil, fmt.Errorf("-cursor: %s; use the cursor the previous page printed, with the same -tenant and -oldest", inv.Reason)
			}
			return nil, err
		}
		req.p = p
		return func(ctx context.Context, b *backend, out io.Writer) error {
			return list(ctx, b, out, req)
		}, nil
	}
}

// parseStates reads -state.
func parseStates(text string) ([]store.State, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var out []store.State
	for _, w := range strings.Split(text, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		if w == "all" {
			return []store.State{store.StatePending, store.StateCompleted, store.StateIndeterminate}, nil
		}
		s, err := store.ParseState(w)
		if err != nil {
			return nil, fmt.Errorf("-state %s: want pending, indeterminate, completed or all, separated by commas", printable(w))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func list(ctx context.Context, b *backend, out io.Writer, req listRequest) error {
	var page store.Page
	var err error
	if req.across {
		page, err = b.ListAcrossTenants(ctx, req.p)
	} else {
		page, err = b.List(ctx, req.p)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	if req.asJSON {
		return writeListJSON(out, page)
	}
	if req.keys {
		for _, rec := range page.Records {
			fmt.Fprintln(out, printable(rec.Key))
		}
		return nil
	}
	if len(page.Records) == 0 {
		fmt.Fprintln(out, emptyAnswer(req, b.where))
		if hint := otherTenants(ctx, b, req); hint != "" {
			fmt.Fprintln(out, hint)
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tKEY\tSTATE\tAGE\tACTIVITY\tWORKFLOW ID\tREASON\tDECIDED BY")
	for _, rec := range page.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			printable(rec.Tenant), printable(rec.Key), stateText(rec, now), age(now, rec.CreatedAt),
			printableOrDash(rec.Origin.ActivityType), printableOrDash(rec.Origin.WorkflowID),
			shorten(reasonText(rec), maxReasonColumn), printableOrDash(rec.Resolution.By))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d %s", len(page.Records), plural(len(page.Records), "record"))
	if page.Next != "" {
		fmt.Fprintf(out, "; more: run again with -cursor %s", page.Next)
	}
	fmt.Fprintln(out)
	return nil
}

// emptyAnswer says plainly that nothing matched, what was asked, and where
// (store names the store, table or prefix read: an empty answer from the
// wrong table must not pass for a quiet one).
func emptyAnswer(req listRequest, store string) string {
	where := "in tenant " + printable(req.p.Tenant) + " of " + store
	if req.across {
		where = "in any tenant of " + store
	}
	if req.p.Cursor != "" {
		return "no more records " + where + ": the listing has ended"
	}
	if req.waiting {
		return "nothing waits for a person " + where + ": no indeterminate records and no stale pending ones"
	}
	var filters []string
	names := make([]string, len(req.p.States))
	for i, s := range req.p.States {
		names[i] = s.String()
	}
	if len(names) > 0 {
		filters = append(filters, "state "+strings.Join(names, ", "))
	}
	if req.p.Stale {
		filters = append(filters, "stale")
	}
	if req.p.OlderThan > 0 {
		filters = append(filters, "older than "+req.p.OlderThan.String())
	}
	return "no records " + where + " match: " + strings.Join(filters, "; ")
}

// stateText is the record's state, marking a pending record whose lease
// has run out by this machine's clock (the store's may differ slightly).
func stateText(rec store.Record, now time.Time) string {
	if rec.State == store.StatePending && !rec.LeaseUntil.IsZero() && now.After(rec.LeaseUntil) {
		return "pending (stale)"
	}
	return rec.State.String()
}

func reasonText(rec store.Record) string {
	if rec.State == store.StateCompleted && rec.Resolution.Reason != "" {
		return printable(rec.Resolution.Reason)
	}
	if rec.State != store.StateIndeterminate || rec.Reason == "" {
		return "-"
	}
	return printable(rec.Reason)
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// age formats how long ago t was, to the two largest units.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// listJSON is the -json form of a listing.
type listJSON struct {
	Records []recordJSON `json:"records"`
	Next    string       `json:"next"`
}

func writeListJSON(out io.Writer, page store.Page) error {
	j := listJSON{Records: make([]recordJSON, 0, len(page.Records)), Next: page.Next}
	for _, rec := range page.Records {
		j.Records = append(j.Records, toRecordJSON(rec))
	}
	return json.NewEncoder(out).Encode(j)
}

// otherTenants says which other tenants have records an empty first page
// of one tenant's listing would have shown, and how many ("" when none do,
// or the store cannot say): a worker that takes its tenant from elsewhere
// than the starter (Options.Tenant, DefaultTenant) records its calls under
// a tenant the operator did not ask about, and "nothing waits" must not
// pass for a quiet backlog. It reads across tenants, as -all-tenants does,
// and names tenants and counts only.
func otherTenants(ctx context.Context, b *backend, req listRequest) string {
	if req.across || req.p.Cursor != "" {
		return ""
	}
	p := req.p
	p.Tenant, p.Cursor, p.Limit = "", "", store.MaxListLimit
	page, err := b.ListAcrossTenants(ctx, p)
	if err != nil || len(page.Records) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, rec := range page.Records {
		counts[rec.Tenant]++
	}
	names := slices.Sorted(maps.Keys(counts))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d)", printable(n), counts[n])
	}
	more := ""
	if page.Next != "" {
		more = fmt.Sprintf(" among the first %d records; there are more", len(page.Records))
	}
	what := "records that match"
	if req.waiting {
		what = "work waiting for a person"
	}
	return fmt.Sprintf("other tenants have %s: %s%s; list them with -tenant NAME, or every tenant with -all-tenants", what, strings.Join(parts, ", "), more)
}
