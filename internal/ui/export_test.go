package ui

// CompressReportsAbove sets the size above which WriteReport compresses the
// data, for the tests; it returns a function that restores it.
func CompressReportsAbove(n int) (restore func()) {
	old := compressAbove
	compressAbove = n
	return func() { compressAbove = old }
}
