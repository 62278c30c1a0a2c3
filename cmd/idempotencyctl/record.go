package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode"

	"github.com/tesserix/idempotency/store"
)

// A record as the commands print it: show's text and the text helpers the
// other commands name a record's fields with, and the JSON of show -json
// and list -json.

// printable returns s as it is when every rune is printable and it holds no
// space at either end, and quoted otherwise, so that text from a record can
// neither break a line nor drive the terminal.
func printable(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if unicode.IsSpace(rune(s[0])) || unicode.IsSpace(rune(s[len(s)-1])) {
		return strconv.Quote(s)
	}
	return s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// workflowIDText is the record's workflow ID, or a dash that says why
// there is none.
func workflowIDText(o store.Origin) string {
	if o.WorkflowID == "" && o.ActivityID != "" {
		return "- (no workflow: a standalone activity or a Nexus operation)"
	}
	return printableOrDash(o.WorkflowID)
}

func writeRecord(out io.Writer, rec store.Record) {
	rows := []struct{ k, v string }{
		{"tenant", printable(rec.Tenant)},
		{"key", printable(rec.Key)},
		{"state", rec.State.String()},
		{"holder", printable(rec.Holder)},
		{"token", strconv.FormatInt(rec.Token, 10)},
		{"lease_until", formatTime(rec.LeaseUntil)},
		{"expires_at", expiresText(rec)},
		{"created_at", formatTime(rec.CreatedAt)},
		{"updated_at", formatTime(rec.UpdatedAt)},
		{"reason", printableOrDash(rec.Reason)},
		{"workflow_id", workflowIDText(rec.Origin)},
		{"run_id", printableOrDash(rec.Origin.RunID)},
		{"activity", printableOrDash(rec.Origin.ActivityType)},
		{"activity_id", printableOrDash(rec.Origin.ActivityID)},
		{"attempt", attemptText(rec.Origin.Attempt)},
		{"outcome", viewOutcome(rec.Outcome).String()},
		{"decided", resolutionText(rec.Resolution)},
		{"retention", retentionText(rec.Retention)},
		{"checked", checkText(rec.Check)},
	}
	for _, r := range rows {
		fmt.Fprintf(out, "%-12s %s\n", r.k, r.v)
	}
}

// retentionText says which retention window the record keeps: its
// activity's own, or the store's.
func retentionText(r time.Duration) string {
	if r <= 0 {
		return "the store's"
	}
	return r.String() + " (the activity's own)"
}

// checkText says whether the record keeps a digest of checked arguments
// (never their values), and which.
func checkText(c string) string {
	if c == "" {
		return "no (no digest of checked arguments kept)"
	}
	return "yes, digest " + printable(c)
}

// resolutionText is the resolution trail on one line, or "-".
func resolutionText(r store.Resolution) string {
	if r == (store.Resolution{}) {
		return "-"
	}
	s := r.Action.String()
	if r.By != "" {
		s += " by " + printable(r.By)
	}
	if !r.At.IsZero() {
		s += " at " + formatTime(r.At)
	}
	if r.Reason != "" {
		s += "; reason: " + printable(r.Reason)
	}
	if r.Reference != "" {
		s += "; reference: " + printable(r.Reference)
	}
	return s
}

// attemptText shows an attempt number, or "-" for a record that does not
// name its origin.
func attemptText(n int32) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(int64(n), 10)
}

func printableOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// recordJSON is the -json form of a record.
type recordJSON struct {
	Tenant     string     `json:"tenant"`
	Key        string     `json:"key"`
	State      string     `json:"state"`
	Holder     string     `json:"holder"`
	Token      int64      `json:"token,string"` // a string: JSON readers round 64-bit integers
	LeaseUntil *time.Time `json:"lease_until"`
	ExpiresAt  *time.Time `json:"expires_at"`
	CreatedAt  *time.Time `json:"created_at"`
	UpdatedAt  *time.Time `json:"updated_at"`
	Reason     string     `json:"reason"`
	// The execution that made the standing claim; empty (0 for Attempt)
	// when the record does not name it.
	WorkflowID   string `json:"workflow_id"`
	RunID        string `json:"run_id"`
	ActivityType string `json:"activity_type"`
	ActivityID   string `json:"activity_id"`
	Attempt      int32  `json:"attempt"`
	// Outcome is the decoded outcome, or null when there is none or it
	// could not be decoded (OutcomeDecoded says which).
	Outcome         json.RawMessage `json:"outcome"`
	OutcomeDecoded  bool            `json:"outcome_decoded"`
	OutcomeBytes    int             `json:"outcome_bytes"`
	OutcomeEncoding string          `json:"outcome_encoding,omitempty"`
	// Resolution is the person's decision that completed the record; null
	// when no person decided it.
	Resolution *resolutionJSON `json:"resolution"`
	// RetentionSeconds is the record's own retention window; 0 when the
	// store's applies.
	RetentionSeconds float64 `json:"retention_seconds"`
	// Check is the digest of the checked arguments the record keeps; ""
	// for none.
	Check string `json:"check"`
}

// resolutionJSON is the -json form of a record's resolution trail.
type resolutionJSON struct {
	Action    string     `json:"action"`
	By        string     `json:"by"`
	Reason    string     `json:"reason"`
	Reference string     `json:"reference"`
	At        *time.Time `json:"at"`
}

func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func writeRecordJSON(out io.Writer, rec store.Record) error {
	return json.NewEncoder(out).Encode(toRecordJSON(rec))
}

func toRecordJSON(rec store.Record) recordJSON {
	v := viewOutcome(rec.Outcome)
	j := recordJSON{
		Tenant:           rec.Tenant,
		Key:              rec.Key,
		State:            rec.State.String(),
		Holder:           rec.Holder,
		Token:            rec.Token,
		LeaseUntil:       jsonTime(rec.LeaseUntil),
		ExpiresAt:        jsonTime(rec.ExpiresAt),
		CreatedAt:        jsonTime(rec.CreatedAt),
		UpdatedAt:        jsonTime(rec.UpdatedAt),
		Reason:           rec.Reason,
		WorkflowID:       rec.Origin.WorkflowID,
		RunID:            rec.Origin.RunID,
		ActivityType:     rec.Origin.ActivityType,
		ActivityID:       rec.Origin.ActivityID,
		Attempt:          rec.Origin.Attempt,
		Outcome:          json.RawMessage("null"),
		OutcomeDecoded:   v.json != nil,
		OutcomeBytes:     v.size,
		OutcomeEncoding:  v.encoding,
		RetentionSeconds: rec.Retention.Seconds(),
		Check:            rec.Check,
	}
	if v.json != nil {
		j.Outcome = v.json
	}
	if r := rec.Resolution; r != (store.Resolution{}) {
		j.Resolution = &resolutionJSON{Action: r.Action.String(), By: r.By, Reason: r.Reason, Reference: r.Reference, At: jsonTime(r.At)}
	}
	return j
}

// expiresText says when rec expires: never, for a record kept until a
// person decides (store.NeverExpires), rather than that sentinel's date.
func expiresText(rec store.Record) string {
	if !rec.ExpiresAt.Before(store.NeverExpires) {
		return "never (kept until a person decides)"
	}
	return formatTime(rec.ExpiresAt)
}
