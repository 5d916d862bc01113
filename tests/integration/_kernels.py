"""A real IPython kernel of this interpreter, for kernel-level tests."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def kernelspec_root(root: Path) -> Path:
    """A Jupyter data dir whose ``python3`` kernel is this interpreter (whatever other
    kernelspecs the machine has), for ``JUPYTER_PATH`` or a ``KernelSpecManager``."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "det-jupyter test", "language": "python"}))
    return root


@contextlib.contextmanager
def running_kernel(env: dict[str, str], cwd: Path, spec_dir: Path) -> Iterator[Any]:
    """A started kernel's blocking client (the kernel runs in ``cwd`` with ``env``); shut down
    on exit."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    specs = KernelSpecManager(kernel_dirs=[str(kernelspec_root(spec_dir) / "kernels")])
    km = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
