package quickstart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/interceptor"
)

// docs/METRICS.md lists every metric the dispatcher reports and every event
// kind: a metric added to interceptor/metricname, or an event to
// interceptor/activity_events.go, without a line there fails here.
func TestMetricsDocListsEverything(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "METRICS.md"))
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join("..", "..", "interceptor", "metricname", "metricname.go"))
	require.NoError(t, err)

	metrics := regexp.MustCompile(`(?m)^\s+\w+\s+= "(\w+)"`).FindAllSubmatch(src, -1)
	require.NotEmpty(t, metrics)
	for _, m := range metrics {
		assert.Contains(t, string(doc), "`"+string(m[1]), "docs/METRICS.md does not list the metric %s", m[1])
	}
	for k := interceptor.EventClaimed; ; k++ {
		name := k.String()
		if name == "unknown" {
			break
		}
		assert.True(t, strings.Contains(string(doc), "| `"+name+"` |"), "docs/METRICS.md does not list the event %s", name)
	}
}
