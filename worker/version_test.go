package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/worker"
)

// The CHANGELOG has a section for the release worker.Version names, with
// its upgrade notes: bump both together.
func TestVersionHasAChangelogSection(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	head := "## [" + worker.Version + "]"
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("CHANGELOG.md has no %q section", head)
	}
	section := text[i:]
	if j := strings.Index(section[len(head):], "\n## ["); j >= 0 {
		section = section[:len(head)+j]
	}
	if !strings.Contains(section, "### Upgrade notes") {
		t.Errorf("the %s section has no upgrade notes", worker.Version)
	}
}
