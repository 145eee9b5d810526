"""Real torch.distributed gangs (gloo, CPU) of examples/pytorch/ddp.py, with
fake agents on socketpairs. They need a Python with torch and run only with
GANDIVA_TEST_TORCH=1 (go test ./python runs them with one: TestPythonTorch),
where a missing torch is a failure, not a skip.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gandiva import checkpoint  # noqa: E402

from test_client import Agent  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DDP = os.path.join(HERE, "..", "..", "examples", "pytorch", "ddp.py")
ENABLED = os.environ.get("GANDIVA_TEST_TORCH") == "1"

if ENABLED:
    import torch  # noqa: F401 - a missing torch must fail here, not skip


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rank:
    """One ddp.py process, with a fake agent when managed."""

    def __init__(self, rank, world, port, workdir, args, env=None, managed=True, script=DDP):
        e = {k: v for k, v in os.environ.items() if not k.startswith("GANDIVA_")}
        e.update(env or {})
        e.update(PYTHONDONTWRITEBYTECODE="1", RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port), GANDIVA_REPORT_EVERY="0.01")
        self.agent, fds, child = None, (), None
        if managed:
            a, child = socket.socketpair()
            self.agent = Agent(a)
            self.agent.sock.settimeout(120)
            e["GANDIVA_FD"] = str(child.fileno())
            fds = (child.fileno(),)
        self.log = open(os.path.join(workdir, f"rank{rank}.log"), "wb")
        self.proc = subprocess.Popen([sys.executable, script] + args, cwd=workdir, env=e, pass_fds=fds,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        if child is not None:
            child.close()
        self.path = self.log.name

    def wait_done(self, n, timeout=120):
        """Read the agent's messages until progress reaches n."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = self.agent.recv()
            if m.get("done", 0) >= n:
                return m
        raise AssertionError(f"no progress to {n}")

    def wait(self, timeout=120):
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def output(self):
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if self.agent is not None:
            self.agent.sock.close()


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            step, loss, world = line.split()
            out[int(step)] = (float(loss), int(world))
    return out


# What the scripts built from docs/CLIENT.md need besides the diff's lines.
PREAMBLE = """
import json, os, sys, hashlib
sys.path.insert(0, %(python)r)
import torch, torch.nn as nn
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
steps, seed, global_batch = int(os.environ["T_STEPS"]), 1, 8

class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)
    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))

def shard(seed, step, global_batch, rank, world):
    g = torch.Generator(); g.manual_seed(seed * 1000003 + step)
    x = torch.randn(global_batch, 3, 8, 8, generator=g); y = torch.randint(0, 10, (global_batch,), generator=g)
    n = global_batch // world
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
"""

POSTAMBLE = """
if rank == 0:
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().contiguous().numpy().tobytes())
    with open("out.json", "w") as f:
        json.dump({"checksum": h.hexdigest()}, f)
"""

# A gang that destroys its process group when it frees the GPU and forms it
# again on resume, as under NCCL, here with gloo so that it runs on a CPU.
REFORM = """
import torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
import gandiva, gandiva.distributed, gandiva.pytorch
gang = gandiva.distributed.init_process_group("gloo")
gang.keeps_group = os.environ.get("T_REFORM") != "1"
rank, world = gandiva.distributed.rank_and_world()
model = CNN()
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
groups = []

def regroup():
    global ddp
    groups.append(dist.group.WORLD)
    ddp = DDP(model)

job = gandiva.distributed.Client(gang, regroup=regroup, **gandiva.pytorch.hooks(model, opt))
for step in range(job.done, steps):
    x, y = shard(seed, step, global_batch, rank, world)
    loss = F.cross_entropy(ddp(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    opt.zero_grad(set_to_none=True)
    job.step(metric=loss.item())
job.close()
print("regrouped", len(groups), flush=True)
"""


def doc_script(path):
    """The Gandiva-aware script of docs/CLIENT.md's DDP diff (its context
    and added lines), with PREAMBLE's definitions and a checksum at the end."""
    with open(os.path.join(HERE, "..", "..", "docs", "CLIENT.md")) as f:
        doc = f.read()
    start = doc.index("```diff\n") + len("```diff\n")
    block = doc[start:doc.index("```", start)]
    body = [ln[1:] for ln in block.splitlines() if ln[:1] in (" ", "+")]
    assert sum(1 for ln in block.splitlines() if ln[:1] in ("+", "-")) < 20, "the diff grew past 20 lines"
    with open(path, "w") as f:
        f.write(PREAMBLE % {"python": os.path.join(HERE, "..")} + "\n".join(body) + "\n" + POSTAMBLE)
    return path


def checksum_of(d):
    with open(os.path.join(d, "out.json")) as f:
        return json.load(f)["checksum"]


@unittest.skipUnless(ENABLED, "GANDIVA_TEST_TORCH=1 runs them (go test ./python: TestPythonTorch)")
class TorchGangTest(unittest.TestCase):
    def test_the_documented_diff(self):
        # docs/CLIENT.md's Gandiva-aware DDP script, 2 ranks under fake
        # agents: suspended at the agents' `at` (offload/reload on the CPU),
        # resumed, checkpointed, restored as a new gang: the same weights as
        # an uninterrupted run
        base = tempfile.mkdtemp()
        script = doc_script(os.path.join(base, "doc_ddp.py"))
        env = {"T_STEPS": "14"}

        def gang(name, managed, extra=None):
            d = os.path.join(base, name)
            os.mkdir(d)
            port = free_port()
            e = dict(env, **(extra or {}))
            return d, [Rank(r, 2, port, d, [], e, managed=managed, script=script) for r in range(2)]

        ref, rs = gang("ref", False)
        self.assertEqual([r.wait() for r in rs], [0, 0], [r.output() for r in rs])
        ckpt = os.path.join(base, "ckpt")
        d, rs = gang("a", True, {"GANDIVA_CHECKPOINT_DIR": ckpt})
        try:
            for r in rs:
                r.agent.recv_kind("hello")
                r.agent.send(kind="suspend", seq=1, at=3)
            sus = [r.agent.recv_kind("suspended") for r in rs]
            self.assertEqual([m["done"] for m in sus], [3, 3])
            self.assertTrue(all(m["released"] for m in sus), sus)  # offload: the ready-made hooks
            for r in rs:
                r.agent.send(kind="resume", seq=2)
                r.agent.recv_kind("resumed")
            rs[0].wait_done(6)
            for r in rs:
                r.agent.send(kind="checkpoint", seq=3, exit=True)
            saved = [r.agent.recv_kind("saved")["done"] for r in rs]
            self.assertEqual([r.wait() for r in rs], [0, 0], [r.output() for r in rs])
        finally:
            for r in rs:
                r.close()
        self.assertEqual(saved[0], saved[1])
        self.assertLess(saved[0], 14)
        d2, rs = gang("b", False, {"GANDIVA_CHECKPOINT_DIR": ckpt, "GANDIVA_RESTORE": "1"})
        self.assertEqual([r.wait() for r in rs], [0, 0], [r.output() for r in rs])
        self.assertEqual(checksum_of(d2), checksum_of(ref))

    def test_process_group_formed_again_after_suspension(self):
        # the NCCL way, with gloo: the groups destroyed when the GPU is freed,
        # formed again once both ranks resumed (one much later than the
        # other), DDP rebuilt by regroup: training goes on to the same weights
        base = tempfile.mkdtemp()
        script = os.path.join(base, "reform.py")
        with open(script, "w") as f:
            f.write(PREAMBLE % {"python": os.path.join(HERE, "..")} + REFORM + POSTAMBLE)
        outs = {}
        for name, managed in (("ref", False), ("reform", True)):
            d = os.path.join(base, name)
            os.mkdir(d)
            port = free_port()
            rs = [Rank(r, 2, port, d, [], {"T_STEPS": "10", "T_REFORM": "1"}, managed=managed, script=script)
                  for r in range(2)]
            try:
                if managed:
                    for r in rs:
                        r.agent.recv_kind("hello")
                        r.agent.send(kind="suspend", seq=1, at=4)
                    self.assertEqual([r.agent.recv_kind("suspended")["done"] for r in rs], [4, 4])
                    rs[1].agent.send(kind="resume", seq=2)
                    rs[1].agent.recv_kind("resumed")
                    time.sleep(2)  # rank 1 waits for rank 0 on the store
                    rs[0].agent.send(kind="resume", seq=2)
                    rs[0].agent.recv_kind("resumed")
                codes = [r.wait() for r in rs]
            finally:
                for r in rs:
                    r.close()
            self.assertEqual(codes, [0, 0], [r.output() for r in rs])
            outs[name] = (checksum_of(d), rs[0].output(), rs[1].output())
        self.assertIn("regrouped 1", outs["reform"][1])
        self.assertIn("regrouped 1", outs["reform"][2])
        self.assertIn("regrouped 0", outs["ref"][1])
        self.assertEqual(outs["reform"][0], outs["ref"][0])

    def test_checkpoint_then_restore_on_one_rank(self):
        # a 2-rank gang checkpointed by its agents, restored as one process
        # (shrink): it starts at the gang's step and its loss continues the
        # 2-rank curve (the same samples at every step)
        d = tempfile.mkdtemp()
        ckpt = os.path.join(d, "ckpt")
        steps = 16
        args = ["--steps", str(steps), "--loss-log", os.path.join(d, "loss"), "--out", os.path.join(d, "out.json")]
        port = free_port()
        ranks = [Rank(r, 2, port, d, args + ["--step-time", "0.2", "--gang-timeout", "60"],
                      {"GANDIVA_CHECKPOINT_DIR": ckpt}) for r in range(2)]
        try:
            for r in ranks:
                self.assertEqual(r.agent.recv()["kind"], "hello")
            ranks[0].wait_done(3)
            for i, r in enumerate(ranks):
                r.agent.send(kind="checkpoint", seq=10 + i, exit=True)
            saved = [r.agent.recv_kind("saved") for r in ranks]
            codes = [r.wait() for r in ranks]
        finally:
            for r in ranks:
                r.close()
        self.assertEqual(codes, [0, 0], [r.output() for r in ranks])
        done = saved[0]["done"]
        self.assertEqual(saved[1]["done"], done)
        self.assertEqual(checkpoint.read_checkpoint(ckpt)[0]["done"], done)
        ref = losses(os.path.join(d, "loss"))  # the 2-rank curve up to the checkpoint and a little past it

        # the uninterrupted 2-rank curve, for the steps after the checkpoint
        d2 = tempfile.mkdtemp()
        port = free_port()
        full = [Rank(r, 2, port, d2, ["--steps", str(steps), "--loss-log", os.path.join(d2, "loss")], managed=False)
                for r in range(2)]
        self.assertEqual([r.wait() for r in full], [0, 0], [r.output() for r in full])
        full_curve = losses(os.path.join(d2, "loss"))
        for s, v in ref.items():
            self.assertEqual(full_curve[s], v, f"step {s}: interrupted and uninterrupted runs differ")

        d3 = tempfile.mkdtemp()
        one = Rank(0, 1, free_port(), d3, ["--steps", str(steps), "--loss-log", os.path.join(d3, "loss"),
                                           "--out", os.path.join(d3, "out.json")],
                   {"GANDIVA_CHECKPOINT_DIR": ckpt, "GANDIVA_RESTORE": "1"}, managed=False)
        self.assertEqual(one.wait(), 0, one.output())
        with open(os.path.join(d3, "out.json")) as f:
            res = json.load(f)
        self.assertEqual((res["start"], res["restored"], res["world_size"], res["steps"]), (done, True, 1, steps))
        curve = losses(os.path.join(d3, "loss"))
        self.assertEqual(sorted(curve), list(range(done + 1, steps + 1)))
        for s in curve:
            self.assertEqual(curve[s][1], 1)
            # the same weights and samples; only the order of the float sums differs
            self.assertAlmostEqual(curve[s][0], full_curve[s][0], delta=1e-4 * max(1.0, abs(full_curve[s][0])),
                                   msg=f"step {s}")

    def test_hung_rank_stops_the_gang(self):
        # rank 1 stops answering (SIGSTOP): rank 0 leaves its collective
        # after the gang timeout with status 1 and says why
        d = tempfile.mkdtemp()
        port = free_port()
        ranks = [Rank(r, 2, port, d, ["--steps", "1000", "--step-time", "0.05", "--gang-timeout", "5"])
                 for r in range(2)]
        try:
            for r in ranks:
                r.agent.recv_kind("hello")
            ranks[0].wait_done(2)
            ranks[1].wait_done(2)
            os.kill(ranks[1].proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            code = ranks[0].proc.wait(90)
            took = time.monotonic() - t0
        finally:
            for r in ranks:
                r.close()
        out = ranks[0].output()
        self.assertEqual(code, 1, out)
        self.assertLess(took, 90)
        self.assertRegex(out, r"rank 0 of 2: .*(failed|hangs)", out)


if __name__ == "__main__":
    unittest.main()
