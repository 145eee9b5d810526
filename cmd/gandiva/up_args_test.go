package main

import "testing"

// upTestArgs are extra flags for an up run in tests.
func upTestArgs(t *testing.T) []string { return nil }
