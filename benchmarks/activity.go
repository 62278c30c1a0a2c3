package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/testenv"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// ChargeRequest is the benchmark activity's argument; every call has a
// fresh Order, so every call claims a fresh key.
type ChargeRequest struct {
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
}

// charge is the activity: it does nothing, so what is measured is the
// path around it.
func charge(_ context.Context, req ChargeRequest) (string, error) {
	return "charged " + req.Order, nil
}

// chargeDecl declares charge IDEMPOTENT, keyed by the order.
var chargeDecl = activity.Idempotent(charge, "order")

// ChargeMany is the benchmark workflow: n activities one after another.
func ChargeMany(ctx workflow.Context, prefix string, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for i := range n {
		var s string
		req := ChargeRequest{Order: prefix + "-" + strconv.Itoa(i), Amount: 100}
		if err := workflow.ExecuteActivity(ctx, chargeDecl.Name(), req).Get(ctx, &s); err != nil {
			return i, err
		}
	}
	return n, nil
}

// activityWorker is one configuration: a worker on a task queue of its own.
type activityWorker struct {
	name  string
	queue string
	stop  func()
}

// benchActivity is section 3.
func benchActivity(ctx context.Context, e *benchEnv, cfg config, out, progress io.Writer) error {
	t0 := time.Now()
	srv := temporaltest.NewServer()
	defer srv.Stop()
	fmt.Fprintf(progress, "   in-process Temporal server up in %s\n", time.Since(t0).Round(time.Millisecond))
	logger := zap.NewNop()
	c := srv.NewClientWithOptions(worker.ClientOptions(client.Options{}, logger))
	defer c.Close()

	mem, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		return err
	}
	ps, err := pgstore.New(e.pool, pgstore.Options{Schema: e.schema, Table: "activity", TTL: benchTTL})
	if err != nil {
		return err
	}
	defer ps.Close()
	if err := ps.EnsureSchema(ctx); err != nil {
		return err
	}
	rs, err := redisstore.New(e.redis, redisstore.Options{Prefix: e.prefix + ":activity", TTL: redisTTL})
	if err != nil {
		return err
	}
	defer rs.Close()

	stores := []struct {
		name string
		s    store.Store
	}{{"memory", mem}, {"pgstore", ps}, {"redisstore", rs}}
	if e.citus != nil {
		cs, err := citusStore(ctx, e, "activity")
		if err != nil {
			return fmt.Errorf("citus: %w", err)
		}
		defer cs.Close()
		stores = append(stores, struct {
			name string
			s    store.Store
		}{citusActivityWorker, cs})
	}

	var workers []activityWorker
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	// No interceptor: the SDK worker with the same function under the
	// same name.
	{
		q := testenv.UniqueName("none")
		w := sdkworker.New(c, q, sdkworker.Options{})
		w.RegisterWorkflow(ChargeMany)
		w.RegisterActivityWithOptions(charge, sdkactivity.RegisterOptions{Name: chargeDecl.Name()})
		if err := w.Start(); err != nil {
			return err
		}
		workers = append(workers, activityWorker{"no interceptor", q, w.Stop})
	}
	for _, st := range stores {
		q := testenv.UniqueName(strings.Fields(st.name)[0])
		w, err := worker.New(c, q, worker.Options{Idempotency: interceptor.Options{Store: st.s}, Logger: logger, SweepInterval: -1})
		if err != nil {
			return err
		}
		w.RegisterWorkflow(ChargeMany)
		if err := w.Register(chargeDecl); err != nil {
			return err
		}
		if err := w.Start(); err != nil {
			return err
		}
		workers = append(workers, activityWorker{st.name, q, w.Stop})
	}

	runFlows := func(queue string, flows, per int) (time.Duration, error) {
		tctx := interceptor.WithTenant(ctx, benchTenant)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, flows)
		for range flows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := testenv.UniqueName("wf")
				run, err := c.ExecuteWorkflow(tctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, ChargeMany, id, per)
				if err == nil {
					var n int
					err = run.Get(tctx, &n)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return 0, err
		}
		return time.Since(start), nil
	}

	// Warm every worker up (first workflow task, caches, connections).
	for _, w := range workers {
		if _, err := runFlows(w.queue, 1, 2); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	modes := []struct {
		name     string
		flows, n int
	}{
		{name: fmt.Sprintf("sequential: 1 workflow × %d activities", cfg.Sequential), flows: 1, n: cfg.Sequential},
		{name: fmt.Sprintf("concurrent: %d workflows × %d activities", cfg.Workflows, cfg.PerFlow), flows: cfg.Workflows, n: cfg.PerFlow},
	}
	perAct := make(map[[2]int][]float64) // [mode, worker] → µs per activity, one per rep
	for rep := range cfg.Reps {
		for mi, m := range modes {
			for k := range workers {
				wi := (k + rep) % len(workers)
				d, err := runFlows(workers[wi].queue, m.flows, m.n)
				if err != nil {
					return fmt.Errorf("%s: %w", workers[wi].name, err)
				}
				us := float64(d.Microseconds()) / float64(m.flows*m.n)
				perAct[[2]int{mi, wi}] = append(perAct[[2]int{mi, wi}], us)
				fmt.Fprintf(progress, "   rep %d %-42s %-15s %8.0f µs/activity\n", rep+1, m.name, workers[wi].name, us)
			}
		}
	}
	fmt.Fprintf(out, "## 3. Cost per activity on the in-process Temporal server\n\nWall time per activity of an IDEMPOTENT activity that does nothing, "+
		"each configuration on a worker and task queue of its own on one server. Ratio = configuration ÷ no interceptor within one repetition: median (min–max) of %d.\n\n", cfg.Reps)
	fmt.Fprintln(out, "| workload | configuration | µs per activity | ÷ no interceptor |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for mi, m := range modes {
		base := perAct[[2]int{mi, 0}]
		for wi, w := range workers {
			xs := perAct[[2]int{mi, wi}]
			ratio := "1"
			if wi > 0 {
				ratio = spread(ratios(xs, base), "%.2f")
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s |\n", m.name, w.name, spread(xs, "%.0f"), ratio)
			if wi > 0 && m.flows > 1 && w.name != citusActivityWorker { // Citus: measured, no goal
				bound := 1.10 // a durable store
				if w.name == "memory" {
					bound = 1.05
				}
				e.addGoal(goal{what: w.name + " ÷ no interceptor, per activity", at: m.name, ratios: ratios(xs, base), bound: bound, most: true})
			}
		}
	}
	fmt.Fprintln(out)
	return nil
}
