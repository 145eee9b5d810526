"""Unit tests of the gang-aware client (gandiva.distributed) with fake
agents (socketpairs) and the ranks as threads of one process sharing an
in-memory gang. Standard library only.
"""

import os
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gandiva  # noqa: E402
from gandiva import checkpoint, distributed  # noqa: E402

from test_client import Agent, Job  # noqa: E402


class World:
    """What the ranks share: the store and the agreement's rendezvous."""

    def __init__(self, n, timeout):
        self.n, self.timeout = n, timeout
        self.lock = threading.Lock()
        self.kv = {}
        self.barrier = threading.Barrier(n, timeout=timeout)
        self.slots = [None] * n
        self.agreements = 0


class ThreadGang(distributed.Gang):
    def __init__(self, world, rank):
        self.w, self.rank, self.world_size, self.timeout = world, rank, world.n, world.timeout

    def agree(self, flags):
        try:
            self.w.slots[self.rank] = list(flags)
            self.w.barrier.wait()
            out = [max(s[i] for s in self.w.slots) for i in range(len(flags))]
            if self.w.barrier.wait() == 0:
                self.w.agreements += 1
            return out
        except threading.BrokenBarrierError:
            raise distributed.GangFailed(f"rank {self.rank}: agreement failed") from None

    def add(self, key, n):
        with self.w.lock:
            self.w.kv[key] = self.w.kv.get(key, 0) + n
            return self.w.kv[key]

    def set(self, key, value):
        with self.w.lock:
            self.w.kv[key] = value

    def get(self, key):
        with self.w.lock:
            return self.w.kv[key]


class Rank:
    """One rank: its client, its fake agent, its job and a training thread."""

    def __init__(self, world, rank, env, managed=True):
        self.job = Job(100 + rank)
        self.agent = None
        sock = None
        if managed:
            a, b = socket.socketpair()
            self.socks = [a, b]
            sock = a
            self.agent = Agent(b)
        else:
            self.socks = []
        self.client = distributed.Client(ThreadGang(world, rank), env=dict(env), sock=sock, **self.job.hooks())
        if managed:
            assert self.agent.recv()["kind"] == "hello"
        self.result = None
        self.stops = []  # done at each return from step()

    def run(self, steps):
        def loop():
            try:
                for _ in range(steps):
                    self.client.step()
                    self.stops.append(self.client.done)
                self.result = "finished"
            except BaseException as e:  # noqa: B902 - the test inspects it
                self.result = e
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def join(self, t=20):
        self.thread.join(t)
        assert not self.thread.is_alive(), "rank still running"
        self.client.close()
        for s in self.socks:
            s.close()


FOREVER = 10 ** 9  # steps: until the test stops the gang


def gang(n=2, timeout=10, env=None, managed=True):
    w = World(n, timeout)
    return w, [Rank(w, r, env or {"GANDIVA_REPORT_EVERY": "3600"}, managed) for r in range(n)]


def wait_until(cond, t=10):
    end = time.monotonic() + t
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


class GangTest(unittest.TestCase):
    def test_suspend_waits_for_the_late_agent(self):
        # rank 0's agent asks first; rank 1's agent only after rank 0 has
        # suspended: both stop at the same mini-batch, rank 1 waiting there
        w, (r0, r1) = gang()
        r0.agent.send(kind="suspend", seq=1)
        r0.run(20)
        r1.run(20)
        s0 = r0.agent.recv_kind("suspended")
        time.sleep(0.05)
        self.assertEqual(len(r1.stops), s0["done"] - 1, "rank 1 went past the agreed boundary")
        r1.agent.send(kind="suspend", seq=7)
        s1 = r1.agent.recv_kind("suspended")
        self.assertEqual((s0["done"], s1["done"], s1["seq"], s1["released"]), (s1["done"], s0["done"], 7, True))
        self.assertEqual((r0.job.state, r1.job.state), (-1, -1))
        r1.agent.send(kind="resume", seq=8)
        r1.agent.recv_kind("resumed")
        time.sleep(0.05)
        self.assertEqual(len(r1.stops), s0["done"] - 1, "rank 1 trained on before its peer resumed")
        r0.agent.send(kind="resume", seq=2)
        r0.agent.recv_kind("resumed")
        r0.join()
        r1.join()
        self.assertEqual((r0.result, r1.result), ("finished", "finished"))
        self.assertEqual((r0.job.state, r1.job.state), (100, 101))
        self.assertEqual(r0.stops, r1.stops)

    def test_suspend_at_is_honoured(self):
        w, (r0, r1) = gang()
        r0.agent.send(kind="suspend", seq=1, at=6)
        r0.run(10)
        r1.run(10)
        wait_until(lambda: len(r0.stops) >= 3)
        r1.agent.send(kind="suspend", seq=1, at=6)
        self.assertEqual(r0.agent.recv_kind("suspended")["done"], 6)
        self.assertEqual(r1.agent.recv_kind("suspended")["done"], 6)
        for r in (r0, r1):
            r.agent.send(kind="resume", seq=2)
        for r in (r0, r1):
            r.agent.recv_kind("resumed")
            r.join()
            self.assertEqual(r.result, "finished")

    def test_agent_that_never_asks(self):
        w, (r0, r1) = gang(timeout=0.5)
        r0.agent.send(kind="suspend", seq=1)
        r0.run(20)
        r1.run(20)
        r0.agent.recv_kind("suspended")
        r1.join()
        self.assertIsInstance(r1.result, distributed.GangFailed)
        self.assertEqual(r1.result.code, 1)
        self.assertIn("sent no command", str(r1.result))
        r0.agent.send(kind="resume", seq=2)
        r0.join()  # its peer never resumes: it stops instead of training alone
        self.assertIsInstance(r0.result, distributed.GangFailed)
        self.assertIn("resumption", str(r0.result))

    def test_checkpoint_once_for_the_gang(self):
        d = tempfile.mkdtemp()
        env = {"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_JOB": "j", "GANDIVA_ATTEMPT": "3"}
        w, (r0, r1) = gang(env=env)
        r0.run(FOREVER)
        r1.run(FOREVER)
        wait_until(lambda: len(r1.stops) >= 2)
        r1.agent.send(kind="checkpoint", seq=4, exit=True)  # the non-committing rank asks first
        time.sleep(0.05)
        r0.agent.send(kind="checkpoint", seq=5, exit=True)
        m1 = r1.agent.recv_kind("saved")
        m0 = r0.agent.recv_kind("saved")
        meta, path = checkpoint.read_checkpoint(d)  # committed before either said saved
        self.assertEqual((m0["done"], m1["done"], m0["bytes"], m1["bytes"]), (meta["done"],) * 2 + (8, 8))
        self.assertEqual((m0["seq"], m1["seq"], meta["attempt"]), (5, 4, 3))
        r0.join()
        r1.join()
        self.assertIsInstance(r0.result, gandiva.Stop)
        self.assertIsInstance(r1.result, gandiva.Stop)
        self.assertEqual((r0.job.saves, r1.job.saves), (1, 0), "written once, by rank 0")
        with open(path, "rb") as f:
            self.assertEqual(struct.unpack("<q", f.read())[0], 100)

    def test_hostile_checkpoint_result_on_the_store(self):
        # Anything that reaches MASTER_PORT can write the store's keys: a
        # result rank 0 never posts stops the waiting rank with GangFailed,
        # and it reports nothing saved.
        d = tempfile.mkdtemp()
        env = {"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_JOB": "j"}
        for raw in (b'{"ok": true}', b'{"ok": true, "bytes": "8"}', b'{"ok": 1, "bytes": 8}', b"[1]",
                    b'{"ok": false, "error": 7}', b"\xff", b"{", b'{"ok": true, "bytes": -1}'):
            with self.subTest(raw=raw):
                w = World(2, 1)
                w.kv["ckpt/0/1/posted"] = 1
                w.kv["ckpt/0/1/result"] = raw
                r1 = Rank(w, 1, env)
                with self.assertRaises(distributed.GangFailed) as cm:
                    r1.client._checkpoint(4, r1.job.hooks()["save"])
                self.assertIn("malformed", str(cm.exception))
                r1.client.close()
                r1.socks[0].close()
                kinds = []
                try:
                    while True:
                        kinds.append(r1.agent.recv()["kind"])
                except EOFError:
                    pass
                r1.socks[1].close()
                self.assertNotIn("saved", kinds)

    def test_waiting_rank_does_what_the_peers_agreed(self):
        # rank 1's agent has asked for a suspension at a later boundary when
        # rank 0's asks for a checkpoint: rank 1 waits for its own
        # checkpoint command (the gang's), and suspends later, at its at
        d = tempfile.mkdtemp()
        w, (r0, r1) = gang(env={"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d})
        r1.agent.send(kind="suspend", seq=1, at=8)
        r0.agent.send(kind="checkpoint", seq=1)
        r0.run(12)
        r1.run(12)
        time.sleep(0.1)  # rank 1 waits at the first boundary for its agent
        self.assertEqual(r1.stops, [])
        r1.agent.send(kind="checkpoint", seq=2)
        m0 = r0.agent.recv_kind("saved")
        m1 = r1.agent.recv_kind("saved")
        self.assertEqual((m0["done"], m1["done"], m1["seq"]), (m0["done"], m0["done"], 2))
        self.assertLess(m0["done"], 8)
        r0.agent.send(kind="suspend", seq=2, at=8)
        for r in (r0, r1):
            self.assertEqual(r.agent.recv_kind("suspended")["done"], 8)
        for r in (r0, r1):
            r.agent.send(kind="resume", seq=3)
        for r in (r0, r1):
            r.agent.recv_kind("resumed")
            r.join()
            self.assertEqual(r.result, "finished")

    def test_checkpoint_while_suspended(self):
        d = tempfile.mkdtemp()
        w, (r0, r1) = gang(env={"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d})
        for r in (r0, r1):
            r.agent.send(kind="suspend", seq=1, at=2)
            r.run(10)
        for r in (r0, r1):
            r.agent.recv_kind("suspended")
        r1.agent.send(kind="checkpoint", seq=2, exit=True)
        time.sleep(0.05)
        self.assertRaises(checkpoint.NoCheckpoint, checkpoint.read_checkpoint, d)
        r0.agent.send(kind="checkpoint", seq=2, exit=True)
        for r in (r0, r1):
            self.assertEqual(r.agent.recv_kind("saved")["done"], 2)
            r.join()
            self.assertIsInstance(r.result, gandiva.Stop)
        self.assertEqual(checkpoint.read_checkpoint(d)[0]["done"], 2)
        self.assertEqual(r0.job.saves, 1)  # the host copy of the suspension

    def test_rank_failing_before_the_barrier_keeps_the_old_checkpoint(self):
        d = tempfile.mkdtemp()
        checkpoint.write_checkpoint(d, 1, lambda f: f.write(b"old"))
        w, (r0, r1) = gang(timeout=0.5, env={"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d})
        c0 = r0.client
        c0.done = 5
        with self.assertRaises(distributed.GangFailed) as cm:
            c0._checkpoint(1, c0._save)  # rank 1 never comes
        self.assertIn("1 of 2 ranks", str(cm.exception))
        meta, path = checkpoint.read_checkpoint(d)
        self.assertEqual(meta["done"], 1)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"old")
        for r in (r0, r1):
            r.client.close()
            for s in r.socks:
                s.close()

    def test_stale_checkpoint_supersedes_every_rank(self):
        d = tempfile.mkdtemp()
        checkpoint.write_checkpoint(d, 1, lambda f: f.write(b"new"), attempt=9)
        env = {"GANDIVA_REPORT_EVERY": "3600", "GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_ATTEMPT": "2"}
        w, (r0, r1) = gang(env=env)
        for r in (r0, r1):
            r.agent.send(kind="checkpoint", seq=1, exit=True)
            r.run(10)
        for r in (r0, r1):
            r.join()
            self.assertIsInstance(r.result, gandiva.Superseded)
        self.assertEqual(checkpoint.read_checkpoint(d)[0]["attempt"], 9)

    def test_lost_agent_stops_the_gang(self):
        w, (r0, r1) = gang()
        r0.run(FOREVER)
        r1.run(FOREVER)
        wait_until(lambda: len(r1.stops) >= 3)
        r1.socks[1].close()  # rank 1's agent dies
        r0.join()
        r1.join()
        self.assertIsInstance(r1.result, gandiva.AgentLost)
        self.assertIsInstance(r0.result, distributed.GangFailed)
        self.assertIn("peer rank stopped", str(r0.result))
        self.assertEqual(r0.stops, r1.stops)

    def test_sigterm_on_one_rank_checkpoints_the_gang(self):
        d = tempfile.mkdtemp()
        w, (r0, r1) = gang(env={"GANDIVA_CHECKPOINT_DIR": d}, managed=False)
        r1.client._term = True  # as its SIGTERM handler does (signals go to the main thread only)
        r0.run(10)
        r1.run(10)
        r0.join()
        r1.join()
        self.assertIsInstance(r0.result, gandiva.Terminated)
        self.assertIsInstance(r1.result, gandiva.Terminated)
        self.assertEqual(r0.result.code, 143)
        self.assertEqual(checkpoint.read_checkpoint(d)[0]["done"], 1)
        self.assertEqual((r0.job.saves, r1.job.saves), (1, 0))

    def test_periodic_checkpoints_are_agreed(self):
        # only rank 1 asks for periodic checkpoints: the gang takes them together, rank 0 writes
        d = tempfile.mkdtemp()
        w = World(2, 10)
        r0 = Rank(w, 0, {"GANDIVA_CHECKPOINT_DIR": d}, managed=False)
        r1 = Rank(w, 1, {"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_CHECKPOINT_EVERY": "0.01"}, managed=False)
        for r in (r0, r1):
            r.run(1)
        for r in (r0, r1):
            r.join()
        time.sleep(0.02)
        for r in (r0, r1):
            r.run(1)
        for r in (r0, r1):
            r.join()
        self.assertIn(r0.job.saves, (1, 2))  # (also at the first step, if it came 0.01 s after the start)
        self.assertEqual(r1.job.saves, 0)
        self.assertEqual(checkpoint.read_checkpoint(d)[0]["done"], 2)

    def test_ranks_at_different_mini_batches(self):
        # e.g. restored from different checkpoints: stop at once, saying so
        w, (r0, r1) = gang(managed=False)
        r1.client.done = 7
        r0.run(3)
        r1.run(3)
        for r in (r0, r1):
            r.join()
            self.assertIsInstance(r.result, distributed.GangFailed)
            self.assertIn("different mini-batches (1 to 8", str(r.result))

    def test_commands_that_are_not_the_gangs(self):
        # a resume while running is answered by its rank alone, with no stop
        w, (r0, r1) = gang()
        r0.agent.send(kind="resume", seq=3)
        r0.run(5)
        r1.run(5)
        self.assertEqual(r0.agent.recv_kind("resumed")["seq"], 3)
        r0.join()
        r1.join()
        self.assertEqual((r0.result, r1.result, r0.stops), ("finished", "finished", [1, 2, 3, 4, 5]))

    def test_single_process_is_the_plain_client(self):
        d = tempfile.mkdtemp()
        job = Job(5)
        c = distributed.Client(None, env={"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_CHECKPOINT_EVERY": "0.001"},
                               **job.hooks())
        time.sleep(0.01)
        c.step()
        c.close()
        self.assertEqual((job.saves, checkpoint.read_checkpoint(d)[0]["done"]), (1, 1))


class RankAndWorldTest(unittest.TestCase):
    def test_env(self):
        f = distributed.rank_and_world
        self.assertEqual(f({}), (0, 1))
        self.assertEqual(f({"WORLD_SIZE": "1"}), (0, 1))
        self.assertEqual(f({"WORLD_SIZE": "4", "RANK": "3"}), (3, 4))
        self.assertEqual(f({"WORLD_SIZE": "2", "JOB_COMPLETION_INDEX": "1"}), (1, 2))
        self.assertEqual(f({"WORLD_SIZE": "2", "RANK": "0", "JOB_COMPLETION_INDEX": "1"}), (0, 2))
        for env, what in (({"WORLD_SIZE": "x"}, "WORLD_SIZE"), ({"WORLD_SIZE": "0"}, "WORLD_SIZE"),
                          ({"WORLD_SIZE": "2"}, "RANK"), ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK"),
                          ({"WORLD_SIZE": "2", "JOB_COMPLETION_INDEX": "-1"}, "JOB_COMPLETION_INDEX")):
            with self.assertRaises(ValueError) as cm:
                f(env)
            self.assertIn(what, str(cm.exception))

    def test_import_needs_no_torch(self):
        self.assertNotIn("torch", sys.modules)


if __name__ == "__main__":
    unittest.main()
