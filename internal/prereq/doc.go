// Package prereq holds one test, TestPrerequisites, which says which
// groups of this repository's tests run on this machine and which skip,
// and why: `go test ./...` prints only "ok" for a package whose tests
// skipped. Each group is found the way its tests find it (the same
// paths, variables and helpers); the test fails under CI=true when a
// group would skip, since CI must run them all.
//
// go test shows a passing test's output only with -v, so the test also
// writes the groups that skip to the controlling terminal, when there is
// one: a person who runs `go test ./...` sees them. A cached run (nothing
// the test looked at changed) prints nothing again; `go test -count=1 -v
// ./internal/prereq` always does.
package prereq
