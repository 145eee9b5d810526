"""Gang support for ``torch.distributed``: the ranks of one job stop,
checkpoint and resume together.

A gang is the processes (ranks) of one data-parallel job, each with its own
in-job client and (under Gandiva) its own connection to an agent. Every rank
must stop at the same mini-batch, or a rank that left runs into a collective
its peers never join and hangs. So at each mini-batch boundary the ranks
agree (one tiny ``all_reduce`` MAX on a gloo group) on whether any of them
has something to do there: a suspension or checkpoint its agent asked for
(a suspension with ``at`` counts once the gang has done ``at`` mini-batches),
a SIGTERM, a periodic checkpoint that is due, or a lost agent. If one has,
every rank does it at that boundary; a rank whose own agent has not sent the
command yet waits for it there, at most ``GANDIVA_GANG_TIMEOUT`` seconds,
then stops with a clear error. Commands are carried out one per agreement,
so all ranks go through the same sequence.

- Checkpoints are written once for the gang: the ranks meet (a barrier on
  the rendezvous store), rank 0 commits its state in the format of
  ``gandiva.checkpoint`` (the model and optimizer of plain DDP are
  replicated, so one rank's state is the gang's), and the other ranks report
  "saved" to their agents only after rank 0's commit. A rank that fails
  before the barrier leaves the previous checkpoint in place.
- Suspensions: with gloo (CPU) the process group is kept: it holds no
  accelerator memory and its connections stay open while the ranks wait.
  With NCCL the communicators hold GPU memory, so when the job frees the GPU
  (a ``release`` or ``offload`` hook) the process groups are destroyed and,
  once every rank has resumed, formed again from the same rendezvous store;
  the ``regroup`` hook then rebuilds what held the old group (wrap the model
  in a new DistributedDataParallel). Either way a resumed rank waits for its
  peers on the store, not in a collective, before training on.
- A rank that dies or hangs: collectives run with the process group's
  timeout (``GANDIVA_GANG_TIMEOUT``, default 300 s); their errors become
  GangFailed (exit status 1) with a message saying which rank and why,
  instead of a hang.

Restoring on another world size works for replicated state (plain DDP):
the checkpoint holds one copy of the model and optimizer, and the data
position is the global step (the global batch is split by rank, so any world
size trains on the same samples). Sharded optimizers (ZeroRedundancyOptimizer)
and FSDP keep a different shard on each rank and are not supported.

torch is imported only by ``init_process_group`` and TorchGang; importing
this module needs only the standard library.
"""

import atexit
import datetime
import json
import os
import sys
import time

from . import checkpoint as _ckpt
from .client import ENV_CHECKPOINT_DIR, AgentLost, Stop, Terminated, _seconds
from .client import Client as _Client

ENV_GANG_TIMEOUT = "GANDIVA_GANG_TIMEOUT"
DEFAULT_GANG_TIMEOUT = 300.0
POLL = 0.01

# The agreement vector: one flag per reason to act at a boundary (a
# command: the kind of this rank's next one).
# The last two hold done and _BIG - done, so that the maximum says whether
# every rank is at the same mini-batch.
_FAIL, _TERM, _SUSPEND, _CHECKPOINT, _PERIODIC, _DONE, _NOT_DONE = range(7)
_BIG = 1 << 62

__all__ = ["Gang", "TorchGang", "Client", "GangFailed", "init_process_group", "rank_and_world",
           "ENV_GANG_TIMEOUT"]


class GangFailed(SystemExit):
    """A rank of the gang failed, hung, or stopped for good (its agent is
    lost): this rank cannot go on alone and must exit, with status 1."""

    def __init__(self, why):
        super().__init__(1)
        self.why = why

    def __str__(self):
        return "gandiva: " + self.why


def rank_and_world(env=None):
    """This process's (rank, world size) from RANK and WORLD_SIZE (set by the
    Gandiva agent for the ranks of a gang, and by torchrun); RANK unset
    falls back to JOB_COMPLETION_INDEX (a Kubernetes Indexed Job). No
    WORLD_SIZE means one process: (0, 1). Bad values raise ValueError naming
    the variable."""
    env = os.environ if env is None else env
    w = env.get("WORLD_SIZE", "")
    if w == "":
        return 0, 1
    try:
        world = int(w)
    except ValueError:
        raise ValueError(f"WORLD_SIZE: not a number: {w!r}") from None
    if world < 1:
        raise ValueError(f"WORLD_SIZE: must be at least 1, got {world}")
    name = "RANK" if env.get("RANK", "") != "" else "JOB_COMPLETION_INDEX"
    r = env.get(name, "")
    if r == "":
        if world == 1:
            return 0, 1
        raise ValueError("RANK: required when WORLD_SIZE > 1 (or JOB_COMPLETION_INDEX)")
    try:
        rank = int(r)
    except ValueError:
        raise ValueError(f"{name}: not a number: {r!r}") from None
    if not 0 <= rank < world:
        raise ValueError(f"{name}: {rank} is outside world size {world}")
    return rank, world


class Gang:
    """What the gang client needs from the ranks' communication: the
    agreement collective, a key-value store all ranks share (the rendezvous
    store), and tearing down / re-forming the process groups. TorchGang is
    the torch.distributed one; tests use an in-process one.

    Contract: ``agree(flags)`` returns the element-wise maximum over all
    ranks of a list of small non-negative ints, or raises GangFailed;
    ``add(key, n)`` adds n to a counter and returns its new value (n=0
    reads it), ``set(key, bytes)`` and ``get(key)`` store and read a value
    that is already set."""

    rank = 0
    world_size = 1
    timeout = DEFAULT_GANG_TIMEOUT
    keeps_group = True  # whether a suspension that frees the GPU keeps the process groups

    def agree(self, flags):
        raise NotImplementedError

    def add(self, key, n):
        raise NotImplementedError

    def set(self, key, value):
        raise NotImplementedError

    def get(self, key):
        raise NotImplementedError

    def teardown(self):
        """Destroy the process groups (to free accelerator memory)."""

    def reform(self):
        """Form the process groups again after teardown."""

    @property
    def formed(self):
        return True

    def meet(self, key, deadline, what):
        """Wait until every rank has called meet with key (a barrier on the
        store, polled, so a slow peer costs no collective timeout). Raises
        GangFailed at the deadline (time.monotonic())."""
        self.add(key, 1)
        while self.add(key, 0) < self.world_size:
            if time.monotonic() >= deadline:
                n = self.add(key, 0)
                raise GangFailed(f"rank {self.rank}: only {n} of {self.world_size} ranks reached {what} "
                                 f"within {self.timeout:g}s ({ENV_GANG_TIMEOUT}); a rank failed or hangs")
            time.sleep(POLL)


class TorchGang(Gang):
    """A gang over torch.distributed: the default process group with
    ``backend``, a gloo group for the agreement when that backend is not
    gloo, and the rendezvous TCPStore (kept across suspensions, so that the
    groups can be formed again). Made by init_process_group."""

    def __init__(self, rank, world_size, backend, store, timeout, prefix="gandiva/"):
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self.timeout = timeout
        self.keeps_group = backend == "gloo"
        self._store, self._prefix = store, prefix
        self._gen = 0
        self._ctrl = None
        self._formed = False
        self.failed = False  # a collective or the store failed: a peer is gone

    def _form(self):
        import torch.distributed as dist

        td = datetime.timedelta(seconds=self.timeout)
        pg_store = dist.PrefixStore(f"{self._prefix}pg/{self._gen}/", self._store)
        dist.init_process_group(self.backend, store=pg_store, rank=self.rank, world_size=self.world_size,
                                timeout=td)
        self._ctrl = None if self.backend == "gloo" else dist.new_group(backend="gloo", timeout=td)
        self._formed = True

    @property
    def formed(self):
        return self._formed

    def agree(self, flags):
        import torch
        import torch.distributed as dist

        t = torch.tensor(flags, dtype=torch.int64)
        try:
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self._ctrl)
        except RuntimeError as e:
            self.failed = True
            raise GangFailed(f"rank {self.rank} of {self.world_size}: the agreement at a mini-batch boundary "
                             f"failed; a peer rank died or hangs ({_short(e)})") from None
        return [int(v) for v in t.tolist()]

    def _k(self, key):
        return self._prefix + key

    def add(self, key, n):
        try:
            return int(self._store.add(self._k(key), n))
        except RuntimeError as e:
            self.failed = True
            raise GangFailed(f"rank {self.rank}: the rendezvous store is gone ({_short(e)}); "
                             "rank 0 died") from None

    def set(self, key, value):
        try:
            self._store.set(self._k(key), value)
        except RuntimeError as e:
            self.failed = True
            raise GangFailed(f"rank {self.rank}: the rendezvous store is gone ({_short(e)}); "
                             "rank 0 died") from None

    def get(self, key):
        try:
            return bytes(self._store.get(self._k(key)))
        except RuntimeError as e:
            self.failed = True
            raise GangFailed(f"rank {self.rank}: the rendezvous store is gone ({_short(e)}); "
                             "rank 0 died") from None

    def _at_exit(self):
        """Destroy the process groups before the interpreter's teardown,
        which otherwise may destroy them with their threads still running
        (and abort: "terminate called without an active exception"). Not
        after a failure under NCCL, whose teardown may wait for the dead."""
        if self._formed and (self.backend == "gloo" or not self.failed):
            try:
                self.teardown()
            except Exception:  # exiting anyway
                pass
        # and the rendezvous store (rank 0's serves it from a thread of its
        # own): released now, while the interpreter is whole, not among
        # the objects its teardown destroys in no set order
        self._store = None
        import gc

        gc.collect()

    def teardown(self):
        import torch.distributed as dist

        if self._formed:
            dist.destroy_process_group()
            self._ctrl = None
            self._formed = False

    def reform(self):
        if not self._formed:
            self._gen += 1
            self._form()


def _short(e):
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:300]


def init_process_group(backend="gloo", timeout=None, env=None):
    """Form the gang's process group and return its Gang, or None for a
    single process (no WORLD_SIZE, or WORLD_SIZE=1): use it instead of
    ``torch.distributed.init_process_group``. Rank and world size come from
    rank_and_world; the rendezvous is a TCPStore at MASTER_ADDR:MASTER_PORT
    (hosted by rank 0, or by torchrun's agent under torchrun). The timeout of collectives and of the gang's waits
    is ``timeout`` seconds, else GANDIVA_GANG_TIMEOUT, else 300."""
    env = os.environ if env is None else env
    rank, world = rank_and_world(env)
    if world == 1:
        return None
    if timeout is None:
        timeout = _seconds(env.get(ENV_GANG_TIMEOUT), DEFAULT_GANG_TIMEOUT) or DEFAULT_GANG_TIMEOUT
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("gandiva: torch.distributed is already initialised; call "
                           "gandiva.distributed.init_process_group instead of torch's")
    addr = env.get("MASTER_ADDR", "")
    port = env.get("MASTER_PORT", "")
    if not addr:
        raise ValueError("MASTER_ADDR: required when WORLD_SIZE > 1")
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"MASTER_PORT: not a port number: {port!r}") from None
    if not 0 < p < 65536:
        raise ValueError(f"MASTER_PORT: not a port number: {p}")
    td = datetime.timedelta(seconds=timeout)
    # under torchrun its agent hosts the store at MASTER_PORT (the gang's
    # keys have a prefix of their own there)
    host = rank == 0 and env.get("TORCHELASTIC_USE_AGENT_STORE", "") != "True"
    try:
        store = dist.TCPStore(addr, p, world, host, td)
    except RuntimeError as e:
        raise GangFailed(f"rank {rank} of {world}: no rendezvous at {addr}:{p} within {timeout:g}s "
                         f"({_short(e)})") from None
    gang = TorchGang(rank, world, backend, store, timeout)
    try:
        gang._form()
    except RuntimeError as e:
        raise GangFailed(f"rank {rank} of {world}: forming the {backend} process group failed ({_short(e)})") from None
    atexit.register(gang._at_exit)
    return gang


class Client(_Client):
    """The in-job client of one rank of a gang (see the module comment).

    ``gang`` is init_process_group's result; None (a single process) makes
    it the plain gandiva.Client. The hooks are gandiva.Client's, plus
    ``regroup()``, called after the process groups were formed again on a
    resumption (NCCL only): rebuild what holds the old group there, such as
    the DistributedDataParallel wrapper. Make the model and optimizer (and
    the DDP wrapper) before the client: it restores the gang's checkpoint
    on every rank right away when asked to.
    """

    def __init__(self, gang=None, save=None, load=None, release=None, offload=None, reload=None, regroup=None,
                 env=None, sock=None):
        self.gang = gang
        self._regroup = regroup
        self._serial = 0
        if gang is not None and gang.world_size > 1 and not gang.keeps_group:
            # free the communicators' GPU memory along with the job's
            if release is not None:
                release = self._and_teardown(release)
            if offload is not None and reload is not None:
                offload = self._and_teardown(offload)
        super().__init__(save=save, load=load, release=release, offload=offload, reload=reload, env=env, sock=sock)
        self._gang_every = 0.0
        if self._ganged:  # periodic checkpoints are agreed on (see step)
            self._gang_every, self._ckpt_every = self._ckpt_every, 0.0

    @property
    def _ganged(self):
        return self.gang is not None and self.gang.world_size > 1

    def _and_teardown(self, hook):
        def wrapped():
            out = hook()
            self.gang.teardown()
            return out

        return wrapped

    def _deadline(self):
        return time.monotonic() + self.gang.timeout

    # -- the boundary ------------------------------------------------------

    def step(self, metric=None):
        """Mark the end of one mini-batch, as gandiva.Client.step, for every
        rank together. Raises GangFailed when a peer failed or stopped for
        good, besides what gandiva.Client.step raises."""
        if not self._ganged:
            return super().step(metric)
        self._count(metric)
        while True:
            local = self._wants()
            agreed = self.gang.agree(local)
            if agreed[_DONE] != _BIG - agreed[_NOT_DONE]:
                self._stopped = True
                raise GangFailed(f"rank {self.gang.rank}: the ranks are at different mini-batches "
                                 f"({_BIG - agreed[_NOT_DONE]} to {agreed[_DONE]}; this rank {self.done}): they "
                                 "restored different checkpoints, or one calls step() more often than the others")
            if agreed[_FAIL]:
                if local[_FAIL]:
                    if self._lost:
                        raise AgentLost()
                    self._lapse()
                self._close_sock()
                self._stopped = True
                raise GangFailed(f"rank {self.gang.rank}: a peer rank stopped for good at mini-batch {self.done} "
                                 "(its agent is lost); the gang stops")
            if agreed[_TERM]:
                self._term = True
                try:
                    self._checkpoint(0, self._save)
                except _ckpt.StaleCheckpoint as e:
                    self._superseded(e)
                self._stopped = True
                self._restore_term()
                raise Terminated()
            if agreed[_SUSPEND] or agreed[_CHECKPOINT]:
                want = None
                if agreed[_SUSPEND] != agreed[_CHECKPOINT]:
                    want = "suspend" if agreed[_SUSPEND] else "checkpoint"
                self._act(self._due(not (local[_SUSPEND] or local[_CHECKPOINT]), want))
                continue  # the next command, if any, at the same boundary
            if agreed[_PERIODIC]:
                try:
                    self._checkpoint(0, self._save)
                except _ckpt.StaleCheckpoint as e:
                    self._superseded(e)
                except (OSError, ValueError, RuntimeError) as e:
                    print(f"gandiva: periodic checkpoint failed: {e}", file=sys.stderr)
            break
        self._last_return = time.monotonic()
        if self.pre_run:
            self._stop()

    def _wants(self):
        """This rank's flags for the agreement; answers the commands that
        are not the gang's (a resume while running, unknown kinds) and
        defers suspensions whose ``at`` is ahead."""
        flags = [0, 0, 0, 0, 0, self.done, _BIG - self.done]
        if self._sock is not None:
            self._poll(block=False)
            keep = []
            for msg in self._cmds:
                kind = msg["kind"]
                if kind in ("suspend", "checkpoint"):
                    if kind == "suspend" and msg.get("at", 0) > self.done:
                        self._deferred = msg
                    else:
                        keep.append(msg)
                else:
                    self._command(msg)  # resumed, or an error naming the kind
            self._cmds = keep
            if self._lost or self._lease_lapsed():
                flags[_FAIL] = 1
        d = self._deferred
        if d is not None and self.done >= d.get("at", 0):
            flags[_SUSPEND] = 1
        elif self._cmds:
            flags[_SUSPEND if self._cmds[0]["kind"] == "suspend" else _CHECKPOINT] = 1
        if self._term and self.checkpoint_dir and self._save is not None:
            flags[_TERM] = 1
        if (self._gang_every > 0 and self.checkpoint_dir and self._save is not None
                and time.monotonic() - self._last_ckpt >= self._gang_every):
            flags[_PERIODIC] = 1
        return flags

    def _due(self, wait, want):
        """The command to carry out at this boundary: this rank's next one
        (the order of _wants: a suspension whose at is reached first). When
        a peer has one and this rank has none yet (wait), wait for this
        rank's agent to send one of the kind the peers agreed on (want:
        "suspend", "checkpoint", or None for either), at most the gang's
        timeout; a suspension this rank's agent asked for a later boundary
        is carried out here, where the gang stops."""
        d = self._deferred
        if not wait:
            if d is not None and self.done >= d.get("at", 0):
                self._deferred = None
                return d
            return self._cmds.pop(0)
        if self._sock is None:
            raise GangFailed(f"rank {self.gang.rank}: a peer rank was asked to stop at mini-batch {self.done} "
                             "but this rank has no agent to ask it; the ranks of a gang must all run under Gandiva")
        deadline = self._deadline()
        while True:
            if want != "checkpoint" and self._deferred is not None:
                d, self._deferred = self._deferred, None
                return d
            for i, msg in enumerate(self._cmds):
                if msg["kind"] in ("suspend", "checkpoint") and want in (None, msg["kind"]):
                    return self._cmds.pop(i)
            keep = []
            for msg in self._cmds:  # others wait for a later round; answer what is not the gang's
                if msg["kind"] == "suspend" and msg.get("at", 0) > self.done:
                    self._deferred = msg
                elif msg["kind"] in ("suspend", "checkpoint"):
                    keep.append(msg)
                else:
                    self._command(msg)
            self._cmds = keep
            if self._lost:
                raise AgentLost()
            if self._lease_lapsed():
                self._lapse()
            if time.monotonic() >= deadline:
                raise GangFailed(f"rank {self.gang.rank}: a peer rank's agent asked the gang to stop at mini-batch "
                                 f"{self.done}, but this rank's agent sent no command within {self.gang.timeout:g}s "
                                 f"({ENV_GANG_TIMEOUT})")
            self._poll(block=False)
            if not self._cmds:
                time.sleep(POLL)

    def _act(self, msg):
        if msg["kind"] == "suspend":
            self._suspend(msg)  # at the agreed boundary, whatever its at
        else:
            self._command(msg)

    # -- gang versions of the client's actions -----------------------------

    def _suspend(self, msg):
        super()._suspend(msg)
        if not self._ganged:
            return
        # resumed: wait for every rank on the store, not in a collective
        self._serial += 1
        self.gang.meet(f"resume/{self.done}/{self._serial}", self._deadline(), f"the resumption at mini-batch {self.done}")
        if not self.gang.formed:
            try:
                self.gang.reform()
            except RuntimeError as e:
                raise GangFailed(f"rank {self.gang.rank}: forming the process group again failed ({_short(e)})") from None
            if self._regroup is not None:
                self._regroup()

    def _checkpoint(self, seq, save):
        """One checkpoint for the gang: the ranks meet, rank 0 commits, and
        each rank reports "saved" (to its own agent) only after the commit."""
        if not self._ganged:
            return super()._checkpoint(seq, save)
        if not self.checkpoint_dir:
            raise ValueError(f"no checkpoint directory ({ENV_CHECKPOINT_DIR})")
        t0 = time.monotonic()
        self._serial += 1
        key = f"ckpt/{self.done}/{self._serial}"
        try:
            if self.gang.rank == 0:
                res = self._commit(key, save)
            else:
                self.gang.add(key + "/arrive", 1)
                deadline = self._deadline()
                while self.gang.add(key + "/posted", 0) < 1:
                    if time.monotonic() >= deadline:
                        raise GangFailed(f"rank {self.gang.rank}: rank 0 did not commit the gang's checkpoint at "
                                         f"mini-batch {self.done} within {self.gang.timeout:g}s ({ENV_GANG_TIMEOUT})")
                    time.sleep(POLL)
                res = _result(self.gang.get(key + "/result"), self.gang.rank, self.done)
                self.gang.add(key + "/read", 1)
        finally:
            self._last_ckpt = time.monotonic()
        if res.get("stale"):
            raise _ckpt.StaleCheckpoint(res["stale"])
        if not res.get("ok"):
            raise OSError(f"gang checkpoint at mini-batch {self.done}: {res.get('error', 'failed')}")
        if self._sock is not None:
            self._send({"kind": "saved", "seq": seq, "done": self.done, "bytes": res["bytes"],
                        "path": os.path.join(self.checkpoint_dir, _ckpt.META_FILE),
                        "save_s": time.monotonic() - t0})

    def _commit(self, key, save):
        """Rank 0: wait for every rank, commit, post the result."""
        try:
            self.gang.meet(key + "/arrive", self._deadline(), f"the checkpoint at mini-batch {self.done}")
        except GangFailed as e:
            self._post(key, {"ok": False, "error": e.why})
            raise
        try:
            meta = _ckpt.write_checkpoint(self.checkpoint_dir, self.done, save, self.job, self.attempt)
            res = {"ok": True, "bytes": meta["bytes"]}
        except _ckpt.StaleCheckpoint as e:
            res = {"ok": False, "stale": str(e)}
        except (OSError, ValueError, RuntimeError) as e:
            res = {"ok": False, "error": str(e)[:1000]}
        self._post(key, res)
        # rank 0 hosts the store: it may exit next (a migration), so it
        # waits until the others have read the result (bounded; the commit
        # is done either way)
        deadline = self._deadline()
        while self.gang.add(key + "/read", 0) < self.gang.world_size - 1 and time.monotonic() < deadline:
            time.sleep(POLL)
        return res

    def _post(self, key, res):
        self.gang.set(key + "/result", json.dumps(res).encode())
        self.gang.add(key + "/posted", 1)


def _result(raw, rank, done):
    """The checkpoint's result as rank 0 posted it on the store: a JSON
    object with a boolean "ok" and, when ok, a whole "bytes" >= 0. The
    store is reachable by any process that can reach MASTER_PORT, so
    anything else (garbage, another shape) stops the gang with GangFailed
    rather than an unhandled error further on."""
    try:
        res = json.loads(bytes(raw)[:1 << 16].decode())
    except (TypeError, ValueError) as e:
        res = e
    if (isinstance(res, dict) and isinstance(res.get("ok"), bool)
            and (not res["ok"] or (type(res.get("bytes")) is int and res["bytes"] >= 0))
            and isinstance(res.get("stale", ""), str) and isinstance(res.get("error", ""), str)):
        return res
    raise GangFailed(f"rank {rank}: the gang's checkpoint result at mini-batch {done} on the rendezvous store "
                     "is malformed (not what rank 0 posts); the gang stops")
