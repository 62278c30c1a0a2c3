package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// blippingStore is a real store whose first claims of each key fail as an
// unreachable store's do: a store that is down for a moment. It injects
// faults through our own store contract; the store behind it is real.
type blippingStore struct {
	store.Store
	failures int

	mu    sync.Mutex
	calls map[string]int
}

func (b *blippingStore) Claim(ctx context.Context, p store.ClaimParams) (store.Result, error) {
	b.mu.Lock()
	b.calls[p.Key]++
	n := b.calls[p.Key]
	b.mu.Unlock()
	if n <= b.failures {
		return store.Result{}, store.Unavailable("claim", fmt.Errorf("blip %d", n))
	}
	return b.Store.Claim(ctx, p)
}

// How many calls end indeterminate under the faults of the in-process
// scenarios, and whether each had to. Calls whose effect had an answer the
// dispatcher could wait for (an attempt that outlived its timeout and then
// booked; a store down for a moment before any body ran) must not put a
// person in the loop; a body that really failed must. Run with -v to see
// the counts (lines starting INDETERMINATE).
func TestIndeterminateOnlyWhenItTrulyIs(t *testing.T) {
	t.Parallel()
	const workflows = 4
	scenarios := []struct {
		name string
		// airline and the store wrapper make the fault; truly says whether
		// the outcome really is unknown.
		airline      func() *airline
		wrap         func(store.Store) store.Store
		startToClose time.Duration
		truly        bool
	}{
		{"attempt_outlived_its_timeout", func() *airline { return &airline{hold: 2 * time.Second} },
			nil, time.Second, false},
		{"store_down_for_a_moment", func() *airline { return &airline{} },
			func(s store.Store) store.Store { return &blippingStore{Store: s, failures: 2, calls: map[string]int{}} },
			10 * time.Second, false},
		{"body_failed", func() *airline { return &airline{failures: 1000} },
			nil, 10 * time.Second, true},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, st store.Store) {
				if sc.wrap != nil {
					st = sc.wrap(st)
				}
				a := sc.airline()
				e := newAirlineEnvWith(t, st, activity.KindEffectful, a, interceptor.Options{Lease: 2 * time.Second})
				var (
					wg            sync.WaitGroup
					mu            sync.Mutex
					indeterminate int
					other         []error
				)
				for i := range workflows {
					wg.Go(func() {
						var result string
						err := e.execute("acme", OneBooking, &result, fmt.Sprintf("F%d", i), sc.startToClose, 500*time.Millisecond)
						mu.Lock()
						defer mu.Unlock()
						if _, ok := activity.AsIndeterminate(err); ok {
							indeterminate++
						} else if err != nil {
							other = append(other, err)
						}
					})
				}
				wg.Wait()
				t.Logf("INDETERMINATE %s calls=%d indeterminate=%d truly=%v", t.Name(), workflows, indeterminate, sc.truly)
				require.Empty(t, other, "no error but the typed ones")
				for i := range workflows {
					assert.LessOrEqual(t, e.ledger.Effects(fmt.Sprintf("F%d", i)), 1, "at most one effect per key")
				}
				if sc.truly {
					assert.Equal(t, workflows, indeterminate, "a body that failed is indeterminate")
				} else {
					assert.Zero(t, indeterminate, "an outcome with an answer is not put to a person")
				}
			})
		})
	}
}
