"""The in-job client: call ``step()`` once per mini-batch.

The client reports progress to the Gandiva agent that started the job and,
at the mini-batch boundary (inside ``step()``), carries out what the agent
asks: save the job's state to host memory and free the GPU (suspend),
restore it (resume), or write a checkpoint and stop (migration). Outside
Gandiva (no ``GANDIVA_FD``) it runs standalone: it counts mini-batches,
takes the periodic checkpoints ``GANDIVA_CHECKPOINT_EVERY`` asks for, and
restores when ``GANDIVA_RESTORE=1``. In a pod of a Kubernetes shared node
(``GANDIVA_AGENT_SOCKET`` set, no ``GANDIVA_FD``) it attaches to the node's
agent: it dials that socket, says hello naming its pod, and waits for the
agent's welcome, which gives the job its GPUs; it sets CUDA_VISIBLE_DEVICES
and GANDIVA_GPUS from it before it restores a checkpoint and returns, so
nothing may initialise the GPU before the Client is made. The protocol is
described in client/protocol (Go) and docs/CLIENT.md.

Fencing: the agent renews its hold on the job with ``lease`` messages; once
the last one has run out (the agent is stopped or cut off from the server,
which will restart the job elsewhere), ``step()`` raises AgentLost at the
next boundary. A checkpoint refused because a later attempt of the job has
written one raises Superseded.
"""

import io
import json
import os
import select
import signal
import socket
import sys
import time

from . import checkpoint as _ckpt

PROTOCOL_VERSION = 1
MAX_LINE = 1 << 16

ENV_FD = "GANDIVA_FD"
ENV_JOB = "GANDIVA_JOB"
ENV_ATTEMPT = "GANDIVA_ATTEMPT"
ENV_CHECKPOINT_DIR = "GANDIVA_CHECKPOINT_DIR"
ENV_RESTORE = "GANDIVA_RESTORE"
ENV_CHECKPOINT_EVERY = "GANDIVA_CHECKPOINT_EVERY"
ENV_REPORT_EVERY = "GANDIVA_REPORT_EVERY"
ENV_GPUS = "GANDIVA_GPUS"
ENV_PRERUN = "GANDIVA_PRERUN"
ENV_HOLD = "GANDIVA_HOLD"
ENV_AGENT_SOCKET = "GANDIVA_AGENT_SOCKET"
ENV_POD_UID = "GANDIVA_POD_UID"
ENV_POD_NAME = "GANDIVA_POD_NAME"
ENV_POD_NAMESPACE = "GANDIVA_POD_NAMESPACE"
ENV_ATTACH_TIMEOUT = "GANDIVA_ATTACH_TIMEOUT"
DEFAULT_REPORT_EVERY = 1.0
DEFAULT_ATTACH_TIMEOUT = 120.0


class Stop(SystemExit):
    """Raised by ``step()`` when the job must exit with status 0: its
    checkpoint is written for a migration (or a suspension to disk) and it
    will continue elsewhere, or it was the pre-run of its first mini-batch
    (GANDIVA_PRERUN=1) and that is done. Being a SystemExit, it ends the
    program cleanly unless caught."""

    def __init__(self):
        super().__init__(0)


class Terminated(SystemExit):
    """Raised by ``step()`` after the process received SIGTERM (standalone,
    with a checkpoint directory and a ``save`` hook, as in a pod of a
    Kubernetes Job that ``gandiva kube`` suspends): the checkpoint is written
    and the job must exit now with status 143, as a process killed by
    SIGTERM, so that Kubernetes does not count the pod as succeeded. A later
    start with GANDIVA_RESTORE=1 continues from it."""

    def __init__(self):
        super().__init__(143)


class Superseded(SystemExit):
    """A later attempt of this job has written a checkpoint (the write of
    this copy's was refused, see checkpoint.StaleCheckpoint): this copy is
    stale and must exit, with status 1."""

    def __init__(self, why="a later attempt of this job has taken over"):
        super().__init__(1)
        self.why = why

    def __str__(self):
        return f"gandiva: {self.why}; this copy must exit"


class AgentLost(SystemExit):
    """Raised by ``step()`` when the connection to the agent has closed: the
    agent died and the job will be restarted elsewhere from its last
    checkpoint, so this copy must stop (exit status 1)."""

    def __init__(self, why="lost the connection to the agent"):
        super().__init__(1)
        self.why = why

    def __str__(self):
        return "gandiva: " + self.why


class Client:
    """One job process's connection to its agent.

    Hooks (all optional, but without ``save`` and ``load`` the job can
    neither be suspended with its GPU memory freed nor checkpointed):

    - ``save(f)``: write everything needed to continue exactly where the job
      is (model, optimizer, data position, random generators) to the binary
      file ``f``. Used for checkpoints and, unless ``offload`` is given, to
      keep the state in host memory during a suspension.
    - ``load(f)``: restore what ``save`` wrote.
    - ``release()``: called after ``save`` during a suspension, to free the
      accelerator's memory; ``load`` must then rebuild it.
    - ``offload()`` / ``reload()``: when both are given, they replace
      save+release and load for suspensions (e.g. moving tensors to host
      memory and back); ``offload`` returns the bytes it moved. ``save`` must
      still work while offloaded.

    Build the model and optimizer before creating the Client: it restores the
    checkpoint (calling ``load``) right away when asked to. Not thread-safe:
    call it from the training loop.
    """

    def __init__(self, save=None, load=None, release=None, offload=None, reload=None, env=None, sock=None):
        env = os.environ if env is None else env
        self._save, self._load, self._release = save, load, release
        self._offload, self._reload = offload, reload
        self.job = env.get(ENV_JOB, "")
        try:
            self.attempt = int(env.get(ENV_ATTEMPT, "0") or 0)
        except ValueError:
            self.attempt = 0
        self.checkpoint_dir = env.get(ENV_CHECKPOINT_DIR, "")
        self._ckpt_every = _seconds(env.get(ENV_CHECKPOINT_EVERY), 0.0)
        self._report_every = _seconds(env.get(ENV_REPORT_EVERY), DEFAULT_REPORT_EVERY)
        self.pre_run = env.get(ENV_PRERUN) == "1"
        self.gpus = [int(g) for g in env.get(ENV_GPUS, "").split(",") if g.strip().isdigit()]
        self._sock = sock
        self._attached = False
        self._term = False
        if self._sock is None and env.get(ENV_FD):
            fd = int(env[ENV_FD])
            self._sock = socket.socket(fileno=fd)
        elif self._sock is None and env.get(ENV_AGENT_SOCKET):
            timeout = _seconds(env.get(ENV_ATTACH_TIMEOUT), DEFAULT_ATTACH_TIMEOUT)
            self._sock = _dial(env[ENV_AGENT_SOCKET], time.monotonic() + timeout)
            self._attached = True
        self._buf = b""
        self._cmds = []
        self._lease_until = None  # monotonic end of the agent's hold (None: no lease heard)
        self._lost = False
        self._stopped = False
        self._closed = False
        self._deferred = None
        self._metric = None
        self.done = 0
        self.restored = False
        meta, path = None, None
        if env.get(ENV_RESTORE) == "1" and self.checkpoint_dir:
            try:
                meta, path = _ckpt.read_checkpoint(self.checkpoint_dir)
            except _ckpt.NoCheckpoint:
                meta = None
            except Exception:
                self._close_sock()
                raise
            if meta is not None and load is None:
                self._close_sock()
                raise RuntimeError("gandiva: a checkpoint must be restored but no load hook was given")
        hold = env.get(ENV_HOLD) == "1"
        if self._attached:
            # the hello first (the restored count is in the metadata), and
            # the GPUs in the environment before the load hook runs
            try:
                hold = self._attach(env, int(meta["done"]) if meta is not None else 0,
                                    save is not None and load is not None, time.monotonic() + timeout)
            except BaseException:
                self._close_sock()
                raise
        load_s = 0.0
        if meta is not None:
            t0 = time.monotonic()
            with open(path, "rb") as f:
                load(f)
            self.done, self.restored = int(meta["done"]), True
            load_s = time.monotonic() - t0
        self._start = self.done
        # standalone or attached, with somewhere to checkpoint: SIGTERM
        # becomes a checkpoint at the next boundary (see Terminated)
        self._old_term = None
        if (self._sock is None or self._attached) and self.checkpoint_dir and save is not None and not self.pre_run:
            try:
                self._old_term = signal.signal(signal.SIGTERM, self._on_term)
            except ValueError:  # not the main thread: leave SIGTERM alone
                self._old_term = None
        now = time.monotonic()
        self._last_return = self._last_report = self._last_ckpt = now
        self._iter_sum, self._iter_n = 0.0, 0
        if self._sock is not None and hold:
            # a warm start: hold at the first boundary, as if asked (seq 0)
            self._deferred = {"kind": "suspend", "seq": 0, "at": self.done + 1}
        if self._sock is not None and not self._attached:
            self._send({"kind": "hello", "version": PROTOCOL_VERSION, "pid": os.getpid(),
                        "hooks": save is not None and load is not None, "done": self.done, "load_s": load_s,
                        "leases": True})
        if self._sock is not None:
            self._install_excepthook()

    def _attach(self, env, done, hooks, deadline):
        """Say hello naming the pod, wait for the welcome, and put its GPUs
        in the environment. Returns whether to hold at the first boundary."""
        pod = env.get(ENV_POD_NAMESPACE, "") + "/" + env.get(ENV_POD_NAME, "")
        self._send({"kind": "hello", "version": PROTOCOL_VERSION, "pid": os.getpid(), "hooks": hooks,
                    "done": done, "pod_uid": env.get(ENV_POD_UID, ""), "pod": pod, "leases": True})
        while not self._cmds and not self._lost:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"gandiva: no welcome from the agent in time ({ENV_ATTACH_TIMEOUT})")
            ready, _, _ = select.select([self._sock], [], [], left)
            if ready:
                self._poll(block=False)
        if not self._cmds:
            raise RuntimeError("gandiva: the agent closed the connection without a welcome")
        msg = self._cmds.pop(0)
        if msg["kind"] == "error":
            raise RuntimeError(f"gandiva: the agent refused this process: {msg.get('message', '')}")
        if msg["kind"] != "welcome":
            raise RuntimeError(f"gandiva: the agent answered the hello with {msg['kind']!r}, not 'welcome'")
        gpus = msg.get("gpus") or []
        self.gpus = [int(g) for g in gpus]
        value = ",".join(str(g) for g in self.gpus)
        env["CUDA_VISIBLE_DEVICES"] = value
        env[ENV_GPUS] = value
        return bool(msg.get("hold"))

    # -- public API ---------------------------------------------------------

    @property
    def managed(self):
        """Whether an agent started the job (or welcomed it, attached)."""
        return self._sock is not None

    def _count(self, metric):
        """step()'s start: raise Stop (or Terminated) if the job stopped;
        else count the mini-batch and the time it took, keep metric, report
        progress to the agent when due, and return the time (monotonic)."""
        if self._stopped:
            raise Terminated() if self._term else Stop()
        now = time.monotonic()
        self._iter_sum += now - self._last_return
        self._iter_n += 1
        self.done += 1
        if metric is not None:
            self._metric = float(metric)
        if self._sock is not None and (self.done == self._start + 1 or now - self._last_report >= self._report_every):
            self._report(now)
        return now

    def step(self, metric=None):
        """Mark the end of one mini-batch. Reports progress and carries out
        the agent's requests; blocks while the job is suspended. Raises Stop
        when the job must exit (a migration, the end of a pre-run), AgentLost when its agent is
        gone, and the hook's exception when a load or release fails."""
        now = self._count(metric)
        if self._ckpt_every > 0 and self.checkpoint_dir and self._save is not None and now - self._last_ckpt >= self._ckpt_every:
            try:
                self._checkpoint(0, self._save)
            except _ckpt.StaleCheckpoint as e:
                self._superseded(e)
            except (OSError, ValueError) as e:
                print(f"gandiva: periodic checkpoint failed: {e}", file=sys.stderr)
        if self._term:
            self._checkpoint(0, self._save)
            self._stopped = True
            self._restore_term()
            raise Terminated()
        self._boundary()
        self._last_return = time.monotonic()
        if self.pre_run:  # the pre-run's first mini-batch is done and reported
            self._stop()

    def close(self):
        """Send a last progress report and close the connection."""
        if self._closed:
            return
        self._closed = True
        self._restore_term()
        if self._sock is not None and not self._stopped and not self._lost:
            try:
                self._report(time.monotonic())
            except AgentLost:
                pass
        self._close_sock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- internals ----------------------------------------------------------

    def _install_excepthook(self):
        prev = sys.excepthook

        def hook(tp, value, tb):
            if self._sock is not None and not self._lost and not issubclass(tp, SystemExit):
                try:
                    self._report(time.monotonic())
                    self._send({"kind": "error", "done": self.done, "message": f"{tp.__name__}: {value}"[:1000]})
                except (AgentLost, OSError):
                    pass
            prev(tp, value, tb)

        sys.excepthook = hook

    def _close_sock(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass

    def _send(self, msg):
        line = (json.dumps(msg, allow_nan=False) + "\n").encode()
        try:
            self._sock.sendall(line)
        except OSError as e:
            self._lost = True
            raise AgentLost(f"lost the connection to the agent ({e})") from None

    def _report(self, now):
        msg = {"kind": "progress", "done": self.done}
        if self._iter_n:
            msg["iter_time"] = self._iter_sum / self._iter_n
        if self._metric is not None and self._metric == self._metric and abs(self._metric) != float("inf"):
            msg["metric"] = self._metric
        self._iter_sum, self._iter_n, self._last_report = 0.0, 0, now
        self._send(msg)

    def _lease_lapsed(self):
        return self._lease_until is not None and time.monotonic() > self._lease_until

    def _lapse(self):
        """Stop for good: the agent's lease on the job lapsed."""
        self._lost = True
        self._close_sock()
        raise AgentLost("the agent did not renew its lease in time (it is stopped or cut off); "
                        "the job may be restarted elsewhere, so this copy stops")

    def _superseded(self, err):
        self._stopped = True
        self._close_sock()
        raise Superseded(str(err))

    def _poll(self, block):
        """Read what the agent sent into the command queue (leases are
        applied at once). Blocks until at least one command is queued, or
        the lease lapses, when block is set."""
        while not self._lost:
            if block and self._lease_lapsed():
                return
            ready, _, _ = select.select([self._sock], [], [], 0.2 if block else 0)
            if not ready:
                if not block or self._term:
                    return
                continue
            try:
                data = self._sock.recv(65536)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                self._lost = True
                return
            self._buf += data
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if len(line) > MAX_LINE:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and msg.get("kind") == "lease":
                    # read as it comes: not a command, no answer
                    left = msg.get("lease_s", 0)
                    if isinstance(left, (int, float)) and 0 <= left <= 1e6:
                        self._lease_until = time.monotonic() + left
                    continue
                if isinstance(msg, dict) and isinstance(msg.get("kind"), str):
                    self._cmds.append(msg)
            if len(self._buf) > MAX_LINE:
                self._buf = b""
            if self._cmds or not block:
                return

    def _next(self, block):
        """The next command; blocking, None only when SIGTERM came (which
        the caller must honour). Raises AgentLost when the agent is gone or
        its lease lapsed while blocking."""
        if not self._cmds:
            self._poll(block)
        if self._cmds:
            return self._cmds.pop(0)
        if self._lost and block:
            raise AgentLost()
        if block and self._lease_lapsed():
            self._lapse()
        return None

    def _boundary(self):
        if self._sock is None:
            return
        self._poll(block=False)  # (the latest lease)
        if self._lease_lapsed():
            self._lapse()
        while True:
            d = self._deferred
            if d is not None and self.done >= d.get("at", 0):
                self._deferred = None
                self._suspend(d)
                continue
            msg = self._next(block=False)
            if msg is None:
                if self._lost:
                    raise AgentLost()
                return
            self._command(msg)

    def _command(self, msg):
        kind, seq = msg["kind"], msg.get("seq", 0)
        if kind == "suspend":
            if msg.get("at", 0) > self.done:
                self._deferred = msg
            else:
                self._suspend(msg)
        elif kind == "checkpoint":
            if self._save is None:
                self._send({"kind": "error", "seq": seq, "done": self.done, "message": "the job has no save hook"})
                return
            try:
                self._checkpoint(seq, self._save)
            except (OSError, ValueError, RuntimeError) as e:
                self._send({"kind": "error", "seq": seq, "done": self.done, "message": str(e)})
                if isinstance(e, _ckpt.StaleCheckpoint):
                    self._superseded(e)
                return
            if msg.get("exit"):
                self._stop()
        elif kind == "resume":
            self._send({"kind": "resumed", "seq": seq, "done": self.done})
        else:
            self._send({"kind": "error", "seq": seq, "done": self.done, "message": f"unknown command {kind!r}"})

    def _on_term(self, signum, frame):
        self._term = True

    def _restore_term(self):
        if self._old_term is not None:
            try:
                signal.signal(signal.SIGTERM, self._old_term)
            except ValueError:  # not the main thread: close() gives it back
                return
            self._old_term = None

    def _stop(self):
        self._stopped = True
        self._close_sock()
        raise Stop()

    def _checkpoint(self, seq, save):
        if not self.checkpoint_dir:
            raise ValueError(f"no checkpoint directory ({ENV_CHECKPOINT_DIR})")
        t0 = time.monotonic()
        try:
            meta = _ckpt.write_checkpoint(self.checkpoint_dir, self.done, save, self.job, self.attempt)
        finally:
            self._last_ckpt = time.monotonic()
        if self._sock is not None:
            self._send({"kind": "saved", "seq": seq, "done": self.done, "bytes": meta["bytes"],
                        "path": os.path.join(self.checkpoint_dir, _ckpt.META_FILE),
                        "save_s": time.monotonic() - t0})

    def _suspend(self, msg):
        seq = msg.get("seq", 0)
        t0 = time.monotonic()
        host = None
        size, released = 0, False
        offloading = self._offload is not None and self._reload is not None
        try:
            if offloading:
                size = int(self._offload() or 0)
                released = True
            elif self._save is not None and self._load is not None:
                buf = io.BytesIO()
                self._save(buf)
                host = buf.getvalue()
                size = len(host)
        except Exception as e:  # the job keeps running with its state intact
            self._send({"kind": "error", "seq": seq, "done": self.done, "message": f"save: {e}"})
            return
        if host is not None and self._release is not None:
            try:
                self._release()
            except Exception as e:
                self._send({"kind": "error", "seq": seq, "done": self.done, "message": f"release: {e}"})
                raise
            released = True
        self._send({"kind": "suspended", "seq": seq, "done": self.done, "bytes": size,
                    "released": released, "save_s": time.monotonic() - t0})
        while True:
            msg = self._next(block=True)
            if msg is None:  # SIGTERM while suspended (the pod is being moved)
                self._checkpoint(0, (lambda f: f.write(host)) if host is not None else self._save)
                self._stopped = True
                self._restore_term()
                raise Terminated()
            kind, seq = msg["kind"], msg.get("seq", 0)
            if kind == "resume":
                t0 = time.monotonic()
                try:
                    if offloading:
                        self._reload()
                    elif host is not None:
                        self._load(io.BytesIO(host))
                except Exception as e:
                    self._send({"kind": "error", "seq": seq, "done": self.done, "message": f"load: {e}"})
                    raise
                self._iter_sum, self._iter_n = 0.0, 0
                self._send({"kind": "resumed", "seq": seq, "done": self.done, "load_s": time.monotonic() - t0})
                return
            if kind == "checkpoint":
                if host is not None:
                    save = lambda f: f.write(host)  # noqa: E731 - the host copy, no second save
                else:
                    save = self._save
                if save is None:
                    self._send({"kind": "error", "seq": seq, "done": self.done, "message": "the job has no save hook"})
                    continue
                try:
                    self._checkpoint(seq, save)
                except (OSError, ValueError, RuntimeError) as e:
                    self._send({"kind": "error", "seq": seq, "done": self.done, "message": str(e)})
                    if isinstance(e, _ckpt.StaleCheckpoint):
                        self._superseded(e)
                    continue
                if msg.get("exit"):
                    self._stop()
            elif kind == "suspend":
                self._send({"kind": "suspended", "seq": seq, "done": self.done, "bytes": size, "released": released})
            else:
                self._send({"kind": "error", "seq": seq, "done": self.done, "message": f"{kind!r} while suspended"})


def _dial(path, deadline):
    """Connect to the agent's socket for this pod, retrying while it is not
    there yet (the agent makes it when it sees the pod bound)."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError as e:
            s.close()
            if time.monotonic() >= deadline:
                raise RuntimeError(f"gandiva: connecting to the agent at {path} ({ENV_AGENT_SOCKET}): {e}") from None
        time.sleep(0.1)


def _seconds(v, default):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    if f != f or f < 0 or f > 1e9:
        return default
    return f
