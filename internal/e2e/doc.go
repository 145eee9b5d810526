// Package e2e holds the live scheduler's end-to-end tests, with real
// processes: TestMain builds the gandiva binary once, whose hidden
// `gandiva trainer` subcommand (the deterministic trainer of
// examples/trainer) is every job. Each trainer runs with -ledger, so the
// jobs themselves record whether they ran exactly once and never twice at
// the same time. docs/LIVE.md lists the tests and what they show; the suite
// takes about a minute.
package e2e
