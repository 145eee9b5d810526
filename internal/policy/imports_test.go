package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are imports a policy must not have: the engine and the shells
// (a policy sees only the snapshot), clocks, global randomness and I/O.
var forbidden = []string{
	"github.com/gandiva-sched/gandiva/internal/engine",
	"github.com/gandiva-sched/gandiva/internal/sim",
	"github.com/gandiva-sched/gandiva/internal/server",
	"github.com/gandiva-sched/gandiva/internal/agent",
	"github.com/gandiva-sched/gandiva/internal/store",
	"github.com/gandiva-sched/gandiva/internal/api",
	"github.com/gandiva-sched/gandiva/internal/model",
	"os", "os/exec", "net", "net/http", "io/ioutil", "time", "log", "log/slog", "math/rand", "syscall", "unsafe",
}

// seededRand are the only names of math/rand/v2 a policy may use: building a
// generator from a seed it was given, never the package's global one.
var seededRand = map[string]bool{"New": true, "NewPCG": true, "Rand": true, "PCG": true}

// TestPoliciesArePure fails when a policy package (non-test files) imports
// anything that would let it read a clock, global randomness, the
// simulator's hidden model or do I/O.
func TestPoliciesArePure(t *testing.T) {
	dirs, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, ".")
	checked := 0
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || dir == "registry" || dir == "testdata" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checked++
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbidden {
					if path == bad {
						t.Errorf("%s imports %s", f, path)
					}
				}
				if path == "math/rand/v2" {
					checkSeeded(t, f)
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked only %d files; is the test in the right directory?", checked)
	}
}

func checkSeeded(t *testing.T, file string) {
	af, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(af, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "rand" && !seededRand[sel.Sel.Name] {
				t.Errorf("%s uses rand.%s: use a generator seeded from policy.Config.Seed", file, sel.Sel.Name)
			}
		}
		return true
	})
}
