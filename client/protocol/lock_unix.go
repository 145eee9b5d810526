//go:build unix

package protocol

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes the lock of checkpoint directory dir (LockFile: flock,
// exclusive for a writer, shared for a reader), waiting for it, and returns
// the function that releases it. Without a lock file (a directory the caller
// cannot write), it goes on unlocked, as before the lock existed.
func lockDir(dir string, exclusive bool) (unlock func()) {
	// (Not through a symbolic link, and never blocking on a FIFO: the
	// directory may be another account's.)
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return func() {}
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return func() {}
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // (closing releases the lock)
}
