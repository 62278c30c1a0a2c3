package quickstart_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the README's quick start from the example's source")

// readmeBlock is a README code block that must equal a file of this
// example: a marker naming the file, then a fenced Go block.
var readmeBlock = regexp.MustCompile("(?s)<!-- file: (examples/quickstart/[^ ]+) -->\n```go\n(.*?)```\n")

// The README's quick start is this example's source, word for word, so it
// compiles as shown. After changing the example, run
// `go test -run TestReadme -update` here to rewrite the README.
func TestReadmeQuickStart(t *testing.T) {
	readmePath := filepath.Join("..", "..", "README.md")
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)

	shown := map[string]bool{}
	var failed bool
	rewritten := readmeBlock.ReplaceAllFunc(readme, func(block []byte) []byte {
		m := readmeBlock.FindSubmatch(block)
		name := string(m[1])
		src, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if !assert.NoError(t, err, "the README shows %s", name) {
			return block
		}
		shown[name] = true
		if string(m[2]) != string(src) {
			failed = true
		}
		return []byte("<!-- file: " + name + " -->\n```go\n" + string(src) + "```\n")
	})
	for _, name := range []string{"examples/quickstart/quickstart.go", "examples/quickstart/worker/main.go", "examples/quickstart/starter/main.go"} {
		assert.True(t, shown[name], "the README's quick start does not show %s", name)
	}
	if *update {
		require.NoError(t, os.WriteFile(readmePath, rewritten, 0o644))
		return
	}
	assert.False(t, failed, "the README's quick start differs from examples/quickstart: run `go test -run TestReadme -update` in examples/quickstart")
}
