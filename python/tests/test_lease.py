"""Fencing in the Python in-job client: leases and checkpoint epochs.

Run with: python3 -m unittest discover -s python/tests (go test ./python runs them).
"""

import json
import os
import struct
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gandiva  # noqa: E402
from gandiva import checkpoint  # noqa: E402
from test_client import Job, _open, pair, step_async  # noqa: E402


def step_until_error(client, within=30.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            client.step()
        except BaseException as e:  # noqa: BLE001 - returned to the test
            return e
        time.sleep(0.005)
    raise AssertionError("step() never failed")


class LeaseTest(unittest.TestCase):
    def tearDown(self):
        while _open:
            _open.pop().close()

    def test_lease_lapse_stops_at_boundary(self):
        c, a = pair({"GANDIVA_REPORT_EVERY": "1000"}, Job().hooks())
        hello = a.recv()
        self.assertEqual(hello["kind"], "hello")
        self.assertTrue(hello.get("leases"))
        # renewed at every boundary for a while: it runs on
        for _ in range(50):
            a.send(kind="lease", lease_s=1)
            c.step()
        a.send(kind="lease", lease_s=0.3)  # then silence: the agent is stopped
        sent = time.monotonic()
        err = step_until_error(c)
        self.assertIsInstance(err, gandiva.AgentLost)
        self.assertIn("lease", str(err))
        self.assertGreaterEqual(time.monotonic() - sent, 0.3)

    def test_lease_lapse_while_suspended(self):
        c, a = pair({}, Job().hooks())
        a.recv_kind("hello")
        a.send(kind="lease", lease_s=30)
        a.send(kind="suspend", seq=1)
        t, box = step_async(c)
        self.assertEqual(a.recv_kind("suspended")["seq"], 1)
        a.send(kind="lease", lease_s=0.2)
        t.join(30)
        self.assertFalse(t.is_alive(), "a suspended job outlived its agent's lease")
        self.assertIsInstance(box.get("err"), gandiva.AgentLost)

    def test_stale_checkpoint_stops(self):
        with tempfile.TemporaryDirectory() as d:
            newer = checkpoint.write_checkpoint(d, 7, lambda f: f.write(struct.pack("<q", 99)), "j", 1024)
            with self.assertRaises(checkpoint.StaleCheckpoint):
                checkpoint.write_checkpoint(d, 40, lambda f: f.write(b"old"), "j", 512)
            c, a = pair({"GANDIVA_CHECKPOINT_DIR": d, "GANDIVA_JOB": "j", "GANDIVA_ATTEMPT": "512"}, Job(5).hooks())
            a.recv_kind("hello")
            a.send(kind="checkpoint", seq=1, exit=True)
            t, box = step_async(c)
            self.assertEqual(a.recv_kind("error")["seq"], 1)
            t.join(30)
            self.assertIsInstance(box.get("err"), gandiva.Superseded)
            meta, _ = checkpoint.read_checkpoint(d)
            self.assertEqual((meta["attempt"], meta["file"]), (1024, newer["file"]))
            # the same and later attempts, and writers without one, still write
            for att in (1024, 2048, 0):
                checkpoint.write_checkpoint(d, 1, lambda f: f.write(b"x"), "j", att)

    def test_unreadable_epoch_on_disk(self):
        # metadata whose attempt is not a number JSON can hold (Infinity,
        # which Python's json reads) is unreadable, not a crash of the writer
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, checkpoint.META_FILE), "w") as f:
                f.write('{"format": %s, "attempt": Infinity}' % json.dumps(checkpoint.FORMAT))
            checkpoint.write_checkpoint(d, 1, lambda f: f.write(b"x"), "j", 512)
            meta, _ = checkpoint.read_checkpoint(d)
            self.assertEqual(meta["attempt"], 512)


if __name__ == "__main__":
    unittest.main()
