// Command testsum reads `go test -json` on its standard input, prints what
// `go test` without -json would (each package's line, and the output of
// each test that failed), and counts the tests. make test runs every go
// test through it and ends with its summary, one line:
//
//	412 passed, 0 failed, 3 skipped
//
// Usage:
//
//	go test -json ./... | testsum -tally FILE   # print; add the counts to FILE
//	testsum -summary FILE                      # the closing line
//
// Both exit 1 when a test (or a package's build) failed. A package that
// failed with no test failing — it did not build, or its test binary
// crashed outside a test — counts as one failure.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// counts are the tests seen.
type counts struct{ passed, failed, skipped int }

func main() {
	tally := flag.String("tally", "", "read go test -json on stdin, print it as go test does, and add the counts to this file")
	summary := flag.String("summary", "", "print the counts this file holds as one line")
	flag.Parse()
	switch {
	case *tally != "" && *summary == "":
		c, err := filter(os.Stdin, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		if err := add(*tally, c); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		if c.failed > 0 {
			os.Exit(1)
		}
	case *summary != "" && *tally == "":
		c, err := read(*summary)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		fmt.Println(line(c))
		if c.failed > 0 {
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testsum -tally FILE; testsum -summary FILE")
		os.Exit(2)
	}
}

// line is the closing line.
func line(c counts) string {
	s := fmt.Sprintf("%d passed, %d failed", c.passed, c.failed)
	if c.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", c.skipped)
	}
	return s
}

// filter prints the events of in to out as go test prints them without
// -json, and counts the tests.
func filter(in io.Reader, out io.Writer) (counts, error) {
	var c counts
	buffered := map[string][]string{} // package and test: its output so far
	testFailed := map[string]bool{}   // packages in which a test failed
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (go vet's or the go command's own words): as is.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		id := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			if !testFailed[e.Package] {
				c.failed++ // no test failed: the package did not build, or crashed
			}
		case e.Test == "":
			// A package's pass, skip (no test files) or start: not a test.
		case e.Action == "output":
			if !isProgress(e.Output) {
				buffered[id] = append(buffered[id], e.Output)
			}
		case e.Action == "pass":
			c.passed++
			delete(buffered, id)
		case e.Action == "skip":
			c.skipped++
			delete(buffered, id)
		case e.Action == "fail":
			c.failed++
			testFailed[e.Package] = true
			fmt.Fprint(out, strings.Join(buffered[id], ""))
			delete(buffered, id)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	return c, nil
}

// isProgress reports a line of -v's progress (=== RUN and the like), which
// go test without -v does not print.
func isProgress(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// add adds c to the counts file holds, creating it.
func add(file string, c counts) error {
	old, err := read(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	old.passed += c.passed
	old.failed += c.failed
	old.skipped += c.skipped
	return os.WriteFile(file, fmt.Appendf(nil, "%d %d %d\n", old.passed, old.failed, old.skipped), 0o644)
}

// read returns the counts file holds.
func read(file string) (counts, error) {
	var c counts
	b, err := os.ReadFile(file)
	if err != nil {
		return c, err
	}
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &c.passed, &c.failed, &c.skipped); err != nil {
		return c, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}
