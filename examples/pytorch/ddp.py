#!/usr/bin/env python3
"""Data-parallel training of a small CNN with torch.distributed, Gandiva-aware.

Each rank trains a replica of the model on its share of a global batch of
synthetic 3x16x16 images; the global batch is a function of (seed, step)
only and is split by rank, so any world size trains on the same samples at
every step. The model and optimizer are plain DDP (replicated); on the CPU
the run is deterministic.

    # one process
    /usr/bin/python3 examples/pytorch/ddp.py --steps 100
    # two ranks on this machine, started by env (as the Gandiva agent does)
    for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        /usr/bin/python3 examples/pytorch/ddp.py --steps 100 --out result.json & done; wait
    # under torchrun (where it works)
    torchrun --nproc_per_node 2 examples/pytorch/ddp.py --steps 100

Rank and world size come from RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT; RANK unset falls back to JOB_COMPLETION_INDEX (a Kubernetes
Indexed Job); no WORLD_SIZE means a single process without a process group.
Under Gandiva (GANDIVA_FD or GANDIVA_AGENT_SOCKET), or standalone with
GANDIVA_CHECKPOINT_DIR, the gang-aware client (gandiva.distributed) makes
every rank stop at the same mini-batch, commits one checkpoint per gang and
restores it on any world size.

Rank 0 writes --out (JSON: checksum, steps, world_size, start, restored)
at the end and appends "<step> <loss> <world_size>" per mini-batch to
--loss-log. Exit status: 0 done or stopped as asked, 143 checkpointed after
SIGTERM, 1 a lost agent, a superseded copy or a failed rank.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

try:
    import gandiva
except ImportError:  # run from a checkout: use the module beside it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gandiva
import gandiva.distributed
from gandiva import pytorch as gandiva_pytorch

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

CLASSES = 10
IMAGE = 16


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * (IMAGE // 4) ** 2, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


def shard(seed, step, global_batch, rank, world, device):
    """This rank's part of global mini-batch `step` (counted from 0): a
    function of (seed, step) only, whatever the world size."""
    g = torch.Generator()
    g.manual_seed(seed * 1_000_003 + step)
    x = torch.randn(global_batch, 3, IMAGE, IMAGE, generator=g)
    y = torch.randint(0, CLASSES, (global_batch,), generator=g)
    n = global_batch // world
    return x[rank * n:(rank + 1) * n].to(device), y[rank * n:(rank + 1) * n].to(device)


def checksum(model):
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ddp-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, required=True, help="mini-batches in all")
    ap.add_argument("--global-batch", type=int, default=8, help="samples per step over all ranks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--step-time", type=float, default=0.0, help="sleep this long per mini-batch (seconds)")
    ap.add_argument("--out", default="", help="rank 0 writes the result here (JSON) at the end")
    ap.add_argument("--loss-log", default="", help="rank 0 appends '<step> <loss> <world_size>' per mini-batch")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="", help="default: gloo on cpu, nccl on cuda")
    ap.add_argument("--gang-timeout", type=float, default=None,
                    help="seconds a collective or a gang's wait may take before the gang stops "
                         "(default: GANDIVA_GANG_TIMEOUT, else 300)")
    args = ap.parse_args(argv)
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    if args.steps < 0:
        ap.error("--steps must not be negative")

    rank, world = gandiva.distributed.rank_and_world()
    if args.global_batch < 1 or args.global_batch % world:
        ap.error(f"--global-batch {args.global_batch} is not a positive multiple of the world size {world}")
    if args.device == "cpu":
        torch.set_num_threads(1)  # deterministic and light; the ranks are the parallelism
        device = torch.device("cpu")
    else:
        local = int(os.environ.get("LOCAL_RANK", "0") or 0)
        device = torch.device("cuda", local % max(torch.cuda.device_count(), 1))
        torch.cuda.set_device(device)
    torch.use_deterministic_algorithms(True)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    gang = gandiva.distributed.init_process_group(backend, timeout=args.gang_timeout)  # None for one process
    torch.manual_seed(args.seed)
    net = CNN().to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None) if gang else net
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

    def regroup():  # NCCL: the process group was formed again after a suspension
        nonlocal model
        model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)

    job = None
    env = os.environ
    if env.get("GANDIVA_FD") or env.get("GANDIVA_AGENT_SOCKET") or env.get("GANDIVA_CHECKPOINT_DIR"):
        hooks = gandiva_pytorch.hooks(net, opt, device=device)
        if device.type == "cpu":  # nothing to move off the CPU: keep a host copy (save/load)
            del hooks["offload"], hooks["reload"]
        job = gandiva.distributed.Client(gang, regroup=regroup, **hooks)
    start = job.done if job else 0
    restored = bool(job and job.restored)
    print(f"ddp: rank {rank} of {world} ({backend} on {device}), starting at step {start} of {args.steps}"
          f"{' (restored)' if restored else ''}", flush=True)
    log = open(args.loss_log, "a") if rank == 0 and args.loss_log else None
    step = start
    try:
        while step < args.steps:
            x, y = shard(args.seed, step, args.global_batch, rank, world, device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)  # no gradients held at the boundary
            lv = loss.detach()
            if gang:  # the global batch's loss: the mean of the ranks' equal shares
                dist.all_reduce(lv)
                lv = lv / world
            loss_v = lv.item()
            step += 1
            if log:
                log.write(f"{step} {loss_v!r} {world}\n")
                log.flush()
            if args.step_time > 0:
                time.sleep(args.step_time)
            if job:
                job.step(metric=loss_v)
    except gandiva.Stop:
        print(f"ddp: rank {rank}: checkpointed at step {job.done}; stopping as asked", flush=True)
        return 0
    except gandiva.Terminated:
        print(f"ddp: rank {rank}: checkpointed at step {job.done} after SIGTERM", flush=True)
        raise
    except RuntimeError as e:
        if gang is None:
            raise
        # a collective failed: a peer died, or hung past the process group's timeout
        gang.failed = True
        print(f"ddp: rank {rank} of {world}: a collective failed at step {step + 1} (a peer rank died or hangs); "
              f"stopping: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
              file=sys.stderr, flush=True)
        return 1
    finally:
        if log:
            log.close()
    if job:
        job.close()
    if rank == 0 and args.out:
        write_atomic(args.out, json.dumps({"checksum": checksum(net), "steps": step, "world_size": world,
                                           "start": start, "restored": restored}) + "\n")
    print(f"ddp: rank {rank}: done {step} steps, checksum {checksum(net)[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except (gandiva.GangFailed, gandiva.AgentLost, gandiva.Superseded) as e:  # say why, exit 1
        print(f"ddp: {e}", file=sys.stderr, flush=True)
        code = 1
    except SystemExit as e:  # Terminated (143), a usage error (2)
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without the interpreter's teardown: torch 1.13 may destroy a gloo
    # process group there with its threads still running, and abort
    # ("terminate called without an active exception") after a clean run.
    os._exit(code)
