"""Pure parts of the PyTorch Trial API: periods and lengths, config units, and the data order
(reproducible per (seed, epoch), sharded per worker, resumable by skipping)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'det-jupyter[examples]')")

from det_harness.exec.harness import fit_arguments, load_trial_class  # noqa: E402
from det_harness.pytorch import Batch, Epoch  # noqa: E402
from det_harness.pytorch._data import (  # noqa: E402
    DataLoader,
    TrainingBatches,
    batches_per_epoch,
    epoch_order,
    global_batches,
    validation_batches,
)
from det_harness.pytorch.units import (  # noqa: E402
    at_boundary,
    length_in_batches,
    searcher_unit,
    unit_from_config,
)


@pytest.mark.parametrize("unit,done,epoch_len,expected", [
    (Batch(10), 10, 8, True), (Batch(10), 15, 8, False), (Batch([3, 7]), 7, 8, True),
    (Epoch(1), 8, 8, True), (Epoch(1), 12, 8, False), (Epoch(2), 8, 8, False),
    (Epoch(2), 16, 8, True), (Epoch([3]), 24, 8, True), (None, 8, 8, False), (Batch(5), 0, 8, False),
])
def test_at_boundary(unit, done, epoch_len, expected) -> None:
    assert at_boundary(unit, done, epoch_len) is expected


def test_lengths_and_bad_units() -> None:
    assert length_in_batches(Epoch(3), 8) == 24
    assert length_in_batches(Batch(5), 8) == 5
    with pytest.raises(ValueError, match="single number"):
        length_in_batches(Batch([1, 2]), 8)
    with pytest.raises(ValueError, match=">= 1"):
        Batch(0)
    with pytest.raises(TypeError, match="int or a container"):
        Epoch(True)


@pytest.mark.parametrize("value,expected", [
    ({"batches": 40}, Batch(40)), ({"epochs": 2}, Epoch(2)), (12, Batch(12)),
    ({"records": 640}, Batch(10)), ({"batches": 0}, None), (None, None),
])
def test_unit_from_config(value, expected) -> None:
    assert unit_from_config(value, "min_validation_period", global_batch_size=64) == expected


@pytest.mark.parametrize("value,message", [
    ({"minutes": 3}, "unknown unit 'minutes'"), ({"batches": -1}, "non-negative"),
    ({"batches": 1, "epochs": 1}, "number or"), ({"records": 64}, "global_batch_size"),
])
def test_unit_from_config_errors_name_the_key(value, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        unit_from_config(value, "min_checkpoint_period")
    assert "min_checkpoint_period" in str(err.value)


def test_searcher_unit() -> None:
    assert searcher_unit({"searcher": {"max_length": {"epochs": 3}}}) == Epoch(3)
    assert searcher_unit({"searcher": {"max_time": 64, "time_metric": "batches"}}) == Batch(64)
    assert searcher_unit({"searcher": {}}) is None
    with pytest.raises(ValueError, match="time_metric"):
        searcher_unit({"searcher": {"max_time": 5, "time_metric": "accuracy"}})


def test_fit_arguments_from_config() -> None:
    cfg = {"min_validation_period": {"epochs": 1}, "min_checkpoint_period": {"batches": 0},
           "scheduling_unit": 5, "checkpoint_policy": "all", "perform_initial_validation": True}
    assert fit_arguments(cfg, {}) == {
        "validation_period": Epoch(1), "checkpoint_period": None, "reporting_period": Batch(5),
        "checkpoint_policy": "all", "step_zero_validation": True}


def test_epoch_order_is_a_function_of_seed_and_epoch() -> None:
    assert epoch_order(50, True, 3, 1) == epoch_order(50, True, 3, 1)
    assert epoch_order(50, True, 3, 1) != epoch_order(50, True, 3, 2)
    assert sorted(epoch_order(50, True, 3, 1)) == list(range(50))
    assert epoch_order(5, False, 3, 1) == [0, 1, 2, 3, 4]


def test_global_batches_shard_and_pad() -> None:
    order = list(range(10))
    assert global_batches(order, 4, 1, 0, False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert global_batches(order, 4, 1, 0, True) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    r0 = global_batches(order, 2, 2, 0, False)
    r1 = global_batches(order, 2, 2, 1, False)
    assert r0 == [[0, 1], [4, 5], [8, 9]] and r1 == [[2, 3], [6, 7], [0, 1]]  # last one padded
    assert batches_per_epoch(10, 2, 2, False) == 3
    with pytest.raises(ValueError, match="fewer than one global batch"):
        batches_per_epoch(3, 2, 2, True)


def test_training_stream_resumes_exactly_mid_epoch() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(20).float())
    loader = DataLoader(data, batch_size=3, shuffle=True)
    stream = TrainingBatches(loader, seed=11, world_size=1, rank=0)
    assert stream.epoch_len == 7

    def take(start: int, n: int) -> list[tuple[int, list[float]]]:
        out = []
        for index, (x,) in stream.iterate(start):
            out.append((index, x.tolist()))
            if len(out) == n:
                return out
        return out

    full = take(0, 20)
    assert take(9, 11) == full[9:]  # batch 9 is the 3rd batch of epoch 2
    assert [i for i, _ in full] == list(range(20))
    epoch0 = sorted(v for _, xs in full[:7] for v in xs)
    assert epoch0 == [float(i) for i in range(20)]


def test_validation_batches_split_between_workers() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(10).float())
    loader = DataLoader(data, batch_size=3)
    seen = [x.tolist() for r in (0, 1) for (x,) in validation_batches(loader, world_size=2, rank=r)]
    assert sorted(v for xs in seen for v in xs) == [float(i) for i in range(10)]


def test_dataloader_refuses_samplers() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(4).float())
    with pytest.raises(ValueError, match="sampler"):
        DataLoader(data, batch_size=2, sampler=[0, 1, 2, 3])


def test_load_trial_class(tmp_path) -> None:
    (tmp_path / "my_model_def.py").write_text("class T:\n    pass\n")
    assert load_trial_class("my_model_def:T", str(tmp_path)).__name__ == "T"
    with pytest.raises(AttributeError, match="no class 'U'"):
        load_trial_class("my_model_def:U", str(tmp_path))
    with pytest.raises(ValueError, match="MODULE:CLASS"):
        load_trial_class("python3 train.py", str(tmp_path))


def test_metrics_are_averaged_over_batches_and_workers() -> None:
    from det_harness.pytorch._trainer import batch_metrics, mean_metrics, sums_counts

    rank0 = sums_counts([{"loss": 1.0, "acc": 0.5}, {"loss": 3.0, "acc": 0.7}])
    rank1 = sums_counts([{"loss": 2.0}, {"loss": 6.0}])
    assert mean_metrics([rank0, rank1]) == {"loss": 3.0, "acc": pytest.approx(0.6)}
    assert mean_metrics([sums_counts([])]) == {}
    assert batch_metrics(torch.tensor(2.5), "train_batch") == {"loss": 2.5}
    with pytest.raises(ValueError, match="one number per metric"):
        batch_metrics({"v": torch.ones(3)}, "evaluate_batch")
    with pytest.raises(TypeError, match="must return a dict"):
        batch_metrics([1.0], "train_batch")
