// Command housemeasure measures the house's shape with go/ast: methods per
// receiver type, library files over a line limit, exported names per package,
// (those not marked Deprecated), and the Markdown and doc.go volume. Issue 46's closing note quotes it before
// and after; run it from the repository's root:
//
//	go run ./internal/tools/housemeasure
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	maxMethods := flag.Int("methods", 40, "report receivers with more methods than this")
	maxLines := flag.Int("lines", 600, "report library files longer than this")
	flag.Parse()

	fset := token.NewFileSet()
	methods := map[string]int{}  // pkgdir.Type -> count
	exported := map[string]int{} // pkgdir -> exported top-level names
	var long []string
	docLines := 0
	mdLines := map[string]int{}

	_ = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			// Other modules (integration, examples, benchmarks, contrib) are not the library.
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			mdLines[path] = countLines(path)
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		n := countLines(path)
		if filepath.Base(path) == "doc.go" {
			docLines += n
		}
		if n > *maxLines && !strings.HasSuffix(path, "sql.go") {
			long = append(long, fmt.Sprintf("%5d %s", n, path))
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		internal := strings.Contains("/"+dir+"/", "/internal/") || strings.HasPrefix(dir, "cmd")
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[dir+"."+recvName(d.Recv.List[0].Type)]++
					continue
				}
				if d.Name.IsExported() && !internal && f.Name.Name != "main" && !deprecated(d.Doc) {
					exported[dir]++
				}
			case *ast.GenDecl:
				if internal || f.Name.Name == "main" {
					continue
				}
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && !deprecated(s.Doc) && !deprecated(d.Doc) {
							exported[dir]++
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && !deprecated(s.Doc) && !(len(d.Specs) == 1 && deprecated(d.Doc)) {
								exported[dir]++
							}
						}
					}
				}
			}
		}
		return nil
	})

	fmt.Printf("receivers with more than %d methods:\n", *maxMethods)
	printTop(methods, *maxMethods, 10)
	fmt.Printf("library files over %d lines (the SQL table aside):\n", *maxLines)
	sort.Strings(long)
	for _, l := range long {
		fmt.Println("  " + l)
	}
	total := 0
	for _, n := range exported {
		total += n
	}
	fmt.Printf("exported names: %d in all\n", total)
	printTop(exported, 0, 12)
	md := 0
	for _, n := range mdLines {
		md += n
	}
	fmt.Printf("docs: %d lines of doc.go, %d lines of Markdown (CHANGELOG.md %d)\n", docLines, md, mdLines["CHANGELOG.md"])
}

// deprecated reports whether a doc comment marks its name deprecated: such a
// name is kept for one release and is not counted in the surface.
func deprecated(g *ast.CommentGroup) bool {
	return g != nil && strings.Contains(g.Text(), "Deprecated:")
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func printTop(m map[string]int, over, limit int) {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range m {
		if v > over {
			all = append(all, kv{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].k < all[j].k
	})
	for i, e := range all {
		if i == limit {
			fmt.Printf("  … and %d more\n", len(all)-limit)
			break
		}
		fmt.Printf("  %4d %s\n", e.v, e.k)
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
