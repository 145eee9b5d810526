//go:build unix

package protocol

import "syscall"

// fenceOpenFlags open the metadata file that diskEpoch reads: never through
// a symbolic link, never blocking (a FIFO).
const fenceOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
