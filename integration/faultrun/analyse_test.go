package faultrun

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAnalyse checks the judge on a ledger and results made by hand: a key
// with two effects is a duplicate, an answer whose effect is missing from
// the ledger is unbacked, an indeterminate call counts as landed exactly
// when its order has an effect, and an untyped error is counted.
func TestAnalyse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ledger-1.jsonl", `{"kind":"charge","key":"o1","effect":"o1/1/1"}
{"kind":"charge","key":"o2","effect":"o2/1/2"}
{"kind":"reserve","key":"s1","effect":"s1/1/3"}
`)
	// The second process was killed mid-line.
	write("ledger-2.jsonl", `{"kind":"charge","key":"o1","effect":"o1/2/1"}
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
	s := &Summary{Indeterminate: map[string]int{}, Landed: map[string]int{}, Errors: map[string]int{}}
	s.analyse(results, entries)
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
	if p := s.Problems(); len(p) != 3 {
		t.Errorf("Problems() = %q, want the duplicate, the unbacked result and the untyped error", p)
	}
}
