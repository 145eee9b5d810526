"""Unit tests of the Python in-job client against a fake agent.

Run with: python3 -m unittest discover -s python/tests (go test ./python runs them).
"""

import io
import json
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gandiva  # noqa: E402
from gandiva import checkpoint  # noqa: E402


class Agent:
    def __init__(self, sock):
        self.sock = sock
        self.sock.settimeout(5)
        self.buf = b""

    def recv(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("client closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def recv_kind(self, kind):
        while True:
            m = self.recv()
            if m["kind"] == kind:
                return m
            if m["kind"] != "progress":
                raise AssertionError(f"got {m}, want {kind}")

    def send(self, **msg):
        self.sock.sendall((json.dumps(msg) + "\n").encode())


class Job:
    """A counter that release wipes."""

    def __init__(self, state=0):
        self.state, self.saves, self.loads, self.releases = state, 0, 0, 0

    def hooks(self):
        def save(f):
            self.saves += 1
            f.write(struct.pack("<q", self.state))

        def load(f):
            self.loads += 1
            (self.state,) = struct.unpack("<q", f.read(8))

        def release():
            self.releases += 1
            self.state = -1

        return dict(save=save, load=load, release=release)


_open = []


def pair(env=None, hooks=None):
    a, b = socket.socketpair()
    _open.extend((a, b))
    client = gandiva.Client(env=env or {}, sock=a, **(hooks or {}))
    return client, Agent(b)


def step_async(client):
    box = {}

    def run():
        try:
            client.step()
            box["ok"] = True
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["err"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


class ClientTest(unittest.TestCase):
    def tearDown(self):
        while _open:
            _open.pop().close()

    def test_hello_progress_metric(self):
        job = Job()
        c, a = pair({"GANDIVA_REPORT_EVERY": "0"}, job.hooks())
        h = a.recv()
        self.assertEqual((h["kind"], h["version"], h["hooks"], h["done"], h["pid"]), ("hello", 1, True, 0, os.getpid()))
        for i in range(1, 4):
            c.step(metric=i / 10)
            m = a.recv()
            self.assertEqual((m["kind"], m["done"], m["metric"]), ("progress", i, i / 10))
            self.assertGreater(m["iter_time"], 0)
        c.step(metric=float("nan"))  # JSON cannot carry NaN: dropped
        self.assertNotIn("metric", a.recv())
        c.close()
        self.assertEqual(a.recv()["done"], 4)

    def test_rate_limit(self):
        c, a = pair({"GANDIVA_REPORT_EVERY": "3600"})
        a.recv()
        for _ in range(100):
            c.step()
        c.close()
        self.assertEqual(a.recv()["done"], 1)
        self.assertEqual(a.recv()["done"], 100)

    def test_suspend_release_resume(self):
        job = Job(42)
        c, a = pair({}, job.hooks())
        a.recv()
        a.send(kind="suspend", seq=1)
        time.sleep(0.01)
        t, box = step_async(c)
        s = a.recv_kind("suspended")
        self.assertEqual((s["seq"], s["done"], s["bytes"], s["released"]), (1, 1, 8, True))
        time.sleep(0.02)
        self.assertTrue(t.is_alive(), "step returned while suspended")
        self.assertEqual(job.state, -1)
        a.send(kind="grow", seq=2)
        e = a.recv()
        self.assertEqual((e["kind"], e["seq"]), ("error", 2))
        a.send(kind="resume", seq=3)
        r = a.recv()
        self.assertEqual((r["kind"], r["seq"], r["done"]), ("resumed", 3, 1))
        t.join(5)
        self.assertTrue(box.get("ok"), box)
        self.assertEqual((job.state, job.loads), (42, 1))

    def test_suspend_at(self):
        c, a = pair({"GANDIVA_REPORT_EVERY": "3600"}, Job().hooks())
        a.recv()
        a.send(kind="suspend", seq=1, at=4)
        time.sleep(0.01)
        for _ in range(3):
            c.step()
        t, box = step_async(c)
        self.assertEqual(a.recv_kind("suspended")["done"], 4)
        a.send(kind="resume", seq=2)
        a.recv_kind("resumed")
        t.join(5)
        self.assertTrue(box.get("ok"), box)

    def test_checkpoint_and_stop(self):
        for suspended in (False, True):
            d = tempfile.mkdtemp()
            job = Job(7)
            c, a = pair({"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_JOB": "j", "GANDIVA_ATTEMPT": "2"}, job.hooks())
            a.recv()
            c.step()
            if suspended:
                a.send(kind="suspend", seq=1)
                time.sleep(0.01)
                t, box = step_async(c)
                a.recv_kind("suspended")
                saves = job.saves
                a.send(kind="checkpoint", seq=2)
                self.assertEqual(a.recv_kind("saved")["done"], 2)
                self.assertEqual(job.saves, saves, "saved again instead of writing the host copy")
                a.send(kind="checkpoint", seq=3, exit=True)
            else:
                a.send(kind="checkpoint", seq=3, exit=True)
                time.sleep(0.01)
                t, box = step_async(c)
            m = a.recv_kind("saved")
            self.assertEqual((m["seq"], m["bytes"]), (3, 8))
            t.join(5)
            self.assertIsInstance(box.get("err"), gandiva.Stop)
            self.assertEqual(box["err"].code, 0)
            with self.assertRaises(gandiva.Stop):
                c.step()
            meta, path = checkpoint.read_checkpoint(d)
            with open(path, "rb") as f:
                self.assertEqual(struct.unpack("<q", f.read())[0], 7)
            self.assertEqual((meta["done"], meta["job"], meta["attempt"]), (2, "j", 2))

    def test_no_hooks(self):
        c, a = pair({"GANDIVA_CHECKPOINT_DIR": tempfile.mkdtemp()})
        self.assertFalse(a.recv()["hooks"])
        a.send(kind="checkpoint", seq=1, exit=True)
        time.sleep(0.01)
        c.step()
        e = a.recv_kind("error")
        self.assertIn("no save hook", e["message"])
        a.send(kind="suspend", seq=2)
        time.sleep(0.01)
        t, box = step_async(c)
        s = a.recv_kind("suspended")
        self.assertEqual((s["bytes"], s["released"]), (0, False))
        a.send(kind="resume", seq=3)
        a.recv_kind("resumed")
        t.join(5)
        self.assertTrue(box.get("ok"), box)

    def test_agent_lost(self):
        c, a = pair({"GANDIVA_REPORT_EVERY": "3600"})
        a.recv()
        a.sock.close()
        deadline = time.time() + 5
        with self.assertRaises(gandiva.AgentLost) as cm:
            while time.time() < deadline:
                c.step()
        self.assertEqual(cm.exception.code, 1)
        c, a = pair({})
        a.recv()
        a.send(kind="suspend", seq=1)
        time.sleep(0.01)
        t, box = step_async(c)
        a.recv_kind("suspended")
        a.sock.close()
        t.join(5)
        self.assertIsInstance(box.get("err"), gandiva.AgentLost)

    def test_pre_run(self):
        c, a = pair({"GANDIVA_PRERUN": "1", "GANDIVA_REPORT_EVERY": "3600"})
        a.recv()
        with self.assertRaises(gandiva.Stop):
            c.step()
        self.assertEqual(a.recv()["done"], 1)

    def test_hold_at_first_boundary(self):
        # a warm start (GANDIVA_HOLD=1) holds itself at its first boundary,
        # without a command, and goes on when resumed
        job = Job(5)
        c, a = pair({"GANDIVA_HOLD": "1", "GANDIVA_REPORT_EVERY": "3600"}, job.hooks())
        a.recv()
        t, box = step_async(c)
        s = a.recv_kind("suspended")
        self.assertEqual((s["seq"], s["done"], s["released"]), (0, 1, True))
        time.sleep(0.02)
        self.assertTrue(t.is_alive())
        a.send(kind="resume", seq=1)
        self.assertEqual(a.recv_kind("resumed")["seq"], 1)
        t.join(5)
        self.assertTrue(box.get("ok"))
        self.assertEqual(job.state, 5)

    def test_restore(self):
        d = tempfile.mkdtemp()
        gandiva.write_checkpoint(d, 17, lambda f: f.write(struct.pack("<q", 99)))
        job = Job()
        c, a = pair({"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_RESTORE": "1"}, job.hooks())
        h = a.recv()
        self.assertEqual((h["done"], c.done, c.restored, job.state), (17, 17, True, 99))
        c.step()
        self.assertEqual(a.recv()["done"], 18)
        c2 = gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": d}, **job.hooks())
        self.assertEqual((c2.done, c2.restored), (0, False))
        with self.assertRaises(RuntimeError):
            gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_RESTORE": "1"})
        with open(os.path.join(d, checkpoint.META_FILE), "w") as f:
            f.write("{")
        with self.assertRaises(ValueError):
            gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_RESTORE": "1"}, **job.hooks())
        c3 = gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": tempfile.mkdtemp(), "GANDIVA_RESTORE": "1"}, **job.hooks())
        self.assertEqual(c3.done, 0)

    def test_periodic_checkpoints(self):
        d = tempfile.mkdtemp()
        job = Job()
        c = gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_CHECKPOINT_EVERY": "0.02"}, **job.hooks())
        for i in range(10):
            job.state = i
            c.step()
            time.sleep(0.005)
        self.assertTrue(1 <= job.saves <= 4, job.saves)
        meta, _ = checkpoint.read_checkpoint(d)
        self.assertGreaterEqual(meta["done"], 2)

    def test_sigterm_checkpoints(self):
        # standalone with a checkpoint directory (a pod of a Kubernetes Job):
        # SIGTERM becomes a checkpoint at the next boundary and Terminated
        d = tempfile.mkdtemp()
        job = Job()
        before = signal.getsignal(signal.SIGTERM)
        c = gandiva.Client(env={"GANDIVA_CHECKPOINT_DIR": d}, **job.hooks())
        try:
            for i in range(3):
                job.state = i
                c.step()
            os.kill(os.getpid(), signal.SIGTERM)
            job.state = 3
            with self.assertRaises(gandiva.Terminated) as cm:
                c.step()
            self.assertEqual(cm.exception.code, 143)
            meta, _ = checkpoint.read_checkpoint(d)
            self.assertEqual((meta["done"], job.saves), (4, 1))
            with self.assertRaises(gandiva.Terminated):
                c.step()
        finally:
            c.close()
        self.assertIs(signal.getsignal(signal.SIGTERM), before)  # given back


class Listener:
    """The agent's socket for one pod (a short path: Unix socket paths are
    limited to about 100 bytes)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gp")
        self.path = os.path.join(self.dir, "agent.sock")
        self.sock = None

    def listen(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.sock.settimeout(10)

    def accept(self):
        conn, _ = self.sock.accept()
        _open.append(conn)
        return Agent(conn)

    def close(self):
        if self.sock is not None:
            self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.rmdir(self.dir)


def new_async(env, hooks=None):
    box = {}

    def run():
        try:
            box["client"] = gandiva.Client(env=env, **(hooks or {}))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["err"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


def step_until(client, stop):
    """Call step() until it raises or stop is set (checked after each
    step): the loop reaches the boundary where a command waits whenever
    the command arrives, without guessing when."""
    box = {}

    def run():
        try:
            while True:
                client.step()
                if stop.is_set():
                    box["ok"] = True
                    return
                time.sleep(0.001)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["err"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


def attach_env(path, **extra):
    env = {"GANDIVA_AGENT_SOCKET": path, "GANDIVA_POD_UID": "uid-1", "GANDIVA_POD_NAME": "p",
           "GANDIVA_POD_NAMESPACE": "team-a", "GANDIVA_REPORT_EVERY": "3600", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    env.update(extra)
    return env


class AttachTest(unittest.TestCase):
    """Attached (a pod of a Kubernetes shared node): no GANDIVA_FD, but
    GANDIVA_AGENT_SOCKET."""

    def setUp(self):
        self.l = Listener()

    def tearDown(self):
        while _open:
            _open.pop().close()
        self.l.close()

    def test_welcome_sets_gpus(self):
        env = attach_env(self.l.path)
        job = Job(3)
        t, box = new_async(env, job.hooks())
        time.sleep(0.3)  # the agent has not made the socket yet: the client retries
        self.l.listen()
        a = self.l.accept()
        h = a.recv()
        self.assertEqual((h["kind"], h["pod_uid"], h["pod"], h["pid"], h["hooks"]), ("hello", "uid-1", "team-a/p", os.getpid(), True))
        time.sleep(0.05)
        self.assertTrue(t.is_alive(), "the client returned before the welcome")
        a.send(kind="welcome", gpus=[1, 3])
        t.join(10)
        c = box["client"]
        try:
            self.assertEqual((env["CUDA_VISIBLE_DEVICES"], env["GANDIVA_GPUS"], c.gpus, c.managed), ("1,3", "1,3", [1, 3], True))
            c.step()
            self.assertEqual(a.recv()["done"], 1)
            a.send(kind="suspend", seq=1)
            stop = threading.Event()
            st, sbox = step_until(c, stop)
            self.assertEqual(a.recv_kind("suspended")["seq"], 1)
            stop.set()
            a.send(kind="resume", seq=2)
            self.assertEqual(a.recv_kind("resumed")["seq"], 2)
            st.join(5)
            self.assertTrue(sbox.get("ok"), sbox)
            self.assertEqual(job.state, 3)
        finally:
            c.close()

    def test_refused(self):
        self.l.listen()
        for answer, want in [({"kind": "error", "message": "this socket is pod team-a/q's"}, "refused this process: this socket is pod team-a/q's"),
                             (None, "without a welcome"),
                             ({"kind": "resume", "seq": 1}, "with 'resume'")]:
            t, box = new_async(attach_env(self.l.path))
            a = self.l.accept()
            a.recv()
            if answer is not None:
                a.send(**answer)
            a.sock.close()
            t.join(10)
            self.assertIn(want, str(box.get("err")))
        self.l.sock.close()
        self.l.sock = None
        os.unlink(self.l.path)
        with self.assertRaises(RuntimeError) as cm:
            gandiva.Client(env=attach_env(self.l.path, GANDIVA_ATTACH_TIMEOUT="0.3"))
        self.assertIn(self.l.path, str(cm.exception))

    def test_restore_after_welcome_and_hold(self):
        d = tempfile.mkdtemp()
        gandiva.write_checkpoint(d, 5, lambda f: f.write(struct.pack("<q", 41)))
        env = attach_env(self.l.path, GANDIVA_CHECKPOINT_DIR=d, GANDIVA_RESTORE="1")
        job = Job()
        hooks = job.hooks()
        seen = {}
        load = hooks["load"]

        def load_checking(f):
            seen["cuda"] = env.get("CUDA_VISIBLE_DEVICES")
            load(f)

        hooks["load"] = load_checking
        self.l.listen()
        t, box = new_async(env, hooks)
        a = self.l.accept()
        self.assertEqual(a.recv()["done"], 5)
        a.send(kind="welcome", gpus=[2], hold=True)
        t.join(10)
        c = box["client"]
        try:
            self.assertEqual((seen.get("cuda"), job.state, c.done), ("2", 41, 5))
            st, sbox = step_async(c)
            s = a.recv_kind("suspended")
            self.assertEqual((s["seq"], s["done"]), (0, 6))
            a.send(kind="resume", seq=1)
            self.assertEqual(a.recv_kind("resumed")["seq"], 1)
            st.join(5)
            self.assertTrue(sbox.get("ok"), sbox)
        finally:
            c.close()

    def test_sigterm_while_suspended(self):
        d = tempfile.mkdtemp()
        env = attach_env(self.l.path, GANDIVA_CHECKPOINT_DIR=d)
        job = Job(7)
        self.l.listen()
        before = signal.getsignal(signal.SIGTERM)
        t, box = new_async(env, job.hooks())
        a = self.l.accept()
        a.recv()
        a.send(kind="welcome", gpus=[0])
        t.join(10)
        c = box["client"]
        # (the client was made in another thread: SIGTERM is not its; take
        # it over as the main thread would have)
        c._old_term = signal.signal(signal.SIGTERM, c._on_term)
        try:
            a.send(kind="suspend", seq=1)
            st, sbox = step_until(c, threading.Event())
            s = a.recv_kind("suspended")
            self.assertEqual(job.state, -1)
            os.kill(os.getpid(), signal.SIGTERM)
            st.join(10)
            self.assertIsInstance(sbox.get("err"), gandiva.Terminated)
            self.assertEqual(a.recv_kind("saved")["done"], s["done"])
            meta, path = checkpoint.read_checkpoint(d)
            with open(path, "rb") as f:
                self.assertEqual((meta["done"], struct.unpack("<q", f.read(8))[0]), (s["done"], 7))
        finally:
            c.close()
        self.assertIs(signal.getsignal(signal.SIGTERM), before)


class CheckpointTest(unittest.TestCase):
    def test_round_trip_and_atomicity(self):
        d = os.path.join(tempfile.mkdtemp(), "a", "b")
        with self.assertRaises(checkpoint.NoCheckpoint):
            checkpoint.read_checkpoint(d)
        checkpoint.write_checkpoint(d, 5, lambda f: f.write(b"five"))
        m = checkpoint.write_checkpoint(d, 9, lambda f: f.write(b"nine!"), job="j", attempt=1)
        meta, path = checkpoint.read_checkpoint(d)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"nine!")
        self.assertEqual((meta["done"], meta["bytes"], meta["file"]), (9, 5, m["file"]))
        self.assertEqual(len([n for n in os.listdir(d) if n.startswith("ckpt-")]), 1)

        def failing(f):
            f.write(b"partial")
            raise OSError("disk full")

        with self.assertRaises(OSError):
            checkpoint.write_checkpoint(d, 12, failing)
        meta, _ = checkpoint.read_checkpoint(d)
        self.assertEqual(meta["done"], 9)
        self.assertEqual(sorted(n for n in os.listdir(d) if n != checkpoint.LOCK_FILE), sorted([checkpoint.META_FILE, m["file"]]))
        with open(os.path.join(d, m["file"]), "wb") as f:
            f.write(b"nin")
        with self.assertRaisesRegex(ValueError, "has 3 bytes"):
            checkpoint.read_checkpoint(d)
        with open(os.path.join(d, checkpoint.META_FILE), "w") as f:
            json.dump({"format": "gandiva-checkpoint", "version": 1, "file": "../x", "bytes": 1, "done": 0}, f)
        with self.assertRaisesRegex(ValueError, "bad file name"):
            checkpoint.read_checkpoint(d)


    def test_writers_of_one_directory_wait_for_each_other(self):
        # The ranks of a gang share the directory: while one writes, the
        # lock is held, so another's clean-up cannot remove its payload.
        import fcntl

        d = tempfile.mkdtemp()
        checkpoint.write_checkpoint(d, 1, lambda f: f.write(b"one"))
        held = []

        def save(f):
            lfd = os.open(os.path.join(d, checkpoint.LOCK_FILE), os.O_RDWR)
            try:
                fcntl.flock(lfd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
            finally:
                os.close(lfd)
            f.write(b"rank 1")

        checkpoint.write_checkpoint(d, 5, save)
        self.assertEqual(held, [True], "a writer saving does not hold the directory's lock")
        meta, path = checkpoint.read_checkpoint(d)
        with open(path, "rb") as f:
            self.assertEqual((meta["done"], f.read()), (5, b"rank 1"))


class PyTorchHooksTest(unittest.TestCase):
    def test_hooks_round_trip(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        from gandiva import pytorch

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def train(n):
            for _ in range(n):
                x = torch.randn(16, 8)
                loss = model(x).pow(2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            return loss.item()

        train(3)
        h = pytorch.hooks(model, opt)
        buf = io.BytesIO()
        h["save"](buf)
        want = train(3)
        buf.seek(0)
        h["load"](buf)
        self.assertEqual(train(3), want)
        self.assertGreater(h["offload"](), 0)
        h["reload"]()
        train(1)


if __name__ == "__main__":
    unittest.main()
