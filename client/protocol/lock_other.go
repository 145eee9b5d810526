//go:build !unix

package protocol

// lockDir does nothing where flock is missing: concurrent writers of one
// directory (the ranks of a gang) are not serialised there.
func lockDir(dir string, exclusive bool) (unlock func()) { return func() {} }
