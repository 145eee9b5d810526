package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The checkpoint directory holds one committed checkpoint: the metadata file
// MetaFile, naming a payload file ("ckpt-*.bin") beside it that holds what
// the job's Save hook wrote. A checkpoint is written as:
//  1. the payload, to a fresh file, synced;
//  2. the metadata, to a fresh file, synced, then renamed over MetaFile
//     (the commit point), and the directory synced;
//  3. payloads that the metadata no longer names are removed.
//
// A crash at any step leaves the previous checkpoint readable. Writers hold
// the directory's LockFile exclusively through all three steps, and readers
// hold it shared while they read the metadata and open the payload: the
// processes of a gang spread over nodes (one per node, all with the same
// checkpoint directory) write at the same moments, and step 3 of one would
// otherwise remove the payload another is about to commit, leaving metadata
// that names a missing file.

// MetaFile is the name of the committed checkpoint's metadata file.
const MetaFile = "gandiva-checkpoint.json"

// LockFile is the name of the directory's lock file (flock).
const LockFile = ".gandiva-checkpoint.lock"

// Format is the value of Meta.Format.
const Format = "gandiva-checkpoint"

// ErrNoCheckpoint says that a directory holds no committed checkpoint.
var ErrNoCheckpoint = errors.New("no checkpoint")

// ErrStaleCheckpoint says that the directory holds a checkpoint of a later
// attempt (a greater epoch) than the one trying to write: the writer is a
// superseded copy of the job and must stop.
var ErrStaleCheckpoint = errors.New("a later attempt of the job has checkpointed")

// maxMetaBytes bounds the metadata file a writer reads to learn the epoch
// on disk.
const maxMetaBytes = 1 << 16

// Meta describes a committed checkpoint.
type Meta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Job     string `json:"job,omitempty"`
	// Attempt is the epoch of the attempt that wrote it (EnvAttempt; 0:
	// unknown, a job run outside Gandiva). See WriteCheckpoint.
	Attempt int `json:"attempt,omitempty"`
	// Done is the mini-batches done when the state was saved.
	Done int64 `json:"done"`
	// File is the payload's name, in the same directory.
	File string `json:"file"`
	// Bytes is the payload's size.
	Bytes int64 `json:"bytes"`
	// SavedUnix is when it was committed (seconds since 1970, for people).
	SavedUnix float64 `json:"saved_unix"`
}

// WriteCheckpoint commits a checkpoint to dir (created if missing): write
// produces the payload. meta's Done, Job and Attempt are kept; Format,
// Version, File, Bytes and SavedUnix are filled in. It returns the committed
// metadata.
//
// Fencing: when meta.Attempt is positive and the committed checkpoint was
// written by a later attempt (a greater Attempt), WriteCheckpoint writes
// nothing and returns an error wrapping ErrStaleCheckpoint. The check and
// the commit happen under the directory's exclusive lock, so of two copies
// of a job that write at once, the later attempt's checkpoint is the one
// that stays. A writer without an epoch (0) is not fenced.
func WriteCheckpoint(dir string, meta Meta, write func(io.Writer) error) (Meta, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return meta, fmt.Errorf("checkpoint directory: %w", err)
	}
	unlock := lockDir(dir, true)
	defer unlock()
	if meta.Attempt > 0 {
		if on := diskEpoch(dir); on > meta.Attempt {
			return meta, fmt.Errorf("checkpoint in %s: attempt %d may not replace the checkpoint of attempt %d: %w",
				dir, meta.Attempt, on, ErrStaleCheckpoint)
		}
	}
	f, err := os.CreateTemp(dir, "ckpt-*.bin")
	if err != nil {
		return meta, fmt.Errorf("creating checkpoint payload: %w", err)
	}
	payload := f.Name()
	fail := func(err error) (Meta, error) {
		f.Close()
		os.Remove(payload)
		return meta, err
	}
	cw := &countWriter{w: f}
	if err := write(cw); err != nil {
		return fail(fmt.Errorf("saving state to %s: %w", payload, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("syncing %s: %w", payload, err))
	}
	if err := f.Close(); err != nil {
		return fail(fmt.Errorf("closing %s: %w", payload, err))
	}
	meta.Format, meta.Version = Format, Version
	meta.File = filepath.Base(payload)
	meta.Bytes = cw.n
	meta.SavedUnix = float64(time.Now().UnixNano()) / 1e9
	b, _ := json.Marshal(meta) // plain fields only
	mf, err := os.CreateTemp(dir, ".meta-*.tmp")
	if err != nil {
		return fail(fmt.Errorf("creating checkpoint metadata: %w", err))
	}
	_, err = mf.Write(append(b, '\n'))
	if err == nil {
		err = mf.Sync()
	}
	if cerr := mf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(mf.Name(), filepath.Join(dir, MetaFile))
	}
	if err != nil {
		os.Remove(mf.Name())
		os.Remove(payload)
		return meta, fmt.Errorf("committing checkpoint in %s: %w", dir, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: some file systems refuse to sync directories
		d.Close()
	}
	// Remove payloads the metadata no longer names.
	if old, err := filepath.Glob(filepath.Join(dir, "ckpt-*.bin")); err == nil {
		for _, p := range old {
			if filepath.Base(p) != meta.File {
				os.Remove(p)
			}
		}
	}
	return meta, nil
}

// ReadCheckpoint returns the committed checkpoint of dir and its payload,
// open for reading (the caller closes it). It returns an error wrapping
// ErrNoCheckpoint when there is none, and a different error when the
// metadata is unreadable or the payload is missing or of the wrong size.
func ReadCheckpoint(dir string) (Meta, *os.File, error) {
	var meta Meta
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		unlock := lockDir(dir, false) // (once open, the payload stays readable)
		defer unlock()
	}
	b, err := readMeta(filepath.Join(dir, MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return meta, nil, fmt.Errorf("%s: %w", dir, ErrNoCheckpoint)
	}
	if err != nil {
		return meta, nil, fmt.Errorf("reading checkpoint metadata: %w", err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return meta, nil, fmt.Errorf("checkpoint metadata %s: %w", filepath.Join(dir, MetaFile), err)
	}
	switch {
	case meta.Format != Format:
		return meta, nil, fmt.Errorf("checkpoint metadata: format %q, want %q", meta.Format, Format)
	case meta.Version > Version:
		return meta, nil, fmt.Errorf("checkpoint metadata: version %d is newer than %d", meta.Version, Version)
	case meta.File == "" || strings.ContainsAny(meta.File, `/\`) || meta.File == "." || meta.File == "..":
		return meta, nil, fmt.Errorf("checkpoint metadata: bad file name %q", meta.File)
	case meta.Done < 0 || meta.Bytes < 0:
		return meta, nil, fmt.Errorf("checkpoint metadata: negative done or bytes")
	}
	f, err := os.OpenFile(filepath.Join(dir, meta.File), os.O_RDONLY|fenceOpenFlags, 0)
	if err != nil {
		return meta, nil, fmt.Errorf("opening checkpoint payload: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", meta.File)
	}
	if err != nil {
		f.Close()
		return meta, nil, fmt.Errorf("checkpoint payload: %w", err)
	}
	if st.Size() != meta.Bytes {
		f.Close()
		return meta, nil, fmt.Errorf("checkpoint payload %s has %d bytes, metadata says %d", meta.File, st.Size(), meta.Bytes)
	}
	return meta, f, nil
}

// diskEpoch returns the Attempt of the checkpoint committed in dir, or 0
// when there is none or its metadata is unreadable (a damaged checkpoint is
// replaced, as before). It reads at most maxMetaBytes, and only a regular
// file (not through a symbolic link, never blocking on a FIFO): the
// writer's own directory, but a bounded read all the same.
func diskEpoch(dir string) int {
	f, err := os.OpenFile(filepath.Join(dir, MetaFile), os.O_RDONLY|fenceOpenFlags, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return 0
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes))
	if err != nil {
		return 0
	}
	var m Meta
	if json.Unmarshal(b, &m) != nil || m.Format != Format || m.Attempt < 0 {
		return 0
	}
	return m.Attempt
}

// readMeta reads a metadata file: a regular file, not through a symbolic
// link, without blocking on a FIFO, at most maxMetaBytes.
func readMeta(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|fenceOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err == nil && len(b) > maxMetaBytes {
		err = fmt.Errorf("%s: more than %d bytes", path, maxMetaBytes)
	}
	return b, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
