"""Data loading that resumes exactly and shards across workers.

``DataLoader`` takes ``torch.utils.data.DataLoader``'s arguments; the trainer turns it into one
torch loader per epoch whose batch order is a pure function of (trial seed, epoch). So a run
resumed at batch ``b`` sees exactly the batches an uninterrupted run would have seen, with no
iterator state in the checkpoint, and in a distributed job each global batch is split between
the workers (rank ``r`` takes the ``r``-th slice of every global batch).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils.data

logger = logging.getLogger("det_harness")

_UNSUPPORTED = ("sampler", "batch_sampler")


class DataLoader:
    """Determined's ``pytorch.DataLoader``: a description of a torch ``DataLoader``.

    ``batch_size`` is the per-worker batch size (``context.get_per_slot_batch_size()``).
    ``sampler`` and ``batch_sampler`` are not supported (the order must be reproducible); return
    a plain ``torch.utils.data.DataLoader`` instead if you need them, and give up exact resume.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, **torch_kwargs: Any) -> None:
        bad = [k for k in _UNSUPPORTED if torch_kwargs.get(k) is not None]
        if bad:
            raise ValueError(
                f"det_harness.pytorch.DataLoader does not take {', '.join(bad)}: its order must be "
                "reproducible for exact resume; return a torch.utils.data.DataLoader instead")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DataLoader batch_size must be an int >= 1, got {batch_size!r}")
        torch_kwargs.pop("generator", None)  # the trainer seeds each epoch itself
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.torch_kwargs = torch_kwargs

    def __len__(self) -> int:
        """Batches per epoch for a single worker."""
        return batches_per_epoch(len(self.dataset), self.batch_size, 1, self.drop_last)

    def get_data_loader(self, *, seed: int = 0, epoch: int = 0) -> torch.utils.data.DataLoader:
        """One epoch as a plain torch loader (single worker), e.g. for use outside the trainer."""
        order = epoch_order(len(self.dataset), self.shuffle, seed, epoch)
        return self._torch_loader(global_batches(order, self.batch_size, 1, 0, self.drop_last),
                                  seed, epoch)

    def _torch_loader(self, batches: list[list[int]], seed: int, epoch: int
                      ) -> torch.utils.data.DataLoader:
        # A generator of our own: the loader's base seed (worker seeds) must not consume, or
        # depend on, the global RNG, which the checkpoint restores.
        gen = torch.Generator().manual_seed(_epoch_seed(seed, epoch))
        return torch.utils.data.DataLoader(self.dataset, batch_sampler=batches, generator=gen,
                                           **self.torch_kwargs)


def _epoch_seed(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + int(epoch)) % (2**63)


def batches_per_epoch(n_items: int, batch_size: int, world_size: int, drop_last: bool) -> int:
    """Global batches in one epoch of ``n_items`` with ``batch_size`` per worker."""
    global_size = batch_size * world_size
    count = n_items // global_size if drop_last else math.ceil(n_items / global_size)
    if count < 1:
        raise ValueError(f"the data set has {n_items} items, fewer than one global batch of "
                         f"{global_size} ({batch_size} per worker x {world_size} workers); use a "
                         "smaller batch size or drop_last=False")
    return count


def epoch_order(n_items: int, shuffle: bool, seed: int, epoch: int) -> list[int]:
    """The item order of one epoch: a permutation seeded by (seed, epoch), or 0..n-1."""
    if not shuffle:
        return list(range(n_items))
    gen = torch.Generator().manual_seed(_epoch_seed(seed, epoch))
    return torch.randperm(n_items, generator=gen).tolist()


def global_batches(order: list[int], batch_size: int, world_size: int, rank: int,
                   drop_last: bool) -> list[list[int]]:
    """Rank ``rank``'s slice of each global batch of ``order``.

    A short last global batch is kept (unless ``drop_last``); with several workers it is padded
    from the start of the epoch so every worker gets a batch of the same size and no worker
    waits in a collective for a batch that never comes."""
    global_size = batch_size * world_size
    n_batches = batches_per_epoch(len(order), batch_size, world_size, drop_last)
    out = []
    for b in range(n_batches):
        chunk = order[b * global_size:(b + 1) * global_size]
        if world_size > 1 and len(chunk) < global_size:
            chunk = chunk + [order[i % len(order)] for i in range(global_size - len(chunk))]
        per = math.ceil(len(chunk) / world_size)
        out.append(chunk[rank * per:(rank + 1) * per])
    return out


class TrainingBatches:
    """The training stream from global batch ``start`` on, epoch after epoch: yields
    ``(batch_index, batch)``. Works for our ``DataLoader`` (exact, sharded) and for a plain torch
    loader (skips by iterating; not sharded, and exact only if the loader's order is)."""

    def __init__(self, loader: Any, *, seed: int, world_size: int, rank: int) -> None:
        self.loader = loader
        self.seed = seed
        self.world_size = world_size
        self.rank = rank
        if isinstance(loader, DataLoader):
            self.epoch_len = batches_per_epoch(len(loader.dataset), loader.batch_size,
                                               world_size, loader.drop_last)
        elif isinstance(loader, torch.utils.data.DataLoader):
            self.epoch_len = len(loader)
            logger.warning(
                "det_harness: build_training_data_loader returned a torch DataLoader: it is not "
                "sharded across workers and a resumed run replays its order only if that order "
                "is deterministic; return det_harness.pytorch.DataLoader for exact resume")
        else:
            raise TypeError("build_training_data_loader must return det_harness.pytorch.DataLoader "
                            f"or a torch.utils.data.DataLoader, not {type(loader).__name__}")
        if self.epoch_len < 1:
            raise ValueError("the training data loader yields no batches")

    def iterate(self, start: int) -> Iterator[tuple[int, Any]]:
        """Batches ``start``, ``start + 1``, … forever."""
        epoch, skip = divmod(start, self.epoch_len)
        while True:
            index = epoch * self.epoch_len + skip
            for batch in self._epoch(epoch, skip):
                yield index, batch
                index += 1
            epoch, skip = epoch + 1, 0

    def _epoch(self, epoch: int, skip: int) -> Iterator[Any]:
        if isinstance(self.loader, DataLoader):
            order = epoch_order(len(self.loader.dataset), self.loader.shuffle, self.seed, epoch)
            batches = global_batches(order, self.loader.batch_size, self.world_size, self.rank,
                                     self.loader.drop_last)
            yield from self.loader._torch_loader(batches[skip:], self.seed, epoch)
            return
        for i, batch in enumerate(self.loader):
            if i >= skip:
                yield batch


def validation_batches(loader: Any, *, world_size: int, rank: int) -> Iterator[Any]:
    """This worker's share of the validation set: every ``world_size``-th batch from ``rank``
    (no padding, so each example is counted once; metrics are weighted by batch counts)."""
    if isinstance(loader, DataLoader):
        order = epoch_order(len(loader.dataset), loader.shuffle, 0, 0)
        batches = global_batches(order, loader.batch_size, 1, 0, loader.drop_last)
        yield from loader._torch_loader(batches[rank::world_size], 0, 0)
        return
    if not isinstance(loader, torch.utils.data.DataLoader):
        raise TypeError("build_validation_data_loader must return det_harness.pytorch.DataLoader "
                        f"or a torch.utils.data.DataLoader, not {type(loader).__name__}")
    for i, batch in enumerate(loader):
        if i % world_size == rank:
            yield batch


def full_validation_loader(loader: Any) -> Any:
    """The whole validation set as one torch loader (for ``evaluate_full_dataset``)."""
    if isinstance(loader, DataLoader):
        return loader.get_data_loader()
    return loader
