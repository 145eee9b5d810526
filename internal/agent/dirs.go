package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The agent's directories, with jobs running as other accounts:
//
//	WORK            0711, the agent's: jobs may pass through, not list
//	WORK/logs       0700, the agent's: logs are served through the API only
//	WORK/jobs       0711
//	WORK/jobs/USER  0700, the user's account: default working directories
//	CKPT            0711 (the checkpoint root, shared storage)
//	CKPT/USER       0700, the user's account: checkpoints
//
// so that a job reaches its own user's directories and nothing of the
// agent's nor of another user's. Directories under a user's are made
// without following symbolic links (the user's jobs could plant one) and
// then given to the account.

// prepareRoot makes dir (and its missing parents, mode 0755) with mode
// 0711 when jobs run as other accounts (0700 otherwise), and checks that
// those accounts can reach it: every parent must let others pass (o+x).
func prepareRoot(dir string, shared bool) error {
	if err := mkdirAllMode(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o700)
	if shared {
		mode = 0o711
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	if !shared {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s: the accounts jobs run as cannot reach it: %s is mode %04o (others may not pass); "+
				"put it elsewhere (such as /var/lib/gandiva-agent) or chmod o+x %s", dir, d, st.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// mkdirAllMode is os.MkdirAll with the mode applied despite the umask.
func mkdirAllMode(dir string, mode os.FileMode) error {
	dir = filepath.Clean(dir)
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllMode(parent, mode); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(dir, mode)
}

// mkdirOwned makes root/parts[0]/parts[1]/... (root must exist; it is the
// agent's), each component mode 0700 and owned by acc (nil: left the
// agent's), without following a symbolic link at any component. It returns
// the path, free of symbolic links (root's own, the admin's, resolved): the
// agent later looks into such a directory as root without following any
// link (protocol.ProbeCheckpoint).
func mkdirOwned(root string, parts []string, acc *account) (string, error) {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	path := root
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "/\x00") {
			syscall.Close(fd)
			return "", fmt.Errorf("%s: bad path component %q", path, p)
		}
		path = filepath.Join(path, p)
		if err := syscall.Mkdirat(fd, p, 0o700); err != nil && err != syscall.EEXIST {
			syscall.Close(fd)
			return "", &os.PathError{Op: "mkdir", Path: path, Err: err}
		}
		next, err := syscall.Openat(fd, p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		syscall.Close(fd)
		if err != nil {
			if err == syscall.ELOOP || err == syscall.ENOTDIR {
				return "", fmt.Errorf("%s: not a directory (a symbolic link?): refused", path)
			}
			return "", &os.PathError{Op: "open", Path: path, Err: err}
		}
		fd = next
		if err := syscall.Fchmod(fd, 0o700); err != nil {
			syscall.Close(fd)
			return "", &os.PathError{Op: "chmod", Path: path, Err: err}
		}
		if acc != nil && !acc.self {
			if err := syscall.Fchown(fd, int(acc.uid), int(acc.gid)); err != nil {
				syscall.Close(fd)
				return "", &os.PathError{Op: "chown", Path: path, Err: err}
			}
		}
	}
	syscall.Close(fd)
	return path, nil
}
