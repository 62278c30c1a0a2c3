package worker

import (
	"context"

	"github.com/tesserix/idempotency/store"
)

// The plugin's sweeper: one goroutine per worker StartWorker starts
// (unless PluginOptions.SweepInterval is negative) that reports the backlog
// gauges and sweeps the store's expired records on the plugin's schedule.
// StopWorker stops it before the worker stops, StartWorker when the worker
// fails to start.

// startSweeper starts the sweeper of st and returns the function that
// stops it and waits for it; nil when sweeping is off.
func (p *Plugin) startSweeper(st store.Store) func() {
	if p.cfg.sweepEvery < 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	logger := p.cfg.logger
	go func() {
		defer close(done)
		p.mu.Lock()
		metrics := p.cfg.metrics
		if metrics == nil {
			metrics = p.clientMetrics
		}
		p.mu.Unlock()
		backlog := newBacklogGauges(metrics)
		backlog.report(ctx, st, logger)
		store.SweepEveryThen(ctx, st, p.cfg.sweepEvery, 0, func(err error) {
			logger.Warn("idempotency: sweeping expired records", "error", err)
		}, func(ctx context.Context) { backlog.report(ctx, st, logger) })
	}()
	return func() { cancel(); <-done }
}

// stopSweeper stops pw's sweeper, if it runs.
func (p *Plugin) stopSweeper(pw *pluginWorker) {
	p.mu.Lock()
	stop := pw.stopSweep
	pw.stopSweep = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
}
