"""Ready-made client hooks for a PyTorch model and optimizer.

``hooks(model, optimizer, extra)`` returns the keyword arguments for
``gandiva.Client``: ``save``/``load`` write and read a ``torch.save`` of the
model, the optimizer, the random generators and ``extra`` (an object with
``state_dict()`` and ``load_state_dict()``, e.g. your data position), and
``offload``/``reload`` move the model's tensors and the optimizer's state to
pinned host memory and back, freeing the GPU during a suspension without
serialising anything. torch is imported only when a hook runs.
"""


def hooks(model, optimizer=None, extra=None, device=None):
    import torch

    if device is None:
        device = next(model.parameters()).device

    def _tensors():
        for p in model.parameters():
            yield p
        for b in model.buffers():
            yield b

    def _opt_state():
        if optimizer is None:
            return
        for st in optimizer.state.values():
            for k, v in st.items():
                if torch.is_tensor(v):
                    yield st, k, v

    def _state():
        s = {"model": model.state_dict(), "torch_rng": torch.get_rng_state()}
        if optimizer is not None:
            s["optimizer"] = optimizer.state_dict()
        if extra is not None:
            s["extra"] = extra.state_dict()
        if torch.cuda.is_available():
            s["cuda_rng"] = torch.cuda.get_rng_state_all()
        return s

    def save(f):
        torch.save(_state(), f)

    def load(f):
        s = torch.load(f, map_location=device, weights_only=False)
        model.load_state_dict(s["model"])
        if optimizer is not None and "optimizer" in s:
            optimizer.load_state_dict(s["optimizer"])
        if extra is not None and "extra" in s:
            extra.load_state_dict(s["extra"])
        torch.set_rng_state(s["torch_rng"].cpu())
        if "cuda_rng" in s and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([t.cpu() for t in s["cuda_rng"]])

    homes = {}  # where each moved tensor lived, to put it back there

    def _move(to_host):
        moved = 0
        pin = to_host and torch.cuda.is_available()

        def mv(key, t):
            nonlocal moved
            moved += t.numel() * t.element_size()
            if to_host:
                homes[key] = t.device
                h = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin)
                h.copy_(t, non_blocking=pin)
                return h
            return t.to(homes.get(key, device), non_blocking=True)

        for i, t in enumerate(_tensors()):
            t.data = mv(("t", i), t.data)
            if t.grad is not None:
                t.grad = mv(("g", i), t.grad)
        for st, k, v in list(_opt_state()):
            st[k] = mv(("o", id(st), k), v)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            if to_host:
                torch.cuda.empty_cache()
        return moved

    def offload():
        return _move(True)

    def reload():
        _move(False)

    return {"save": save, "load": load, "offload": offload, "reload": reload}
