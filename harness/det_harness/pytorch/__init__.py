"""The PyTorch Trial API (Determined 0.38.1's ``determined.pytorch``). Importing it imports torch.

    from det_harness import pytorch

    class MyTrial(pytorch.PyTorchTrial):
        def __init__(self, context): ...            # wrap_model / wrap_optimizer
        def build_training_data_loader(self): ...   # pytorch.DataLoader(dataset, batch_size=…)
        def build_validation_data_loader(self): ...
        def train_batch(self, batch, epoch_idx, batch_idx): ...   # -> {"loss": …}
        def evaluate_batch(self, batch, batch_idx): ...           # -> {"validation_loss": …}

    with pytorch.init(hparams={...}) as context:             # on a cluster: no arguments
        pytorch.Trainer(MyTrial(context), context).fit(max_length=pytorch.Epoch(2))

On a cluster the entrypoint ``model_def:MyTrial`` runs the class through
``python3 -m det_harness.exec.harness`` (with ``det_harness.launch.torch_distributed`` when the
trial has several slots).
"""

from __future__ import annotations

from ._context import LRScheduler, PyTorchTrialContext
from ._data import DataLoader
from ._init import init, set_random_seeds
from ._trainer import Trainer
from ._trial import PyTorchTrial
from .units import Batch, Epoch, TrainUnit

__all__ = [
    "Batch",
    "DataLoader",
    "Epoch",
    "LRScheduler",
    "PyTorchTrial",
    "PyTorchTrialContext",
    "TrainUnit",
    "Trainer",
    "init",
    "set_random_seeds",
]
