package worker

import (
	"context"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/store"
)

// backlogGauges reports how many records wait for a person — indeterminate,
// and pending with their lease run out (stale) — per activity type. An
// activity type that has none left is reported once more, at zero, so a
// dashboard sees the backlog drain.
type backlogGauges struct {
	h        client.MetricsHandler
	reported map[string]bool // activity types with a non-zero gauge
}

func newBacklogGauges(h client.MetricsHandler) *backlogGauges {
	return &backlogGauges{h: h, reported: map[string]bool{}}
}

func (b *backlogGauges) report(ctx context.Context, st store.Store, logger log.Logger) {
	if b.h == nil {
		return
	}
	counts, err := st.CountBacklog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("idempotency: counting the backlog", "error", err)
		}
		return
	}
	seen := make(map[string]bool, len(counts))
	for _, c := range counts {
		b.set(c.ActivityType, c.Indeterminate, c.Stale)
		seen[c.ActivityType] = true
	}
	for activityType := range b.reported {
		if !seen[activityType] {
			b.set(activityType, 0, 0)
			delete(b.reported, activityType)
		}
	}
	for activityType := range seen {
		b.reported[activityType] = true
	}
}

func (b *backlogGauges) set(activityType string, indeterminate, stale int) {
	h := b.h.WithTags(map[string]string{"activity_type": activityType})
	h.Gauge(metricname.BacklogIndeterminate).Update(float64(indeterminate))
	h.Gauge(metricname.BacklogStale).Update(float64(stale))
}
