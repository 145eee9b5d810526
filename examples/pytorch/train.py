#!/usr/bin/env python3
"""Train a ResNet on synthetic ImageNet-shaped data, Gandiva-aware.

The loop calls the Gandiva in-job client once per mini-batch, with the
ready-made PyTorch hooks (gandiva.pytorch): a suspension moves the model and
the optimizer state to pinned host memory and frees the GPU; a checkpoint is
a torch.save of the model, the optimizer and the random generators; a
restore loads it. The data is generated from (seed, mini-batch index), so a
job restored at mini-batch k sees exactly the batches it would have seen.

    python3 examples/pytorch/train.py --model resnet50 --batch 64 --steps 1000
    python3 examples/pytorch/train.py --model tiny --device cpu --steps 50   # no GPU

It runs on the GPU when there is one (CUDA_VISIBLE_DEVICES, set by the
agent, says which), on the CPU otherwise. The last line of its output is
"checksum=<16 hex digits> steps=<n> loss=<final loss>"; the checksum hashes
the final weights (bit-exact across interruptions on the CPU with
--deterministic; on a GPU, cuDNN's algorithm choice may differ between runs).
"""

import argparse
import hashlib
import json
import os
import sys
import time

try:
    import gandiva
except ImportError:  # run from a checkout: use the module beside it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import gandiva
from gandiva import pytorch as gandiva_pytorch

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """ResNet-50 (He et al. 2016) with layers=(3, 4, 6, 3), base=64: 25.6M
    parameters, as torchvision's resnet50."""

    def __init__(self, layers=(3, 4, 6, 3), base=64, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(base),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        blocks, cin = [], base
        for i, n in enumerate(layers):
            width = base * 2 ** i
            for j in range(n):
                blocks.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


MODELS = {
    "resnet50": dict(layers=(3, 4, 6, 3), base=64),
    "resnet101": dict(layers=(3, 4, 23, 3), base=64),
    "tiny": dict(layers=(1, 1, 1, 1), base=8),
}


def batch(args, step, device):
    """Mini-batch number `step`: a function of (seed, step) only."""
    g = torch.Generator(device=device.type)
    g.manual_seed(args.seed * 1_000_003 + step)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g, device=device)
    y = torch.randint(0, args.classes, (args.batch,), generator=g, device=device)
    return x, y


def weights_checksum(model):
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def mib(n):
    return n / (1 << 20)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--deterministic", action="store_true", help="deterministic algorithms (bit-exact on the CPU)")
    ap.add_argument("--print-every", type=int, default=0, help="0: every tenth of the run")
    ap.add_argument("--out", default="", help="write the result as JSON here")
    ap.add_argument("--no-client", action="store_true", help="run without the in-job client")
    args = ap.parse_args(argv)

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    torch.manual_seed(args.seed)
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    elif device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    t_start = time.monotonic()
    model = ResNet(classes=args.classes, **MODELS[args.model]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    params = sum(p.numel() for p in model.parameters())

    job = None
    if not args.no_client:
        hooks = gandiva_pytorch.hooks(model, opt, device=device)
        offload = hooks["offload"]

        def offload_logged():
            before = torch.cuda.memory_allocated() if device.type == "cuda" else 0
            moved = offload()
            after = torch.cuda.memory_allocated() if device.type == "cuda" else 0
            print(f"train: suspended at mini-batch {job.done}: moved {mib(moved):.1f} MiB to host memory; "
                  f"GPU memory allocated {mib(before):.1f} -> {mib(after):.1f} MiB", flush=True)
            return moved

        hooks["offload"] = offload_logged
        job = gandiva.Client(**hooks)
    start = job.done if job else 0
    print(f"train: {args.model} ({params / 1e6:.1f}M parameters) on {device}, batch {args.batch}x3x{args.image_size}^2, "
          f"starting at mini-batch {start} of {args.steps} (restored={bool(job and job.restored)}, "
          f"set-up {time.monotonic() - t_start:.2f}s)", flush=True)
    every = args.print_every or max(args.steps // 10, 1)
    loss_v = float("nan")
    step = start
    model.train()
    while step < args.steps:
        if device.type == "cuda" and step == start:
            torch.cuda.reset_peak_memory_stats()
        x, y = batch(args, step, device)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)  # no gradients held at the boundary
        del x, y
        loss_v = loss.item()  # waits for the GPU: the mini-batch is really done
        del loss
        step += 1
        if step % every == 0 or step == start + 1:
            mem = ""
            if device.type == "cuda":
                mem = (f", GPU memory at the boundary {mib(torch.cuda.memory_allocated()):.0f} MiB, "
                       f"peak within a mini-batch {mib(torch.cuda.max_memory_allocated()):.0f} MiB")
            print(f"train: mini-batch {step} loss {loss_v:.4f}{mem}", flush=True)
        if job is None:
            continue
        try:
            job.step(metric=loss_v)
        except gandiva.Stop:
            print(f"train: checkpointed at mini-batch {job.done}; exiting to be migrated", flush=True)
            return 0
    if job:
        job.close()
    s = weights_checksum(model)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"checksum": s, "steps": step, "start": start, "loss": loss_v}, f)
            f.write("\n")
    print(f"checksum={s} steps={step} loss={loss_v:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
