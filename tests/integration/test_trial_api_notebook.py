"""The Trial API off-cluster in a real IPython kernel: the notebook cell of
examples/mlp_trial_api/README.md trains the example's class, keeps its reports in the context's
history, and a second cell continues from the first's last checkpoint."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipykernel", reason="the kernel tests need ipykernel (a product dependency)")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (pip install 'det-jupyter[examples]')")

from tests.integration._kernels import running_kernel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp_trial_api"

CELL = """
from det_harness import pytorch
from model_def import HPARAMS, SpiralTrial

with pytorch.init(hparams=HPARAMS, seed=0, checkpoint_storage=CKPT) as ctx:
    pytorch.Trainer(SpiralTrial(ctx), ctx).fit(
        max_length=pytorch.Epoch(LENGTH), validation_period=pytorch.Epoch(1),
        checkpoint_period=pytorch.Epoch(1), reporting_period=pytorch.Batch(4),
        latest_checkpoint=RESUME)
history = ctx.core.train.history
val = {h["steps_completed"]: h["metrics"]["validation_loss"] for h in history
       if h["group"] == "validation"}
print("VAL", sorted(val.items()))
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}  # off-cluster
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "harness"), env.get("PYTHONPATH")]))
    with running_kernel(env, EXAMPLE, tmp_path / "jupyter") as kc:
        yield kc


def run_cell(kc: Any, code: str) -> str:
    msgs: list[dict] = []
    reply = kc.execute_interactive(code, output_hook=msgs.append, timeout=180)
    text = "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream")
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert reply["content"]["status"] == "ok" and not errors, (errors, text)
    return text


def test_trial_api_in_a_notebook_cell(kernel: Any, tmp_path: Path) -> None:
    setup = f"CKPT = {str(tmp_path / 'ckpt')!r}\nLENGTH = 2\nRESUME = None\n"
    first = run_cell(kernel, setup + CELL)
    assert "[validation] step 16" in first, first
    val = dict(eval(first.split("VAL ", 1)[1].splitlines()[0]))  # noqa: S307 (our own output)
    assert sorted(val) == [8, 16] and val[16] < 1.1
    uuid = first.rsplit("checkpoint ", 1)[1].split()[0]
    # A second cell continues from the first cell's last checkpoint, in the same kernel.
    second = run_cell(kernel, f"LENGTH = 3\nRESUME = {uuid!r}\n" + CELL)
    assert "[validation] step 24" in second and "[validation] step 8" not in second, second
