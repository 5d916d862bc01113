"""The spiral MLP of ``../mlp_core_api`` written with the PyTorch Trial API.

You write the model and the data; ``det_harness.pytorch.Trainer`` does the loop, validation,
checkpoints (model, optimizer, LR scheduler, RNG and data position), preemption, exact resume and,
with several slots, distributed training (one worker per slot, gradients and metrics averaged,
checkpoints written by the chief).

On a cluster the config's ``entrypoint: model_def:SpiralTrial`` runs it. Off-cluster (a terminal
or a notebook cell), ``python model_def.py`` trains it locally with ``HPARAMS`` below.

The data are generated from fixed seeds (nothing is downloaded): ``N_CLASSES`` noisy interleaved
spirals in a plane, padded with noise dimensions and rotated, with a few labels flipped.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from det_harness import InvalidHP, pytorch
from torch import nn

HPARAMS: dict[str, Any] = {  # off-cluster; on a cluster the experiment's hyperparameters
    "global_batch_size": 256,
    "hidden_size": 64,
    "n_layers": 3,
    "learning_rate": 0.005,
    "dropout": 0.3,
    "weight_decay": 1e-4,
    "lr_decay": 0.9,  # the learning rate is multiplied by this after every epoch
}

DATA_SEED = 1234
N_CLASSES, N_FEATURES = 3, 8
N_TRAIN, N_VAL = 2048, 3072
POINT_NOISE, LABEL_NOISE = 0.35, 0.05


class Spirals(torch.utils.data.TensorDataset):
    """``split`` ("train" or "validation") of the spiral problem; the same in every process."""

    def __init__(self, split: str) -> None:
        gen = torch.Generator().manual_seed(DATA_SEED)
        rotation = torch.linalg.qr(torch.randn(N_FEATURES, N_FEATURES, generator=gen))[0]
        sets = {name: self._points(n, gen) for name, n in (("train", N_TRAIN), ("validation", N_VAL))}
        x, y = sets[split]
        super().__init__(x @ rotation, y)

    @staticmethod
    def _points(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        label = torch.randint(N_CLASSES, (n,), generator=gen)
        r = 3.0 * torch.rand(n, generator=gen).sqrt()
        theta = 1.6 * r + label.float() * (2 * math.pi / N_CLASSES)
        xy = torch.stack([r * theta.cos(), r * theta.sin()], dim=1)
        xy = xy + POINT_NOISE * torch.randn(n, 2, generator=gen)
        x = torch.cat([xy / 1.5, torch.randn(n, N_FEATURES - 2, generator=gen)], dim=1)
        flipped = torch.rand(n, generator=gen) < LABEL_NOISE
        return x, torch.where(flipped, torch.randint(N_CLASSES, (n,), generator=gen), label)


class SpiralTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        hp = context.get_hparams()
        width, depth, dropout = int(hp["hidden_size"]), int(hp["n_layers"]), float(hp["dropout"])
        if width < 1 or depth < 1 or not 0.0 <= dropout < 1.0:
            raise InvalidHP(f"cannot train hidden_size={width} n_layers={depth} dropout={dropout}")
        torch.set_num_threads(1)  # trials share a small machine; more threads only slow them down
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(N_FEATURES if i == 0 else width, width), nn.ReLU(),
                       nn.Dropout(dropout)]
        self.model = context.wrap_model(nn.Sequential(*layers, nn.Linear(width, N_CLASSES)))
        self.optimizer = context.wrap_optimizer(torch.optim.AdamW(
            self.model.parameters(), lr=float(hp["learning_rate"]),
            weight_decay=float(hp["weight_decay"])))
        context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.ExponentialLR(self.optimizer, gamma=float(hp.get("lr_decay", 1.0))),
            step_mode=pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH)

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(Spirals("train"), batch_size=self.context.get_per_slot_batch_size(),
                                  shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(Spirals("validation"), batch_size=512)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = F.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "lr": self.optimizer.param_groups[0]["lr"]}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        logits = self.model(x)
        return {"validation_loss": F.cross_entropy(logits, y),
                "accuracy": (logits.argmax(dim=1) == y).float().mean()}


if __name__ == "__main__":
    # Off-cluster: 3 epochs (24 batches of 256), validating and checkpointing every epoch.
    with pytorch.init(hparams=HPARAMS, seed=0) as ctx:
        pytorch.Trainer(SpiralTrial(ctx), ctx).fit(
            max_length=pytorch.Epoch(3), validation_period=pytorch.Epoch(1),
            checkpoint_period=pytorch.Epoch(1), reporting_period=pytorch.Batch(4))
