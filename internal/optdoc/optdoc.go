// Package optdoc checks that the defaults an options struct's documentation
// states are the values its constants hold: every "Defaults to VALUE
// ([Name])" in a file's comments must say Name's value, so a changed
// default cannot leave the documentation behind.
package optdoc

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	stated = regexp.MustCompile(`Defaults to (.+?) \(\[([\w.]+)\]\)`)
	units  = map[string]time.Duration{"hour": time.Hour, "minute": time.Minute, "second": time.Second, "millisecond": time.Millisecond}
)

// Check reads the Go file at path and requires, for every "Defaults to
// VALUE ([Name])" in its comments (a comment may wrap it over lines), that
// values holds Name and that VALUE says it: "N unit(s)" for a
// time.Duration (hours, minutes, seconds, milliseconds), a number for an
// int, a quoted string for a string. It returns how many it checked.
func Check(t testing.TB, path string, values map[string]any) int {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Join each run of comment lines into one text, so a statement that
	// wraps is read whole.
	var blocks []string
	var cur []string
	for _, line := range strings.Split(string(src), "\n") {
		l := strings.TrimSpace(line)
		if text, ok := strings.CutPrefix(l, "//"); ok {
			cur = append(cur, strings.TrimSpace(text))
			continue
		}
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, " "))
			cur = nil
		}
	}
	n := 0
	for _, b := range blocks {
		for _, m := range stated.FindAllStringSubmatch(b, -1) {
			n++
			said, name := m[1], m[2]
			v, ok := values[name]
			if !ok {
				t.Errorf("%s: %q states the default %s, whose value the test was not given", path, m[0], name)
				continue
			}
			if got, want := say(v), said; got != want {
				t.Errorf("%s: the documentation says %s defaults to %s; it is %s", path, name, want, got)
			}
		}
	}
	return n
}

// say writes v as the documentation states a default.
func say(v any) string {
	switch v := v.(type) {
	case time.Duration:
		for _, u := range []string{"hour", "minute", "second", "millisecond"} {
			if d := units[u]; v%d == 0 {
				n := int64(v / d)
				if n == 1 {
					return "1 " + u
				}
				return strconv.FormatInt(n, 10) + " " + u + "s"
			}
		}
		return v.String()
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprint(v)
	}
}
