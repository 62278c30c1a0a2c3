package worker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/worker"
)

// readDoc returns a file of the repository.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sections returns the headings of CHANGELOG.md's release sections, newest
// first: "Unreleased", "0.2.0", …
var sectionHeading = regexp.MustCompile(`(?m)^## \[([^\]]+)\]`)

// semver parses "a.b.c" (a "-dev" suffix dropped) into three numbers.
func semver(t *testing.T, v string) [3]int {
	t.Helper()
	var n [3]int
	if _, err := fmt.Sscanf(strings.TrimSuffix(v, "-dev"), "%d.%d.%d", &n[0], &n[1], &n[2]); err != nil {
		t.Fatalf("%q is not a version: %v", v, err)
	}
	return n
}

func older(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// The CHANGELOG's newest section is the code worker.Version names, with
// its upgrade notes: a published release its own section, the code between
// releases ("-dev") the Unreleased one, newer than every published one.
func TestVersionHasAChangelogSection(t *testing.T) {
	text := readDoc(t, "CHANGELOG.md")
	heads := sectionHeading.FindAllStringSubmatchIndex(text, -1)
	if len(heads) < 2 {
		t.Fatalf("CHANGELOG.md has %d release sections", len(heads))
	}
	newest := text[heads[0][2]:heads[0][3]]
	want := worker.Version
	if strings.HasSuffix(worker.Version, "-dev") {
		want = "Unreleased"
	}
	if newest != want {
		t.Fatalf("CHANGELOG.md's newest section is [%s]; worker.Version %s is [%s]: bump both together", newest, worker.Version, want)
	}
	section := text[heads[0][0]:heads[1][0]]
	if !strings.Contains(section, "### Upgrade notes") {
		t.Errorf("the [%s] section has no upgrade notes", newest)
	}
	if want == "Unreleased" {
		previous := text[heads[1][2]:heads[1][3]]
		if !older(semver(t, previous), semver(t, worker.Version)) {
			t.Errorf("worker.Version %s is not newer than the latest release, %s", worker.Version, previous)
		}
		if !strings.Contains(section, "### Upgrade notes (from "+previous+")") {
			t.Errorf("the Unreleased upgrade notes are not from %s, the latest release", previous)
		}
	}
}

// What the docs say of releases agrees with worker.Version: the README
// names it, and a release OPERATING says lacks something this code does is
// an older one. Before, worker.Version said 0.2.0 while OPERATING said
// "a worker of 0.2.0 or older ignores the header" this code reads.
func TestVersionLabelsAgree(t *testing.T) {
	if readme := readDoc(t, "README.md"); !strings.Contains(readme, "this is **"+worker.Version+"**") {
		t.Errorf("README.md does not say this is **%s**", worker.Version)
	}
	this := semver(t, worker.Version)
	orOlder := regexp.MustCompile(`\b(\d+\.\d+\.\d+) or older\b`)
	for _, doc := range []string{"docs/OPERATING.md", "docs/GUIDE.md", "docs/COMPATIBILITY.md", "README.md"} {
		for _, m := range orOlder.FindAllStringSubmatch(readDoc(t, doc), -1) {
			if !older(semver(t, m[1]), this) {
				t.Errorf("%s: %q, but this code is %s", doc, m[0], worker.Version)
			}
		}
	}
}
