#!/usr/bin/env python3
"""Gandiva's deterministic example job, in Python (standard library only).

The same arithmetic as the Go trainer (examples/trainer): for the same
-seed, -dim and -steps it prints the same checksum, whether it runs
uninterrupted or is suspended, resumed, checkpointed and restored elsewhere
any number of times. It uses the Python in-job client (python/gandiva); with
--no-client it runs without it, to show the fall-backs (SIGSTOP, restart).

    python3 examples/python/trainer.py --steps 200 --step-time 20ms --dim 1024 --seed 1 [--startup 10s] [--first-batch 5s]

--startup sleeps when the process starts, before the client is even imported
(a framework's import and device initialisation); --first-batch lengthens the
first mini-batch of every process (a framework's autotuning).

The last line of its output is "checksum=<16 hex digits> steps=<n>"; --out
also writes the result as JSON; --ledger works as the Go trainer's (spawn,
start, ready, t100, busy and done lines). Exit
status: 0 when done or stopped as asked, 3 for an injected failure
(--fail-at), 4 for an overlap (--ledger), 1 otherwise.
"""

import argparse
import fcntl
import json
import os
import struct
import sys
import time

gandiva = None  # imported after --startup, as a framework that takes its time would be


def import_client():
    global gandiva
    try:
        import gandiva as g
    except ImportError:  # run from a checkout: use the module beside it
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import gandiva as g
    gandiva = g

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MAGIC = 0x67616E6469766131  # "gandiva1"


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class Model:
    """Weights and a random generator (the data order); see the Go trainer."""

    def __init__(self, seed, dim):
        self.rng = seed & M64
        self.w = [mix64((seed + i * GOLDEN) & M64) for i in range(dim)]

    def step(self, k):
        self.rng = (self.rng + GOLDEN) & M64
        r = mix64(self.rng) ^ k
        self.w = [mix64(x ^ ((r + i) & M64)) for i, x in enumerate(self.w)]

    def loss(self):
        return (self.w[0] >> 11) / float(1 << 53)

    def checksum(self):
        h = 0
        for x in self.w:
            h = mix64(h ^ x)
        return h

    def save(self, f, step):
        if self.w is None:
            raise RuntimeError("model state was released")
        f.write(struct.pack("<4Q", MAGIC, step, self.rng, len(self.w)))
        f.write(struct.pack("<%dQ" % len(self.w), *self.w))

    def load(self, f):
        hdr = f.read(32)
        if len(hdr) != 32:
            raise ValueError("short header")
        magic, step, rng, n = struct.unpack("<4Q", hdr)
        if magic != MAGIC:
            raise ValueError("not a trainer state")
        body = f.read(8 * n)
        if len(body) != 8 * n:
            raise ValueError("short weights")
        self.w = list(struct.unpack("<%dQ" % n, body))
        self.rng = rng
        return step


class Stretches:
    """The stretches of mini-batches run without being stopped at a boundary,
    as "busy FROM TO" ledger lines (Unix seconds): a client step that takes
    longer than gap (a suspension) ends one."""

    def __init__(self, ledger, gap):
        self.ledger, self.gap = ledger, gap
        self.start = self.end = 0.0
        self.open = False

    def begin(self):
        if not self.open:
            self.start, self.open = time.time(), True

    def step(self, f):
        t0 = time.time()
        try:
            f()
        except BaseException:
            self.end = t0
            self.flush()
            raise
        if time.time() - t0 > self.gap:
            self.end = t0
            self.flush()

    def close(self):
        if self.open:
            self.end = time.time()
            self.flush()

    def flush(self):
        if self.open and self.ledger:
            append_line(self.ledger, "busy %.6f %.6f" % (self.start, self.end))
        self.open = False


def duration(s):
    """'20ms', '1.5s' or a number of seconds."""
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * scale
    return float(s)


def count_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def append_line(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", "-steps", type=int, default=200)
    ap.add_argument("--step-time", "-step-time", type=duration, default=0.02, help="time one mini-batch takes (slept)")
    ap.add_argument("--dim", "-dim", type=int, default=1024, help="weights (8 bytes each)")
    ap.add_argument("--seed", "-seed", type=int, default=1)
    ap.add_argument("--out", "-out", default="")
    ap.add_argument("--no-client", "-no-client", action="store_true")
    ap.add_argument("--fail-at", "-fail-at", type=int, default=-1)
    ap.add_argument("--fail-times", "-fail-times", type=int, default=0,
                    help="inject --fail-at only N times in all (counted in GANDIVA_CHECKPOINT_DIR/trainer-injected-failures)")
    ap.add_argument("--ledger", "-ledger", default="", help="exactly-once ledger file (as the Go trainer's -ledger)")
    ap.add_argument("--raise-at", "-raise-at", type=int, default=-1, help="raise an exception just before mini-batch K")
    ap.add_argument("--startup", "-startup", type=duration, default=0.0,
                    help="sleep this long when the process starts, before importing the client")
    ap.add_argument("--first-batch", "-first-batch", type=duration, default=0.0,
                    help="add this to the first mini-batch of every process")
    args = ap.parse_args(argv)
    if args.steps < 0 or args.dim <= 0 or args.step_time < 0 or args.startup < 0 or args.first_batch < 0:
        print("trainer: --steps, --dim, --step-time, --startup and --first-batch must not be negative", file=sys.stderr)
        return 2
    job, attempt = os.environ.get("GANDIVA_JOB", ""), os.environ.get("GANDIVA_ATTEMPT", "")
    fail_count = os.path.join(os.environ.get("GANDIVA_CHECKPOINT_DIR", ""), "trainer-injected-failures")
    failing = args.fail_at >= 0 and (args.fail_times == 0 or count_lines(fail_count) < args.fail_times)
    ledger_lock = None
    if args.ledger:
        ledger_lock = open(args.ledger + ".lock", "a")
        try:
            fcntl.flock(ledger_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            append_line(args.ledger, f"overlap {os.getpid()}")
            print(f"trainer: another copy of this job holds {args.ledger}.lock: {e}", file=sys.stderr)
            return 4
        append_line(args.ledger, "spawn %s %.6f" % (attempt, time.time()))
    time.sleep(args.startup)
    import_client()
    every = max(args.steps // 10, 1)

    model = Model(args.seed, args.dim)
    loaded = [-1]
    client = None

    if not args.no_client:
        def load(f):
            loaded[0] = model.load(f)

        def release():
            model.w = None  # as a GPU job frees device memory

        client = gandiva.Client(save=lambda f: model.save(f, client.done), load=load, release=release)
        if loaded[0] >= 0 and loaded[0] != client.done:
            print(f"trainer: restored state of step {loaded[0]}, checkpoint says {client.done}", file=sys.stderr)
            return 1
        loaded[0] = -1
    done = client.done if client else 0
    start = done
    if args.ledger:
        append_line(args.ledger, f"start {attempt} {start}")
    if client and client.restored:
        print(f"trainer: restored from mini-batch {start}", flush=True)
    print(f"trainer: job={job!r} attempt={attempt!r} starting at mini-batch {done} of {args.steps} "
          f"(restored={bool(client and client.restored)}, client={client is not None})", flush=True)
    busy = Stretches(args.ledger, 2 * args.step_time + 0.01)
    first = True
    while done < args.steps:
        if failing and done == args.fail_at:
            if args.fail_times > 0:
                append_line(fail_count, attempt)
            print(f"trainer: injected failure before mini-batch {done}", file=sys.stderr)
            return 3
        if done == args.raise_at:
            raise ValueError(f"injected exception before mini-batch {done}")
        if not first:
            busy.begin()
        model.step(done)
        time.sleep(args.step_time)
        if first:
            time.sleep(args.first_batch)
            first = False
            if args.ledger:
                append_line(args.ledger, "ready %.6f" % time.time())
        done += 1
        if done == 100 and args.ledger:
            append_line(args.ledger, "t100 %.6f" % time.time())
        if done % every == 0:
            print(f"trainer: mini-batch {done} loss {model.loss():.6f}", flush=True)
        if client is None:
            continue
        try:
            busy.step(lambda: client.step(metric=model.loss()))
        except gandiva.Stop:
            print(f"trainer: stopping at mini-batch {client.done} as asked (checkpointed to be migrated, or a pre-run)",
                  flush=True)
            return 0
        except gandiva.Terminated:
            print(f"trainer: SIGTERM: checkpointed at mini-batch {client.done}, exiting with status 143", flush=True)
            return 143
        if loaded[0] >= 0 and loaded[0] != client.done:
            print(f"trainer: resumed with the state of step {loaded[0]} at step {client.done}", file=sys.stderr)
            return 1
        loaded[0] = -1
    busy.close()
    if client:
        client.close()
    s = "%016x" % model.checksum()
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            json.dump({"checksum": s, "steps": done, "start": start, "restored": bool(client and client.restored),
                       "job": job, "attempt": attempt}, f)
            f.write("\n")
        os.replace(args.out + ".tmp", args.out)
    if args.ledger:
        append_line(args.ledger, "done " + s)
    print(f"checksum={s} steps={done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
