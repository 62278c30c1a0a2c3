// Package observability_test checks the alerting rules and the dashboard
// beside it against the metrics the library reports.
package observability_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/internal/testenv"
)

// metricName finds the library's metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\bidempotency_[a-z_]+`)

// documented returns the metric names docs/METRICS.md lists.
func documented(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "METRICS.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("`(idempotency_[a-z_]+)`").FindAllSubmatch(doc, -1) {
		names[string(m[1])] = true
	}
	return names
}

// known reports whether name is a documented metric, or a histogram's
// series of one (_bucket, _sum, _count).
func known(docs map[string]bool, name string) bool {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if strings.HasSuffix(name, suffix) && docs[strings.TrimSuffix(name, suffix)] {
			return true
		}
	}
	return false
}

// Every metric the rules and the dashboard query is one the library
// reports: a renamed metric fails here, not silently in production.
func TestEveryQueriedMetricIsDocumented(t *testing.T) {
	docs := documented(t)
	rules, err := os.ReadFile("idempotency-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile("idempotency-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exprs := []string{string(rules)}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	seen := 0
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			seen++
			if !known(docs, name) {
				t.Errorf("%s is queried but docs/METRICS.md lists no such metric", name)
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d metric references found: the files were not read as expected", seen)
	}
}

// promtool loads the rules and runs their unit tests. CI installs it
// (.ci/run); a machine without it fails the test, as a missing service
// does, unless IDEMPOTENCY_SKIP_MISSING_SERVICES=1 (testenv.Unreachable).
func TestRulesLoadInPrometheus(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unreachable(t, "promtool (Debian's prometheus package: apt-get install --no-install-recommends prometheus)", err)
		return
	}
	for _, args := range [][]string{
		{"check", "rules", "idempotency-alerts.yml"},
		{"test", "rules", "idempotency-alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
