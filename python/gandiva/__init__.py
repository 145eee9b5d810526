"""Gandiva's in-job client for Python (standard library only).

Make a training loop Gandiva-aware by calling ``step()`` once per mini-batch::

    import gandiva

    model, opt = build()                      # build first: the client may restore now
    job = gandiva.Client(save=save, load=load, release=release)
    for i in range(job.done, total_steps):    # job.done: mini-batches already done
        loss = train_one_minibatch(i)
        job.step(metric=loss)                 # may suspend, resume or stop here
    job.close()

For PyTorch, ``gandiva.pytorch.hooks(model, optimizer)`` returns ready-made
hooks; for the ranks of a torch.distributed job, ``gandiva.distributed``
has a gang-aware Client (every rank stops at the same mini-batch, one
checkpoint per gang). See docs/CLIENT.md.
"""

from .checkpoint import META_FILE, NoCheckpoint, StaleCheckpoint, read_checkpoint, write_checkpoint
from .client import AgentLost, Client, Stop, Superseded, Terminated
from . import distributed
from .distributed import GangFailed

__all__ = ["Client", "Stop", "Terminated", "AgentLost", "Superseded", "write_checkpoint", "read_checkpoint",
           "NoCheckpoint", "StaleCheckpoint", "META_FILE", "distributed", "GangFailed"]
