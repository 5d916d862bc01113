"""``python -m det_harness.launch.torch_distributed [TORCH_OVERRIDES... --] CMD ARGS...``

Starts one worker per slot of this container through torch's own launcher
(``python -m torch.distributed.run``, i.e. torchrun), on one container or across all of the
trial's containers: ``--nnodes`` = number of containers, ``--node_rank`` = this container's
rank, ``--nproc_per_node`` = its slot count, ``--master_addr`` = the chief container's address,
``--master_port`` = ``DET_RENDEZVOUS_PORT``, static rendezvous, no restarts. TORCH_OVERRIDES are
passed to torchrun after these, so they win. Each worker runs CMD under
``det_harness.launch.wrap_rank``, so its output lines start with ``[rank=N] ``; workers get
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``GROUP_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from torchrun, plus
``DET_COLLECTIVE_PORT``, ``DET_CHIEF_IP`` and ``USE_TORCH_DISTRIBUTED=True`` from here.

One container with one slot: CMD is exec'd directly, with the same variables for a world of 1
(no rank prefix on its output). The launcher exits with the exit code of the worker that failed
first (or torchrun's own when no worker failed), and passes SIGTERM/SIGINT/SIGHUP/SIGQUIT on to
torchrun, which stops the workers. Only this container's workers are stopped when one fails;
the master ends the trial's other containers.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from ._proc import (
    STATUS_DIR_ENV,
    die_with_parent,
    exit_code,
    first_failure,
    forward_signals,
    free_port,
)
from ._topology import (
    launcher_env,
    single_worker_env,
    split_args,
    topology_from_env,
    torchrun_argv,
)

_USAGE = ("usage: python -m det_harness.launch.torch_distributed "
          "[TORCH_OVERRIDES... --] CMD ARGS...")


def _fail(message: str, code: int = 2) -> int:
    print(f"det_harness.launch.torch_distributed: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Launch the workers of this container; return the exit code to exit with."""
    overrides, cmd = split_args(sys.argv[1:] if argv is None else argv)
    if not cmd:
        print(_USAGE, file=sys.stderr)
        return 2
    try:
        topo = topology_from_env(os.environ)
    except ValueError as exc:
        return _fail(str(exc))
    # Ports: the master's choice; a one-container trial may run without (e.g. off-cluster).
    master_port = topo.rendezvous_port or free_port()
    collective_port = topo.collective_port or (
        free_port() if topo.nnodes == 1 else master_port + 1)

    if topo.nnodes == 1 and topo.nproc == 1 and not overrides:
        os.environ.update(single_worker_env(topo, master_port, collective_port))
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execvp(cmd[0], list(cmd))
        except OSError as exc:
            return _fail(f"cannot run {cmd[0]!r}: {exc}", 127)

    if importlib.util.find_spec("torch") is None:
        return _fail(f"torch is not installed for {sys.executable}; the torch_distributed "
                     "launcher runs torch.distributed.run", 1)
    with tempfile.TemporaryDirectory(prefix="det-launch-") as status_dir:
        env = {**os.environ, **launcher_env(topo, master_port, collective_port),
               STATUS_DIR_ENV: status_dir}
        args = torchrun_argv(topo, sys.executable, overrides, cmd, master_port)
        # torchrun stops its workers on SIGTERM; it gets one if this launcher is killed.
        proc = subprocess.Popen(args, env=env,
                                preexec_fn=lambda: die_with_parent(signal.SIGTERM))
        with forward_signals(proc):
            code = exit_code(proc.wait())
        if code == 0:
            return 0
        failed = first_failure(status_dir)
        return failed if failed is not None else code


if __name__ == "__main__":
    sys.exit(main())
