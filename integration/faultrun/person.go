package faultrun

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/decision"
)

// person plays the operator of a round with Config.AwaitDecision: it asks
// every running workflow what it waits on (the pending query) and decides
// each waiting key by looking it up in the downstream's ledger, as an
// operator consulting the downstream would — the effect found: complete
// with it; not found: free the key — through the idempotency.decide
// Update.
type person struct {
	c         client.Client
	ledgerDir string
	every     time.Duration
	// delay is how long a wait stands before the person looks at it: an
	// operator is paged, not instant.
	delay time.Duration

	mu      sync.Mutex
	running map[string]bool // workflow IDs started and not finished

	// What it did, for the summary.
	decided  map[string]int // decisions by the outcome's reason
	landed   map[string]int // those whose effect was in the ledger
	rejected map[string]int // decisions the workflow refused, by why
	latency  []time.Duration
	seen     map[string]bool // workflow/key/wait already decided
	times    map[string]int  // decisions per workflow/key
	failed   int             // fail decisions
}

// maxDecisionsPerKey is how many times the person frees or completes one
// workflow's key before deciding fail.
const maxDecisionsPerKey = 2

func newPerson(c client.Client, ledgerDir string, delay time.Duration) *person {
	return &person{c: c, ledgerDir: ledgerDir, every: 250 * time.Millisecond, delay: delay, running: map[string]bool{},
		decided: map[string]int{}, landed: map[string]int{}, rejected: map[string]int{}, seen: map[string]bool{},
		times: map[string]int{}}
}

func (p *person) started(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[id] = true
}

func (p *person) finished(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, id)
}

// run decides until ctx ends.
func (p *person) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		ids := make([]string, 0, len(p.running))
		for id := range p.running {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		sort.Strings(ids)
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			p.look(ctx, id)
		}
	}
}

// look decides what workflow id waits on.
func (p *person) look(ctx context.Context, id string) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := p.c.QueryWorkflow(qctx, id, "", decision.QueryName)
	if err != nil {
		return // finished, or not yet on a worker: next round
	}
	var pending []decision.PendingDecision
	if v.Get(&pending) != nil {
		return
	}
	for _, pd := range pending {
		o := pd.Outcome
		if pd.Rejected != nil || o.Key == "" || time.Since(pd.Since) < p.delay {
			continue
		}
		mark := id + "/" + o.Key + "/" + pd.Since.String()
		p.mu.Lock()
		done := p.seen[mark]
		p.mu.Unlock()
		if done {
			continue
		}
		f, err := Lookup(p.ledgerDir, o.Key)
		if err != nil || f.InFlight {
			// The downstream is still working on a request under the key:
			// a careful operator looks again later.
			continue
		}
		p.mu.Lock()
		p.seen[mark] = true
		p.mu.Unlock()
		effect, found := f.Effect, f.Landed
		d := decision.Decision{Key: o.Key, By: "faultrun-person", Reference: "ledger"}
		p.mu.Lock()
		p.times[id+"/"+o.Key]++
		again := p.times[id+"/"+o.Key] > maxDecisionsPerKey
		p.mu.Unlock()
		if again {
			// Decided twice, and the call fails again: an operator stops
			// here and lets the call fail (the downstream keeps timing
			// out; freeing the key again would go round for ever).
			d.Action, d.Reason = decision.ActionFail, "decided twice; the call keeps failing"
		} else if found {
			d.Action, d.Reason = decision.ActionComplete, "the ledger has the charge"
			d.Result, _ = json.Marshal(effect)
		} else {
			d.Action, d.Reason = decision.ActionFree, "the ledger has no charge under the key"
		}
		if os.Getenv("FAULTRUN_PERSON_TRACE") != "" {
			fmt.Fprintf(os.Stderr, "faultrun: %s person decides %s on %s %s (%s, waiting %s): probe %+v\n",
				time.Now().Format("15:04:05.000"), d.Action, id, o.Key, o.Reason, time.Since(pd.Since).Round(time.Millisecond), pd.Probe)
		}
		uctx, ucancel := context.WithTimeout(ctx, 30*time.Second)
		h, err := p.c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: decision.UpdateName, Args: []any{d},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var res decision.Result
		if err == nil {
			err = h.Get(uctx, &res)
		}
		ucancel()
		if err != nil && ctx.Err() != nil {
			// The round ended while the decision was on its way: the
			// workflow rejected nothing, the person stopped.
			return
		}
		p.mu.Lock()
		if err != nil {
			p.rejected[why(err)]++
		} else {
			if d.Action == decision.ActionFail {
				p.failed++
			}
			p.decided[string(o.Reason)]++
			if found {
				p.landed[string(o.Reason)]++
			}
			p.latency = append(p.latency, time.Since(pd.Since))
		}
		p.mu.Unlock()
	}
}

// why shortens a rejection to its reason without the key.
func why(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "already decided"):
		return "already decided"
	case strings.Contains(s, "no call is waiting"):
		return "no call waiting"
	case strings.Contains(s, "context deadline exceeded"):
		return "no answer in 30s"
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// PersonSummary is what the person of a round with AwaitDecision did.
type PersonSummary struct {
	// Decided counts the decisions applied, by the outcome's reason;
	// Landed those whose effect the ledger had.
	Decided, Landed map[string]int
	// Rejected counts the decisions the workflows refused, by why.
	Rejected map[string]int
	// Failed counts the decisions that let the call fail (a key decided
	// twice that failed again).
	Failed int
	// Median and Max are the times from the outcome becoming indeterminate
	// (the wait's start) to the decision applied.
	Median, Max time.Duration
}

func (p *person) summary() *PersonSummary {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &PersonSummary{Decided: p.decided, Landed: p.landed, Rejected: p.rejected, Failed: p.failed}
	if n := len(p.latency); n > 0 {
		l := slices.Clone(p.latency)
		slices.Sort(l)
		s.Median, s.Max = l[n/2], l[n-1]
	}
	return s
}

// Total is the number of decisions applied, and of those whose effect
// the ledger had.
func (s *PersonSummary) Total() (decided, landed int) {
	for r, n := range s.Decided {
		decided += n
		landed += s.Landed[r]
	}
	return decided, landed
}

// rows are the person's rows of the summary.
func (s *PersonSummary) rows(workflows int) [][2]string {
	if s == nil {
		return [][2]string{{"person decisions per 100 workflows", "-"}}
	}
	decided, landed := s.Total()
	per100 := 0.0
	if workflows > 0 {
		per100 = float64(decided) * 100 / float64(workflows)
	}
	rows := [][2]string{{"person decisions per 100 workflows", fmt.Sprintf("%.1f (%d; effect landed %d)", per100, decided, landed)}}
	for _, r := range slices.Sorted(maps.Keys(s.Decided)) {
		rows = append(rows, [2]string{"  decided " + r, fmt.Sprintf("%d (%d)", s.Decided[r], s.Landed[r])})
	}
	rejected := 0
	var whys []string
	for w, n := range s.Rejected {
		rejected += n
		whys = append(whys, fmt.Sprintf("%s: %d", w, n))
	}
	sort.Strings(whys)
	v := fmt.Sprint(rejected)
	if len(whys) > 0 {
		v += " (" + strings.Join(whys, "; ") + ")"
	}
	rows = append(rows,
		[2]string{"  of them fail (decided twice before)", fmt.Sprint(s.Failed)},
		[2]string{"decisions rejected", v},
		[2]string{"indeterminate → applied (median/max)", fmt.Sprintf("%v/%v", s.Median.Round(10*time.Millisecond), s.Max.Round(10*time.Millisecond))},
	)
	return rows
}

// IndeterminateCalls counts the calls that reached the workflow as an
// indeterminate outcome.
func (s *Summary) IndeterminateCalls() int {
	n := 0
	for _, c := range s.Indeterminate {
		n += c
	}
	return n
}
