package quickstart_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The promise is versioned public API: it does not weaken without a major
// version and a changelog entry. These are its words as published; changing
// them means changing this test, and CHANGELOG.md says why.
const (
	promise     = "At most one side effect per key within the retention window."
	notExactly  = "Not exactly once"
	notEver     = "Not ever"
	notAcross   = "Not across tenants"
	readmeTitle = "**The promise: at most one side effect per key within the retention window.**"
)

func TestThePromiseIsPinned(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "interceptor", "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(f.Doc.Text()), " ")
	for _, words := range []string{promise, notExactly, notEver, notAcross} {
		assert.Contains(t, doc, words, "the interceptor package documentation no longer says it")
	}

	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	flat := strings.Join(strings.Fields(string(readme)), " ")
	assert.Contains(t, flat, readmeTitle, "the README no longer says it")
	for _, words := range []string{notExactly, notEver, notAcross} {
		assert.Contains(t, strings.ToLower(flat), strings.ToLower(words), "the README no longer says it")
	}
}
