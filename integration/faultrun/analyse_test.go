package faultrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalyse checks the judge on a ledger and results made by hand: a key
// with two effects is a duplicate, an answer whose effect is missing from
// the ledger is unbacked, an indeterminate call counts as landed exactly
// when its order has an effect, an untyped error is counted, and the
// duplicate is described in the samples.
func TestAnalyse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ledger-1.jsonl", `{"kind":"charge","key":"o1","ikey":"k1","effect":"o1/1/1"}
{"kind":"charge","key":"o2","effect":"o2/1/2"}
{"kind":"reserve","key":"s1","effect":"s1/1/3"}
`)
	// The second process was killed mid-line.
	write("ledger-2.jsonl", `{"kind":"charge","key":"o1","ikey":"k1","effect":"o1/2/1"}
{"kind":"reserve","key":"s1","effect":"s1/2/2"}
{"kind":"charge","key":"o3","eff`)
	entries, torn, err := MergeLedgers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 || torn != 1 {
		t.Fatalf("merged %d entries and %d torn lines, want 5 and 1", len(entries), torn)
	}
	results := []*WorkflowResult{
		{Order: "o1", Calls: []CallResult{{Class: ClassOK, Effect: "o1/1/1"}, {Class: ClassIndeterminate, Reason: "recorded"}}},
		{Order: "o2", Calls: []CallResult{{Class: ClassOK, Effect: "o2/9/9"}}},
		{Order: "o3", Calls: []CallResult{{Class: ClassIndeterminate, Reason: "holder_lost"}, {Class: ClassOther, Err: "boom"}}},
		nil, // a hung workflow has no result
	}
	// What the workers noted: a takeover of o1's key whose answer never
	// came, one of o2's that was answered, a renewal that failed, and a
	// takeover of an IDEMPOTENT key (not counted among the takeovers).
	write("calls-2.jsonl", `{"at":"2026-12-03T10:00:01Z","pid":2,"op":"takeover","activity":"Charge","key":"k1","supersede":7,"attempt":2,"ctx_ended":true,"err":"context deadline exceeded"}
{"at":"2026-12-03T10:00:02Z","pid":2,"op":"takeover","activity":"Charge","key":"k2","supersede":8,"status":"acquired","token":9}
{"at":"2026-12-03T10:00:00Z","pid":2,"op":"renew","key":"k1","token":7,"err":"i/o timeout"}
{"at":"2026-12-03T10:00:02Z","pid":2,"op":"takeover","activity":"Reserve","key":"s9","supersede":3,"err":"EOF"}
{"at":"2026-12-03T10:00:03Z","pid":2,"op":"clai`)
	events, err := ReadCallEvents(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 || events[0].Op != OpRenew {
		t.Fatalf("read %d call events (first %+v), want 4 in time order, the torn line skipped", len(events), events[0])
	}
	s := &Summary{Indeterminate: map[string]int{}, Landed: map[string]int{}, Errors: map[string]int{}}
	s.analyse(results, entries, events)
	check := func(name string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	check("Effects", s.Effects, 3)
	check("Keys", s.Keys, 2)
	check("Duplicates", s.Duplicates, 1)
	check("ExtraEffects", s.ExtraEffects, 1)
	check("ReserveRepeats", s.ReserveRepeats, 1)
	check("Calls", s.Calls, 5)
	check("Results", s.Results, 2)
	check("Unbacked", s.Unbacked, 1)
	check("Indeterminate[recorded]", s.Indeterminate["recorded"], 1)
	check("Landed[recorded]", s.Landed["recorded"], 1)
	check("Indeterminate[holder_lost]", s.Indeterminate["holder_lost"], 1)
	check("Landed[holder_lost]", s.Landed["holder_lost"], 0)
	check("Untyped", s.Untyped, 1)
	check("AskedKeys", s.AskedKeys, 2)
	check("AskedLanded", s.AskedLanded, 1)
	check("Takeovers", s.Takeovers, 2)
	check("TakeoversUnanswered", s.TakeoversUnanswered, 1)
	check("StoreErrors[takeover]", s.StoreErrors[OpTakeover], 2)
	check("StoreErrors[renew]", s.StoreErrors[OpRenew], 1)
	found := false
	for _, line := range s.Samples {
		if strings.HasPrefix(line, "o1 charged 2 times:") {
			found = true
			for _, want := range []string{"effect o1/1/1", "effect o1/2/1", "=indeterminate(recorded)",
				"pid 2 renew token 7: i/o timeout", "pid 2 takeover Charge attempt 2 superseding 7: context deadline exceeded (context ended)"} {
				if !strings.Contains(line, want) {
					t.Errorf("the duplicate's sample %q lacks %q", line, want)
				}
			}
		}
	}
	if !found {
		t.Errorf("Samples = %q: no sample describes the duplicate o1", s.Samples)
	}
	if p := s.Problems(); len(p) != 3 {
		t.Errorf("Problems() = %q, want the duplicate, the unbacked result and the untyped error", p)
	}
}
