package interceptor

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/store"
)

type fuzzSeat struct {
	Seat string `json:"seat"`
	Row  int    `json:"row"`
}

func fuzzBook(context.Context, struct {
	Flight string `json:"flight"`
}) (fuzzSeat, error) {
	return fuzzSeat{}, nil
}

// FuzzDecisionDecode feeds arbitrary text to the decision path a person's
// update or signal goes through: it never panics; it accepts only a
// decision that names the waiting key with a known action, who decided
// and, for complete, a result of the activity's declared type; what it
// accepts survives encoding and decoding again unchanged; and the check
// the update's handler makes on replay, from the history alone, never
// refuses what the validator accepted.
func FuzzDecisionDecode(f *testing.F) {
	const key = "v1:0000000000000000000000000000000000000000000000000000000000000001"
	for _, seed := range []string{
		`{"key":"` + key + `","action":"complete","result":{"seat":"12A","row":12},"by":"ops"}`,
		`{"key":"` + key + `","action":"complete","result":{"seat":"12A","row":12}}`,
		`{"key":"` + key + `","action":"free","by":"ops","reason":"airline says no"}`,
		`{"key":"` + key + `","action":"complete"}`,
		`{"key":"` + key + `","action":"complete","result":"12A"}`,
		`{"key":"` + key + `","acton":"free"}`,
		`"free"`, `null`, `{}`, `[]`, `{"key":1}`,
		`{"key":"` + key + `","action":"FAIL"} trailing`,
	} {
		f.Add(seed)
	}
	mem, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		f.Fatal(err)
	}
	ic, err := New(Options{Store: mem})
	if err != nil {
		f.Fatal(err)
	}
	decl, err := activity.Effectful(fuzzBook, "flight").WithName("Book")
	if err != nil {
		f.Fatal(err)
	}
	if err := ic.Declare(decl); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		o := &workflowOutbound{root: ic, waits: map[string]*wait{
			key: {pending: decision.PendingDecision{Outcome: activity.IndeterminateOutcome{Activity: "Book", Tenant: "acme", Key: key}}, waiters: 1},
		}}
		decode := func(raw []byte) (decision.Decision, error) {
			var d decision.Decision
			return d, o.checkDecision(raw, &d)
		}
		d, err := decode([]byte(text))
		if err != nil {
			return
		}
		var replayed decision.Decision
		if _, err := o.acceptable(json.RawMessage(text), &replayed); err != nil {
			t.Fatalf("the handler refuses (%v) what the validator accepted: %s", err, text)
		}
		if strings.TrimSpace(d.By) == "" {
			t.Fatalf("accepted a decision that names no one: %s", text)
		}
		if d.Key != key {
			t.Fatalf("accepted a decision on key %q nobody waits on: %s", d.Key, text)
		}
		switch d.Action {
		case decision.ActionComplete:
			var seat fuzzSeat
			if err := strictJSON(d.Result, &seat); err != nil {
				t.Fatalf("accepted a result that is not a seat (%v): %s", err, text)
			}
		case decision.ActionFree, decision.ActionRetry, decision.ActionFail:
			if len(d.Result) > 0 {
				t.Fatalf("accepted a result with %s: %s", d.Action, text)
			}
		default:
			t.Fatalf("accepted action %q: %s", d.Action, text)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decode(again)
		if err != nil {
			t.Fatalf("an accepted decision re-encoded is refused (%v): %s", err, again)
		}
		if d2.Key != d.Key || d2.Action != d.Action || !sameJSON(d.Result, d2.Result) || d2.By != d.By || d2.Reason != d.Reason {
			t.Fatalf("round trip changed the decision: %+v vs %+v", d, d2)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value (encoding/json
// may re-escape a result's characters, as "&" into "\u0026").
func sameJSON(a, b json.RawMessage) bool {
	if len(strings.TrimSpace(string(a))) == 0 || len(strings.TrimSpace(string(b))) == 0 {
		return len(strings.TrimSpace(string(a))) == len(strings.TrimSpace(string(b)))
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
