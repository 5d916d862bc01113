"""Launchers that start a trial's worker processes inside its containers.

- ``python -m det_harness.launch.torch_distributed [TORCH_OVERRIDES... --] CMD ARGS...``: one
  worker per slot through ``torch.distributed.run`` (torchrun), across all the trial's containers.
- ``python -m det_harness.launch.wrap_rank RANK [--] CMD ARGS...``: run CMD, prefixing each of
  its output lines with ``[rank=N] `` (the agent turns the prefix into the log line's rank).

Nothing here imports torch: the launcher runs torchrun as a child process.
"""
