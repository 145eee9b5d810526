package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
)

// ProbeCheckpoint reports the checkpoint committed in dir for a reader more
// privileged than the directory's owner: the node agent, as root, looking
// into a job's checkpoint directory, which the job controls and may fill
// with traps. Unlike ReadCheckpoint (the job's own read), it
//
//   - never follows a symbolic link: every component of dir (made absolute)
//     is opened with O_NOFOLLOW from the root, and so are the files in it,
//     so dir's path must be free of links (the agent resolves its
//     checkpoint root's);
//   - never opens what is not a regular file (a FIFO, a device, a socket):
//     the type is checked before the open and again on the open file, and
//     the open does not block (O_NONBLOCK);
//   - reads only files owned by dir's owner (not a root file linked in),
//     at most maxMetaBytes of metadata, and no byte of the payload (only
//     its size);
//   - creates nothing and takes no lock, so that a job holding the lock
//     cannot make it wait; a checkpoint committed while it looks (the
//     payload it named already removed) is looked at again, twice at most.
//
// It returns the metadata, an error wrapping ErrNoCheckpoint when dir or
// its metadata file does not exist, or another error naming what it
// refused or could not read.
func ProbeCheckpoint(dir string) (Meta, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Meta{}, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	dfd, owner, err := openDirNoFollow(abs)
	if err != nil {
		return Meta{}, err
	}
	defer syscall.Close(dfd)
	var meta Meta
	for try := 0; ; try++ {
		meta, err = probeOnce(dfd, abs, owner)
		if err == nil || !errors.Is(err, errPayloadGone) || try == 2 {
			return meta, err
		}
	}
}

// errPayloadGone: the payload the metadata named is missing (a writer may
// have committed another since).
var errPayloadGone = errors.New("the payload it names is missing")

func probeOnce(dfd int, dir string, owner uint32) (Meta, error) {
	var meta Meta
	fd, st, err := openRegularAt(dfd, dir, MetaFile, owner)
	if errors.Is(err, syscall.ENOENT) {
		return meta, fmt.Errorf("%s: %w", dir, ErrNoCheckpoint)
	}
	if err != nil {
		return meta, fmt.Errorf("checkpoint metadata: %w", err)
	}
	if st.Size > maxMetaBytes {
		syscall.Close(fd)
		return meta, fmt.Errorf("checkpoint metadata %s: %d bytes, more than the %d allowed", filepath.Join(dir, MetaFile), st.Size, maxMetaBytes)
	}
	b := make([]byte, maxMetaBytes+1)
	n := 0
	for n < len(b) {
		k, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(fd)
			return meta, fmt.Errorf("reading checkpoint metadata %s: %w", filepath.Join(dir, MetaFile), err)
		}
		if k == 0 {
			break
		}
		n += k
	}
	syscall.Close(fd)
	if n > maxMetaBytes {
		return meta, fmt.Errorf("checkpoint metadata %s: more than the %d bytes allowed", filepath.Join(dir, MetaFile), maxMetaBytes)
	}
	if err := json.Unmarshal(b[:n], &meta); err != nil {
		return meta, fmt.Errorf("checkpoint metadata %s: %w", filepath.Join(dir, MetaFile), err)
	}
	switch {
	case meta.Format != Format:
		return meta, fmt.Errorf("checkpoint metadata: format %q, want %q", meta.Format, Format)
	case meta.Version > Version:
		return meta, fmt.Errorf("checkpoint metadata: version %d is newer than %d", meta.Version, Version)
	case meta.File == "" || strings.ContainsAny(meta.File, "/\\\x00") || meta.File == "." || meta.File == "..":
		return meta, fmt.Errorf("checkpoint metadata: bad file name %q", meta.File)
	case meta.Done < 0 || meta.Bytes < 0:
		return meta, fmt.Errorf("checkpoint metadata: negative done or bytes")
	}
	pfd, pst, err := openRegularAt(dfd, dir, meta.File, owner)
	if errors.Is(err, syscall.ENOENT) {
		return meta, fmt.Errorf("checkpoint payload %s: %w", filepath.Join(dir, meta.File), errPayloadGone)
	}
	if err != nil {
		return meta, fmt.Errorf("checkpoint payload: %w", err)
	}
	syscall.Close(pfd)
	if pst.Size != meta.Bytes {
		return meta, fmt.Errorf("checkpoint payload %s has %d bytes, metadata says %d", meta.File, pst.Size, meta.Bytes)
	}
	return meta, nil
}

// openDirNoFollow opens directory dir (absolute) component by component
// from the root, following no symbolic link, and returns its descriptor
// and its owner. A missing component is ErrNoCheckpoint.
func openDirNoFollow(dir string) (int, uint32, error) {
	const flags = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	fd, err := syscall.Open("/", flags, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("opening /: %w", err)
	}
	at := "/"
	for _, c := range strings.Split(filepath.Clean(dir), "/") {
		if c == "" {
			continue
		}
		at = filepath.Join(at, c)
		var next int
		for {
			next, err = syscall.Openat(fd, c, flags, 0)
			if err != syscall.EINTR {
				break
			}
		}
		syscall.Close(fd)
		switch {
		case err == syscall.ENOENT:
			return -1, 0, fmt.Errorf("%s: %w", dir, ErrNoCheckpoint)
		case err == syscall.ELOOP || err == syscall.ENOTDIR:
			return -1, 0, fmt.Errorf("checkpoint directory %s: %s is not a directory (a symbolic link?): not followed", dir, at)
		case err != nil:
			return -1, 0, fmt.Errorf("checkpoint directory %s: opening %s: %w", dir, at, err)
		}
		fd = next
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, 0, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	return fd, st.Uid, nil
}

// openRegularAt opens name in directory dfd (path dir, for errors) for
// reading, only if it is a regular file owned by owner: it is looked at
// first through an O_PATH descriptor (which opens nothing: no FIFO waits,
// no device's open runs), without following a link, then opened with
// O_NOFOLLOW and O_NONBLOCK and checked to be the same file (it may have
// been swapped in between). The error wraps syscall.ENOENT when name does
// not exist.
func openRegularAt(dfd int, dir, name string, owner uint32) (int, *syscall.Stat_t, error) {
	path := filepath.Join(dir, name)
	var pre syscall.Stat_t
	pfd, err := openat(dfd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("%s: %w", path, err)
	}
	err = syscall.Fstat(pfd, &pre)
	syscall.Close(pfd)
	if err != nil {
		return -1, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := regularOf(&pre, owner); err != nil {
		return -1, nil, fmt.Errorf("%s: %w", path, err)
	}
	fd, err := openat(dfd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC)
	if err != nil {
		if err == syscall.ELOOP {
			return -1, nil, fmt.Errorf("%s is a symbolic link: not followed", path)
		}
		return -1, nil, fmt.Errorf("%s: %w", path, err)
	}
	st := new(syscall.Stat_t)
	if err := syscall.Fstat(fd, st); err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := regularOf(st, owner); err != nil || st.Dev != pre.Dev || st.Ino != pre.Ino {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("%s: changed while it was opened: refused", path)
	}
	return fd, st, nil
}

func openat(dfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// oPath is O_PATH (not in package syscall on every architecture; this
// value on all that Go supports on Linux).
const oPath = 0x200000

func regularOf(st *syscall.Stat_t, owner uint32) error {
	switch {
	case st.Mode&syscall.S_IFMT == syscall.S_IFLNK:
		return errors.New("a symbolic link: not followed")
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return fmt.Errorf("not a regular file (type %#o): refused", st.Mode&syscall.S_IFMT)
	case st.Uid != owner:
		return fmt.Errorf("owned by uid %d, not by the directory's owner (uid %d): refused", st.Uid, owner)
	}
	return nil
}
