package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function in the policies (from the line of func
// to that of its closing brace): a longer one is split into named steps.
const maxFuncLines = 59

// TestFunctionsAreShort fails when a function in package policy or one of
// its subpackages (test files excluded) is longer than maxFuncLines.
func TestFunctionsAreShort(t *testing.T) {
	longest, where, checked := 0, "", 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checked++
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: func %s is %d lines, more than %d", fset.Position(fd.Pos()), fd.Name.Name, n, maxFuncLines)
			}
			if n > longest {
				longest, where = n, fset.Position(fd.Pos()).String()+" "+fd.Name.Name
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d functions; is the test in the right directory?", checked)
	}
	t.Logf("longest of %d functions: %d lines (%s)", checked, longest, where)
}
