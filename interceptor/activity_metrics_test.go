package interceptor_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/interceptor/metricname"
)

// countingHandler is a client.MetricsHandler that remembers what it was
// told, keyed by metric name and tags.
type countingHandler struct {
	tags   map[string]string
	shared *metricCounts
}

type metricCounts struct {
	mu       sync.Mutex
	counters map[string]int64
	timers   map[string]int
}

func newCountingHandler() *countingHandler {
	return &countingHandler{shared: &metricCounts{counters: map[string]int64{}, timers: map[string]int{}}}
}

func (h *countingHandler) id(name string) string {
	keys := make([]string, 0, len(h.tags))
	for k, v := range h.tags {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return name + "{" + strings.Join(keys, ",") + "}"
}

func (h *countingHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &countingHandler{tags: merged, shared: h.shared}
}

func (h *countingHandler) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		h.shared.mu.Lock()
		defer h.shared.mu.Unlock()
		h.shared.counters[h.id(name)] += d
	})
}

func (h *countingHandler) Gauge(string) client.MetricsGauge { return gaugeFunc(func(float64) {}) }

func (h *countingHandler) Timer(name string) client.MetricsTimer {
	return timerFunc(func(time.Duration) {
		h.shared.mu.Lock()
		defer h.shared.mu.Unlock()
		h.shared.timers[h.id(name)]++
	})
}

// matches reports whether the recorded id is the metric name with the
// dispatcher's two tags; the SDK adds tags of its own (task queue, workflow
// type) that these tests do not pin.
func matches(id, name, activity, kind string) bool {
	tags, ok := strings.CutPrefix(id, name+"{")
	if !ok {
		return false
	}
	set := strings.Split(strings.TrimSuffix(tags, "}"), ",")
	return slices.Contains(set, "activity_type="+activity) && slices.Contains(set, "idempotency_kind="+kind)
}

func (h *countingHandler) counter(name, activity, kind string) int64 {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	var n int64
	for id, v := range h.shared.counters {
		if matches(id, name, activity, kind) {
			n += v
		}
	}
	return n
}

func (h *countingHandler) timer(name, activity, kind string) int {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	n := 0
	for id, v := range h.shared.timers {
		if matches(id, name, activity, kind) {
			n += v
		}
	}
	return n
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// The dispatcher counts through the activity's Temporal metrics handler,
// tagged with the activity type and its kind.
func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	metrics := newCountingHandler()
	h.suite.SetMetricsHandler(metrics)
	env := h.activityEnv(t, "acme")

	_, err := book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "a"})
	require.NoError(t, err)
	_, err = book(env, h.acts.Book, BookRequest{Flight: "BA117", RequestID: "b"})
	require.NoError(t, err)
	h.acts.on("Book", func(context.Context, int, BookRequest) error { return fmt.Errorf("gateway timeout") })
	_, err = book(env, h.acts.Book, BookRequest{Flight: "BA118", RequestID: "c"})
	require.Error(t, err)

	assert.Equal(t, int64(2), metrics.counter(metricname.Claims, "Book", "EFFECTFUL"), "two fresh keys taken")
	assert.Equal(t, int64(1), metrics.counter(metricname.Deduplicated, "Book", "EFFECTFUL"))
	assert.Equal(t, int64(1), metrics.counter(metricname.Indeterminate, "Book", "EFFECTFUL"))
	assert.Equal(t, int64(0), metrics.counter(metricname.StoreErrors, "Book", "EFFECTFUL"))
	assert.Equal(t, 3, metrics.timer(metricname.ClaimLatency, "Book", "EFFECTFUL"), "every claim is timed")

	_, err = book(env, h.acts.Lookup, BookRequest{Flight: "BA117"})
	require.NoError(t, err)
	assert.Equal(t, 0, metrics.timer(metricname.ClaimLatency, "Lookup", "READ_ONLY"), "READ_ONLY claims nothing")
}
