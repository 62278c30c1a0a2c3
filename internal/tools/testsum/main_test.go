package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What go test -json writes for a package with a passing, a skipped and a
// failing test, and one that did not build.
const stream = `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:3: quiet\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"p/a","Test":"TestSkip"}
{"Action":"skip","Package":"p/a","Test":"TestSkip","Elapsed":0}
{"Action":"run","Package":"p/a","Test":"TestBad"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"    a_test.go:5: boom\n"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"p/a","Output":"FAIL\n"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.004s\n"}
{"Action":"fail","Package":"p/a","Elapsed":0.004}
go: downloading example.com/x v1.0.0
{"ImportPath":"p/b [p/b.test]","Action":"build-output","Output":"b_test.go:3:28: undefined: undefined\n"}
{"Action":"start","Package":"p/b"}
{"Action":"output","Package":"p/b","Output":"FAIL\tp/b [build failed]\n"}
{"Action":"fail","Package":"p/b","Elapsed":0,"FailedBuild":"p/b [p/b.test]"}
{"Action":"start","Package":"p/c"}
{"Action":"output","Package":"p/c","Output":"?   \tp/c\t[no test files]\n"}
{"Action":"skip","Package":"p/c","Elapsed":0}
`

func TestFilter(t *testing.T) {
	var out strings.Builder
	c, err := filter(strings.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if want := (counts{passed: 1, failed: 2, skipped: 1}); c != want {
		t.Errorf("counts %+v, want %+v (a package that did not build is one failure; a package is not a test)", c, want)
	}
	want := "    a_test.go:5: boom\n--- FAIL: TestBad (0.00s)\nFAIL\nFAIL\tp/a\t0.004s\n" +
		"go: downloading example.com/x v1.0.0\nb_test.go:3:28: undefined: undefined\nFAIL\tp/b [build failed]\n?   \tp/c\t[no test files]\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestTallyAndLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tally")
	for _, c := range []counts{{passed: 3, skipped: 1}, {passed: 2, failed: 1}} {
		if err := add(file, c); err != nil {
			t.Fatal(err)
		}
	}
	c, err := read(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := line(c); got != "5 passed, 1 failed, 1 skipped" {
		t.Errorf("line %q", got)
	}
	if got := line(counts{passed: 4}); got != "4 passed, 0 failed" {
		t.Errorf("line %q", got)
	}
	if _, err := read(filepath.Join(t.TempDir(), "none")); !os.IsNotExist(err) {
		t.Errorf("a missing tally: %v", err)
	}
}
