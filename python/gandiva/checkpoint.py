"""The checkpoint format shared with the Go client (client/protocol).

A checkpoint directory holds one committed checkpoint: the metadata file
``gandiva-checkpoint.json`` naming a payload file ``ckpt-*.bin`` beside it,
which holds what the job's save hook wrote. The payload is written and
synced first, then the metadata is written to a temporary file, synced and
renamed over the old one (the commit point); payloads no longer named are
removed. A crash at any step leaves the previous checkpoint readable.
A writer holds the directory's lock file ``.gandiva-checkpoint.lock``
(flock, exclusive) from its payload to that clean-up, as the Go client
does: the processes of a gang spread over nodes share the directory, and
one's clean-up would otherwise remove the payload another is committing.

Fencing: the metadata's ``attempt`` is the epoch of the attempt that wrote
it (``GANDIVA_ATTEMPT``, greater for every later attempt of a job). Under
the lock, a writer with an epoch refuses to replace the checkpoint of a
later one (StaleCheckpoint): a superseded copy of the job never overwrites
its successor's state.
"""

import contextlib
import glob
import json
import os
import tempfile
import time

META_FILE = "gandiva-checkpoint.json"
LOCK_FILE = ".gandiva-checkpoint.lock"
FORMAT = "gandiva-checkpoint"
VERSION = 1


MAX_META_BYTES = 1 << 16


class NoCheckpoint(Exception):
    """The directory holds no committed checkpoint."""


class StaleCheckpoint(RuntimeError):
    """The directory holds a checkpoint of a later attempt than the writer's:
    the writer is a superseded copy of the job and must stop."""


def write_checkpoint(directory, done, save, job="", attempt=0):
    """Commit a checkpoint of ``done`` mini-batches to ``directory`` (created
    if missing); ``save(f)`` writes the payload to the binary file ``f``.
    Returns the committed metadata (a dict)."""
    os.makedirs(directory, 0o750, exist_ok=True)
    with _locked(directory):
        if attempt and int(attempt) > 0:
            on_disk = _disk_epoch(directory)
            if on_disk > int(attempt):
                raise StaleCheckpoint(f"checkpoint in {directory}: attempt {int(attempt)} may not replace "
                                      f"the checkpoint of attempt {on_disk}")
        return _write(directory, done, save, job, attempt)


def _disk_epoch(directory):
    """The attempt of the committed checkpoint, 0 when there is none or its
    metadata is unreadable. Reads a regular file only (no link followed, no
    FIFO waited on), at most MAX_META_BYTES."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(os.path.join(directory, META_FILE), flags)
    except OSError:
        return 0
    try:
        import stat
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        raw = os.read(fd, MAX_META_BYTES)
    except OSError:
        return 0
    finally:
        os.close(fd)
    try:
        meta = json.loads(raw)
        n = int(meta.get("attempt", 0)) if isinstance(meta, dict) and meta.get("format") == FORMAT else 0
    except (ValueError, TypeError, OverflowError):
        return 0
    return max(n, 0)


@contextlib.contextmanager
def _locked(directory):
    """Hold the directory's lock (LOCK_FILE) exclusively; without fcntl, or
    a lock file, go on unlocked."""
    try:
        import fcntl
        lfd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(lfd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lfd)  # (releases the lock)


def _write(directory, done, save, job, attempt):
    fd, payload = tempfile.mkstemp(prefix="ckpt-", suffix=".bin", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            save(f)
            f.flush()
            os.fsync(f.fileno())
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "done": int(done),
            "file": os.path.basename(payload),
            "bytes": os.path.getsize(payload),
            "saved_unix": time.time(),
        }
        if job:
            meta["job"] = job
        if attempt:
            meta["attempt"] = int(attempt)
        mfd, mpath = tempfile.mkstemp(prefix=".meta-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(mfd, "w") as m:
                m.write(json.dumps(meta) + "\n")
                m.flush()
                os.fsync(m.fileno())
            os.replace(mpath, os.path.join(directory, META_FILE))
        except BaseException:
            _remove(mpath)
            raise
    except BaseException:
        _remove(payload)
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # some file systems refuse to sync directories
    for old in glob.glob(os.path.join(directory, "ckpt-*.bin")):
        if os.path.basename(old) != meta["file"]:
            _remove(old)
    return meta


def read_checkpoint(directory):
    """Return ``(meta, path)`` of the committed checkpoint in ``directory``.
    Raises NoCheckpoint when there is none and ValueError when it is damaged."""
    try:
        with open(os.path.join(directory, META_FILE)) as f:
            raw = f.read()
    except FileNotFoundError:
        raise NoCheckpoint(directory) from None
    try:
        meta = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"checkpoint metadata in {directory}: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"checkpoint metadata in {directory}: not a {FORMAT}")
    if int(meta.get("version", 0)) > VERSION:
        raise ValueError(f"checkpoint metadata: version {meta.get('version')} is newer than {VERSION}")
    name = meta.get("file", "")
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"checkpoint metadata: bad file name {name!r}")
    if int(meta.get("done", -1)) < 0 or int(meta.get("bytes", -1)) < 0:
        raise ValueError("checkpoint metadata: negative done or bytes")
    path = os.path.join(directory, name)
    size = os.path.getsize(path)
    if size != meta["bytes"]:
        raise ValueError(f"checkpoint payload {name} has {size} bytes, metadata says {meta['bytes']}")
    return meta, path


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass
