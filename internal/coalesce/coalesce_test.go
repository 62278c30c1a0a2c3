package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rig is a Group whose batches the test releases one at a time, recording
// what each held.
type rig struct {
	g       *Group[int, int]
	busy    atomic.Bool
	release chan struct{}
	mu      sync.Mutex
	batches [][]int
	lost    []int // calls whose caller was gone when answered
}

func newRig() *rig {
	r := &rig{release: make(chan struct{})}
	r.g = New(r.busy.Load, 100, func(_ context.Context, calls []*Call[int, int]) {
		<-r.release
		r.mu.Lock()
		var reqs []int
		for _, c := range calls {
			reqs = append(reqs, c.Req)
		}
		r.batches = append(r.batches, reqs)
		r.mu.Unlock()
		for _, c := range calls {
			if !r.g.Answer(c, c.Req*10, nil) {
				r.mu.Lock()
				r.lost = append(r.lost, c.Req)
				r.mu.Unlock()
			}
		}
	})
	return r
}

// queued waits until n calls wait in the queue.
func (r *rig) queued(t *testing.T, n int) {
	t.Helper()
	r.until(t, "calls queued", n, func() int { return len(r.g.queue) })
}

// out waits until n of the group's sends are out.
func (r *rig) out(t *testing.T, n int) {
	t.Helper()
	r.until(t, "sends out", n, func() int { return r.g.inFlight })
}

// until waits until count, read under the group's lock, is n.
func (r *rig) until(t *testing.T, what string, n int, count func() int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.g.mu.Lock()
		got := count()
		r.g.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s, want %d", got, what, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoneCallGoesAlone: with the way free, a call runs on its own path at
// once, on the caller's goroutine.
func TestLoneCallGoesAlone(t *testing.T) {
	r := newRig()
	for i := range 3 {
		got, err := r.g.Do(context.Background(), i, func(_ context.Context, req int) (int, error) { return req + 1, nil })
		if err != nil || got != i+1 {
			t.Fatalf("Do(%d) = %d, %v; want %d alone", i, got, err, i+1)
		}
	}
	if len(r.batches) != 0 {
		t.Fatalf("batches %v; want none", r.batches)
	}
}

// TestCallsArrivingDuringASendGoTogether: calls made while the way is busy
// wait, and the next of the group's sends to end takes them all as one
// batch.
func TestCallsArrivingDuringASendGoTogether(t *testing.T) {
	r := newRig()
	out := make(chan struct{})
	aloneDone := make(chan struct{})
	go func() {
		_, _ = r.g.Do(context.Background(), 0, func(context.Context, int) (int, error) {
			<-out // the lone call's round trip is out
			return 0, nil
		})
		close(aloneDone)
	}()
	time.Sleep(10 * time.Millisecond)
	r.busy.Store(true)
	var wg sync.WaitGroup
	got := make([]int, 5)
	for i := 1; i <= 5; i++ {
		wg.Go(func() {
			v, err := r.g.Do(context.Background(), i, func(context.Context, int) (int, error) {
				t.Errorf("call %d went alone while the way was busy", i)
				return 0, nil
			})
			if err != nil {
				t.Error(err)
			}
			got[i-1] = v
		})
	}
	r.queued(t, 5)
	close(out)
	<-aloneDone
	r.release <- struct{}{}
	wg.Wait()
	for i, v := range got {
		if v != (i+1)*10 {
			t.Errorf("call %d answered %d, want %d", i+1, v, (i+1)*10)
		}
	}
	if len(r.batches) != 1 || len(r.batches[0]) != 5 {
		t.Fatalf("batches %v; want one of 5", r.batches)
	}
}

// TestCallerGivingUpInTheQueueLeavesIt: a queued caller whose context ends
// gets its error and is never sent.
func TestCallerGivingUpInTheQueueLeavesIt(t *testing.T) {
	r := newRig()
	out := make(chan struct{})
	go func() {
		_, _ = r.g.Do(context.Background(), 0, func(context.Context, int) (int, error) { <-out; return 0, nil })
	}()
	time.Sleep(10 * time.Millisecond)
	r.busy.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := r.g.Do(ctx, 1, nil)
		errc <- err
	}()
	r.queued(t, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want context.Canceled", err)
	}
	r.queued(t, 0)
	close(out)
	time.Sleep(10 * time.Millisecond)
	if len(r.batches) != 0 {
		t.Fatalf("batches %v; the call that left was sent", r.batches)
	}
}

// TestCallerGivingUpWhileItsBatchIsOut: the caller returns its context's
// error at once, and Answer tells the batch that nobody takes its answer.
func TestCallerGivingUpWhileItsBatchIsOut(t *testing.T) {
	r := newRig()
	r.g.AlwaysBatch()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := r.g.Do(ctx, 7, nil)
		errc <- err
	}()
	r.queued(t, 0) // taken by the batch, which waits for release
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want context.Canceled", err)
	}
	r.release <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		lost := append([]int(nil), r.lost...)
		r.mu.Unlock()
		if len(lost) == 1 && lost[0] == 7 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lost %v; want [7]", lost)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchRunsUnderTheLatestDeadline: one caller's cancellation does not
// end the batch's context, which carries the latest of the deadlines.
func TestBatchRunsUnderTheLatestDeadline(t *testing.T) {
	soon, cancel1 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel1()
	later, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	ctx, cancel := batchContext([]*Call[int, int]{{Ctx: soon}, {Ctx: later}})
	defer cancel()
	d, ok := ctx.Deadline()
	want, _ := later.Deadline()
	if !ok || !d.Equal(want) {
		t.Fatalf("deadline %v %v; want %v", d, ok, want)
	}
	ctx, cancel = batchContext([]*Call[int, int]{{Ctx: soon}, {Ctx: context.Background()}})
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a batch with a caller without a deadline has one")
	}
	cancel1()
	if ctx.Err() != nil {
		t.Fatal("a caller's cancellation ended the batch")
	}
}

// TestQueueIsSentWhenNoneOfTheGroupsSendsIsOut: the way can be busy with
// calls of others (another group's, on the same pool); a queued call is
// then sent at once, as a batch, rather than wait for a send that is not
// coming.
func TestQueueIsSentWhenNoneOfTheGroupsSendsIsOut(t *testing.T) {
	r := newRig()
	r.busy.Store(true)
	done := make(chan int)
	go func() {
		v, _ := r.g.Do(context.Background(), 3, nil)
		done <- v
	}()
	r.release <- struct{}{}
	if v := <-done; v != 30 {
		t.Fatalf("answered %d, want 30", v)
	}
}

// TestGroupSendsTogetherUntilNothingIsOut: once a call found the way busy,
// a call made while one of the group's sends is out queues for the next
// batch even though the way is free again; once none is out, calls go
// alone again.
func TestGroupSendsTogetherUntilNothingIsOut(t *testing.T) {
	r := newRig()
	r.busy.Store(true)
	first := make(chan int)
	go func() {
		v, _ := r.g.Do(context.Background(), 1, nil) // queued, and sent at once: nothing is out
		first <- v
	}()
	r.out(t, 1)         // its batch is out, waiting for release
	r.busy.Store(false) // a connection came free
	second := make(chan int)
	go func() {
		v, _ := r.g.Do(context.Background(), 2, func(context.Context, int) (int, error) {
			t.Error("call 2 went alone while the group's batch was out")
			return 0, nil
		})
		second <- v
	}()
	r.queued(t, 1)
	r.release <- struct{}{} // batch [1] ends; the next takes [2]
	if v := <-first; v != 10 {
		t.Fatalf("call 1 answered %d, want 10", v)
	}
	r.release <- struct{}{}
	if v := <-second; v != 20 {
		t.Fatalf("call 2 answered %d, want 20", v)
	}
	r.out(t, 0) // the last send's end clears the mode
	alone := false
	v, err := r.g.Do(context.Background(), 3, func(_ context.Context, req int) (int, error) {
		alone = true
		return req + 1, nil
	})
	if err != nil || v != 4 || !alone {
		t.Fatalf("call 3 = %d, %v, alone %v; want 4 alone: nothing of the group is out", v, err, alone)
	}
	if len(r.batches) != 2 {
		t.Fatalf("batches %v; want [[1] [2]]", r.batches)
	}
}
