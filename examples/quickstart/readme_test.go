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

// readmeExcerpt is a README code block that must be an excerpt of a file of
// this example: a marker naming the file, then a fenced Go block.
var readmeExcerpt = regexp.MustCompile("(?s)<!-- excerpt: (examples/quickstart/[^ ]+) -->\n```go\n(.*?)```\n")

// The README shows the quick start's core as excerpts: each block is whole
// lines of the file it names, word for word, so what it shows compiles in
// that file; and the README links every file of the quick start, where the
// whole program is. After changing the example, fix the excerpt the test
// names.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)

	blocks := readmeExcerpt.FindAllSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "the README's quick start shows no excerpt")
	lines := 0
	for _, m := range blocks {
		name, excerpt := string(m[1]), string(m[2])
		src, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if !assert.NoError(t, err, "the README shows an excerpt of %s", name) {
			continue
		}
		assert.NotEmpty(t, strings.TrimSpace(excerpt), "an empty excerpt of %s", name)
		assert.True(t, strings.Contains("\n"+string(src), "\n"+excerpt),
			"the README's excerpt of %s is not whole lines of the file, word for word:\n%s", name, excerpt)
		lines += strings.Count(excerpt, "\n")
	}
	assert.LessOrEqual(t, lines, 40, "the README's quick start core is at most 40 lines of Go; the files hold the rest")
	for _, name := range []string{"examples/quickstart/quickstart.go", "examples/quickstart/worker/main.go", "examples/quickstart/starter/main.go"} {
		rel := strings.TrimPrefix(name, "examples/quickstart/")
		assert.True(t, strings.Contains(string(readme), "]("+name+")") || strings.Contains(string(readme), "](examples/quickstart/"+rel+")"),
			"the README does not link %s", name)
	}
}
