//go:build !unix

package protocol

// fenceOpenFlags: no O_NOFOLLOW or O_NONBLOCK here; diskEpoch still checks
// that it opened a regular file.
const fenceOpenFlags = 0
