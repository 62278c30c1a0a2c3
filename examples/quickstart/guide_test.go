package quickstart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guideBlock is a Go block of docs/GUIDE.md, with the excerpt marker that
// must stand before it, if it does.
var guideBlock = regexp.MustCompile("(?s)(<!-- excerpt: ([^ ]+) -->\n)?```go\n(.*?)```\n")

// Every Go snippet of the guide compiles: each is an excerpt of a file that
// builds with this module (examples/quickstart/guide/guide.go), whole lines
// word for word — as they stand in the file, or, for code inside a
// function, with that function's indentation removed.
func TestGuideSnippets(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "GUIDE.md"))
	require.NoError(t, err)
	blocks := guideBlock.FindAllSubmatch(guide, -1)
	require.NotEmpty(t, blocks)
	for _, m := range blocks {
		name, excerpt := string(m[2]), string(m[3])
		first, _, _ := strings.Cut(excerpt, "\n")
		if !assert.NotEmpty(t, name, "the guide's Go block %q is no excerpt of a file that compiles: mark it <!-- excerpt: path -->", first) {
			continue
		}
		src, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if !assert.NoError(t, err, "the guide shows an excerpt of %s", name) {
			continue
		}
		file := "\n" + string(src)
		indented := strings.ReplaceAll("\n\t"+strings.ReplaceAll(strings.TrimSuffix(excerpt, "\n"), "\n", "\n\t")+"\n", "\n\t\n", "\n\n")
		assert.True(t, strings.Contains(file, "\n"+excerpt) || strings.Contains(file, indented),
			"the guide's excerpt of %s is not whole lines of the file, word for word:\n%s", name, excerpt)
	}
}
