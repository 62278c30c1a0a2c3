package interceptor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/store"
)

// TestCallMovesOnlyAlongTheTable walks judge over every store answer from
// every working state, and over both outcomes of a store that did not
// answer, and checks each move it makes is in the table; that judge
// writes nothing; and that a move outside the table panics with the trail
// of states that led to it.
func TestCallMovesOnlyAlongTheTable(t *testing.T) {
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
	lost := &store.Record{Token: 7}
	for _, from := range []callState{stateClaiming, stateTakingOver, stateWaiting} {
		for _, ans := range answers {
			for _, ctxErr := range []error{nil, context.Canceled} {
				a := &acquisition{state: from, res: ans.res, err: ans.err, lost: lost}
				before := *a
				v := judge(a, ctxErr, "")
				assert.Equal(t, before, *a, "judge writes nothing")
				assert.NotPanics(t, func() { a.move(v.next) }, "%s on %+v → %s", from, ans, v.next)
			}
		}
	}
	for _, resumed := range []bool{false, true} {
		for _, l := range []*store.Record{nil, lost} {
			a := &acquisition{state: stateStoreDown, err: errors.New("down"), resumed: resumed, lost: l}
			v := judge(a, nil, "")
			assert.NotPanics(t, func() { a.move(v.next) }, "storeDown resumed=%v lost=%v → %s", resumed, l != nil, v.next)
			switch {
			case !resumed:
				assert.Equal(t, stateNotRun, v.next, "a store that stays down ends the call not run")
			case l != nil:
				assert.Equal(t, stateTakingOver, v.next, "the same takeover is made again")
				assert.Same(t, l, v.lost)
			default:
				assert.Equal(t, stateClaiming, v.next, "the same claim is made again")
			}
		}
	}
	a := &acquisition{state: stateWaiting, res: store.Result{Status: store.StatusAcquired}}
	v := judge(a, nil, "")
	assert.Equal(t, stateNotRun, v.next, "a wait answered as a claim is not an acquisition")
	assert.Error(t, v.err)

	for _, end := range []callState{stateAcquired, stateAnswered, stateNotRun} {
		a := &acquisition{state: end}
		assert.PanicsWithValue(t, "idempotency: illegal move of a call from "+end.String()+" to claiming (trail: "+end.String()+")",
			func() { a.move(stateClaiming) }, "an end state is final")
	}
	a = &acquisition{state: stateClaiming}
	a.move(stateWaiting)
	a.move(stateStoreDown)
	assert.PanicsWithValue(t, "idempotency: illegal move of a call from storeDown to acquired (trail: claiming → waiting → storeDown)",
		func() { a.move(stateAcquired) }, "a store that did not answer acquired nothing")
	for range 10 {
		a.move(stateClaiming)
		a.move(stateStoreDown)
	}
	assert.PanicsWithValue(t, "idempotency: illegal move of a call from storeDown to acquired (trail: … → "+
		"storeDown → claiming → storeDown → claiming → storeDown → claiming → storeDown → claiming → storeDown)",
		func() { a.move(stateAcquired) }, "the trail keeps the last states")
}
