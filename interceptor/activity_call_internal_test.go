package interceptor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/store"
)

// TestCallMovesOnlyAlongTheTable walks judge over every store answer from
// every working state and checks each move it makes is in the table; and
// that a move outside the table panics.
func TestCallMovesOnlyAlongTheTable(t *testing.T) {
	decl := activity.MustDeclare(func(context.Context, string) error { return nil },
		activity.Policy{Kind: activity.KindIdempotent, KeyAllArguments: true})
	x := &execution{decl: decl, opts: &Options{}}
	answers := []struct {
		res store.Result
		err error
	}{
		{res: store.Result{Status: store.StatusAcquired}},
		{res: store.Result{Status: store.StatusCompleted}},
		{res: store.Result{Status: store.StatusIndeterminate}},
		{res: store.Result{Status: store.StatusFree}},
		{res: store.Result{Status: store.StatusHeld}},
		{res: store.Result{Status: store.StatusHeld, LeaseExpired: true}},
		{res: store.Result{Status: store.Status(99)}},
		{err: errors.New("down")},
		{err: store.ErrInvalid},
	}
	for _, from := range []callState{stateClaiming, stateTakingOver, stateWaiting} {
		for _, ans := range answers {
			a := &acquisition{state: from, res: ans.res, err: ans.err, retry: x.storeRetry(context.Background())}
			next := x.judge(context.Background(), a)
			assert.NotPanics(t, func() { a.move(next) }, "%s on %+v → %s", from, ans, next)
		}
	}
	a := &acquisition{state: stateWaiting, res: store.Result{Status: store.StatusAcquired}, retry: x.storeRetry(context.Background())}
	assert.Equal(t, stateNotRun, x.judge(context.Background(), a), "a wait answered as a claim is not an acquisition")

	for _, end := range []callState{stateAcquired, stateAnswered, stateNotRun} {
		a := &acquisition{state: end}
		assert.PanicsWithValue(t, "idempotency: illegal move of a call from "+end.String()+" to claiming",
			func() { a.move(stateClaiming) }, "an end state is final")
	}
	a = &acquisition{state: stateStoreDown}
	assert.Panics(t, func() { a.move(stateAcquired) }, "a store that did not answer acquired nothing")
}
