package metrics_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyCluster: package metrics summarises records that every
// executor builds (the simulator, the live server), so of this module it
// imports only the plain data of package cluster, never an executor.
func TestImportsOnlyCluster(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		checked++
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/gandiva-sched/gandiva/") && path != "github.com/gandiva-sched/gandiva/internal/cluster" {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no files checked")
	}
}
