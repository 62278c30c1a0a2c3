package interceptor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/interceptor"
)

// TestEveryCallReportsOneFinalEvent runs one call at a time down each path
// to an end state and checks that it reports exactly one Final event, its
// last, of the kind of that end state.
func TestEveryCallReportsOneFinalEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		act   kindCase
		setup func(h *harness)
		calls int
		want  []interceptor.EventKind // each call's Final event, in order
	}{
		{"Completed", dedupKinds[1], nil, 1, []interceptor.EventKind{interceptor.EventCompleted}},
		{"Deduplicated", dedupKinds[0], nil, 2,
			[]interceptor.EventKind{interceptor.EventCompleted, interceptor.EventDeduplicated}},
		{"Released", dedupKinds[1], func(h *harness) {
			h.acts.on("Reserve", func(context.Context, int, BookRequest) error { return errors.New("boom") })
		}, 1, []interceptor.EventKind{interceptor.EventReleased}},
		{"Indeterminate", dedupKinds[0], func(h *harness) {
			h.acts.on("Book", func(context.Context, int, BookRequest) error { return errors.New("boom") })
		}, 2, []interceptor.EventKind{interceptor.EventIndeterminate, interceptor.EventIndeterminate}},
		{"NotRun", dedupKinds[0], func(h *harness) { h.faults.setDown("Claim", true) }, 1,
			[]interceptor.EventKind{interceptor.EventNotRun}},
		{"Orphaned", dedupKinds[1], func(h *harness) { h.faults.setDown("Complete", true) }, 1,
			[]interceptor.EventKind{interceptor.EventOrphaned}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *interceptor.Options) { o.OrphanRetry = -1 })
			if tt.setup != nil {
				tt.setup(h)
			}
			env := h.activityEnv(t, "acme")
			var finals []interceptor.EventKind
			for range tt.calls {
				before := len(h.rec.all())
				_, _ = book(env, tt.act.fn(h), BookRequest{Flight: "BA117"})
				events := h.rec.all()[before:]
				require.NotEmpty(t, events)
				last := events[len(events)-1]
				assert.True(t, last.Final, "the call's last event (%s) is Final: %v", last.Kind, h.rec.kinds())
				for _, e := range events[:len(events)-1] {
					assert.False(t, e.Final, "only the last event is Final (%s): %v", e.Kind, h.rec.kinds())
				}
				finals = append(finals, last.Kind)
			}
			assert.Equal(t, tt.want, finals)
		})
	}
}
