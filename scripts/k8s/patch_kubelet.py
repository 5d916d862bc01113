#!/usr/bin/env python3
"""Source edits that let the Kubernetes 1.20.2 kubelet run as a loopback-only test node.

Usage: ``python3 patch_kubelet.py SRC`` where SRC is the root of the unpacked
``kubernetes-1.20.2`` source tree.

The host we test on gives root no CAP_SYS_RESOURCE and must keep its sysctls,
iptables and network untouched; the kubelet must also never reach a cloud
metadata address. Each edit below says which of those it serves.

Idempotent by construction: the first run keeps a pristine copy of every file it
edits under ``SRC/_det_pristine/``; every run rebuilds the edited files from
those copies, so changing an edit here and re-running gives exactly the new
result (and an unchanged file is not rewritten, which keeps make's work small).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

PRISTINE = "_det_pristine"


@dataclass(frozen=True)
class Edit:
    """Replace ``before`` (which must occur exactly once) by ``after`` in ``path``."""

    path: str
    before: str
    after: str


# Go files this script adds; they carry the helpers the edits call.
NEW_FILES: dict[str, str] = {
    "pkg/kubelet/dockershim/det_testbed.go": """\
package dockershim

// detNonNegativeOOMScoreAdj keeps oom_score_adj at 0 or above: lowering it needs
// CAP_SYS_RESOURCE, and without it runc fails every sandbox ("can't get final
// child's PID from pipe: EOF"). Added by det-jupyter's scripts/k8s/patch_kubelet.py.
func detNonNegativeOOMScoreAdj(v int) int {
	if v < 0 {
		return 0
	}
	return v
}
""",
    "pkg/kubelet/kuberuntime/det_testbed.go": """\
package kuberuntime

import "os"

// Log directories, movable by environment so a test node writes nothing under
// /var/log. Added by det-jupyter's scripts/k8s/patch_kubelet.py.
var (
	podLogsRootDirectory   = detDirFromEnv("KUBELET_POD_LOGS_DIR", "/var/log/pods")
	legacyContainerLogsDir = detDirFromEnv("KUBELET_CONTAINER_LOGS_DIR", "/var/log/containers")
)

func detDirFromEnv(name, fallback string) string {
	if dir := os.Getenv(name); dir != "" {
		return dir
	}
	return fallback
}
""",
    "pkg/kubelet/det_testbed.go": """\
package kubelet

import "os"

// ContainerLogsDir is the location of container log symlinks; the environment
// variable KUBELET_CONTAINER_LOGS_DIR moves it (det-jupyter's test node keeps it
// under its own directory). Added by det-jupyter's scripts/k8s/patch_kubelet.py.
var ContainerLogsDir = func() string {
	if dir := os.Getenv("KUBELET_CONTAINER_LOGS_DIR"); dir != "" {
		return dir
	}
	return "/var/log/containers"
}()
""",
    "pkg/kubelet/dockershim/network/det_testbed.go": """\
package network

// detTouchHostNetfilter is false: the no-op network plugin leaves the host's
// br_netfilter module and net.bridge sysctls alone. Added by det-jupyter's
// scripts/k8s/patch_kubelet.py.
const detTouchHostNetfilter = false
""",
}

EDITS: tuple[Edit, ...] = (
    # No CAP_SYS_RESOURCE: sandboxes and Guaranteed containers ask for -998.
    Edit(
        "pkg/kubelet/dockershim/docker_sandbox.go",
        "\thc.OomScoreAdj = defaultSandboxOOMAdj\n",
        "\thc.OomScoreAdj = detNonNegativeOOMScoreAdj(defaultSandboxOOMAdj)\n",
    ),
    Edit(
        "pkg/kubelet/dockershim/helpers_linux.go",
        "createConfig.HostConfig.OomScoreAdj = int(rOpts.OomScoreAdj)\n",
        "createConfig.HostConfig.OomScoreAdj = detNonNegativeOOMScoreAdj(int(rOpts.OomScoreAdj))\n",
    ),
    # Host sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops): warn, never write.
    Edit(
        "pkg/kubelet/cm/container_manager_linux.go",
        "\tb := KernelTunableModify\n",
        "\tb := KernelTunableWarn // det-jupyter test node: never write host sysctls\n",
    ),
    # The node's InternalIP is 127.0.0.1, so apiserver->kubelet (logs, exec) stays on loopback.
    Edit(
        "pkg/kubelet/kubelet_node_status.go",
        '\tif nodeIP.IsLoopback() {\n\t\treturn fmt.Errorf("nodeIP can\'t be loopback address")\n\t}\n',
        "\t// det-jupyter test node: a loopback node IP is allowed\n",
    ),
    # Log directories become variables (det_testbed.go files above); drop the constants.
    Edit(
        "pkg/kubelet/kubelet.go",
        '\t// ContainerLogsDir is the location of container logs.\n'
        '\tContainerLogsDir = "/var/log/containers"\n',
        "\t// ContainerLogsDir: a variable in det_testbed.go (det-jupyter test node)\n",
    ),
    Edit(
        "pkg/kubelet/kuberuntime/kuberuntime_manager.go",
        '\t// The root directory for pod logs\n\tpodLogsRootDirectory = "/var/log/pods"\n',
        "\t// podLogsRootDirectory: a variable in det_testbed.go (det-jupyter test node)\n",
    ),
    Edit(
        "pkg/kubelet/kuberuntime/legacy.go",
        "\t// legacyContainerLogsDir is the legacy location of container logs. It is the same with\n"
        "\t// kubelet.containerLogsDir.\n"
        '\tlegacyContainerLogsDir = "/var/log/containers"\n',
        "\t// legacyContainerLogsDir: a variable in det_testbed.go (det-jupyter test node)\n",
    ),
    # The no-op network plugin would modprobe br-netfilter and set net.bridge sysctls.
    Edit(
        "pkg/kubelet/dockershim/network/plugins.go",
        '\tutilexec.New().Command("modprobe", "br-netfilter").CombinedOutput()\n',
        "\tif !detTouchHostNetfilter {\n\t\treturn nil\n\t}\n"
        '\tutilexec.New().Command("modprobe", "br-netfilter").CombinedOutput()\n',
    ),
    # Never reach a cloud metadata address: the in-tree credential providers probe it at start
    # (the AWS one walks the SDK credential chain up to 169.254.169.254), and so does
    # cAdvisor's cloud detection. Unlinking them removes the code paths altogether.
    Edit(
        "cmd/kubelet/app/plugins.go",
        '\t_ "k8s.io/kubernetes/pkg/credentialprovider/aws"\n'
        '\t_ "k8s.io/kubernetes/pkg/credentialprovider/azure"\n'
        '\t_ "k8s.io/kubernetes/pkg/credentialprovider/gcp"\n',
        "\t// (cloud credential providers unlinked: det-jupyter test node)\n",
    ),
    # The GCP and Azure providers are linked a second time for their flags; the GCP one goes to
    # metadata.google.internal on any machine whose DMI product name says Google.
    Edit(
        "cmd/kubelet/app/options/globalflags.go",
        '\t_ "k8s.io/kubernetes/pkg/credentialprovider/azure"\n'
        '\t_ "k8s.io/kubernetes/pkg/credentialprovider/gcp"\n',
        "\t// (cloud credential providers unlinked: det-jupyter test node)\n",
    ),
    Edit(  # ... so --azure-container-registry-config no longer exists to be re-registered
        "cmd/kubelet/app/options/globalflags_providers.go",
        '\tpflagRegister(global, local, "azure-container-registry-config")\n',
        "\t// (no --azure-container-registry-config: det-jupyter test node)\n",
    ),
    Edit(
        "pkg/kubelet/cadvisor/cadvisor_linux.go",
        '\t_ "github.com/google/cadvisor/utils/cloudinfo/aws"\n'
        '\t_ "github.com/google/cadvisor/utils/cloudinfo/azure"\n'
        '\t_ "github.com/google/cadvisor/utils/cloudinfo/gce"\n',
        "\t// (cloud detection unlinked: det-jupyter test node)\n",
    ),
)


def patched_text(original: str, edits: list[Edit]) -> str:
    """Apply ``edits`` to ``original``; each ``before`` must occur exactly once."""
    text = original
    for edit in edits:
        count = text.count(edit.before)
        if count != 1:
            raise ValueError(f"{edit.path}: expected the text once, found it {count} times: {edit.before!r}")
        text = text.replace(edit.before, edit.after)
    return text


def apply(src: Path) -> list[str]:
    """Bring the tree at ``src`` to pristine + EDITS + NEW_FILES; return the paths rewritten."""
    by_path: dict[str, list[Edit]] = {}
    for edit in EDITS:
        by_path.setdefault(edit.path, []).append(edit)
    changed: list[str] = []
    for rel, edits in by_path.items():
        target, pristine = src / rel, src / PRISTINE / rel
        if not pristine.exists():
            pristine.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, pristine)
        want = patched_text(pristine.read_text(), edits)
        if target.read_text() != want:
            target.write_text(want)
            changed.append(rel)
    for rel, body in NEW_FILES.items():
        target = src / rel
        if not target.exists() or target.read_text() != body:
            target.write_text(body)
            changed.append(rel)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[1])
    if not (src / "cmd/kubelet").is_dir():
        print(f"patch_kubelet.py: {src} is not a kubernetes source tree", file=sys.stderr)
        return 2
    try:
        changed = apply(src)
    except ValueError as err:
        print(f"patch_kubelet.py: {err}", file=sys.stderr)
        return 1
    print("patch_kubelet.py: " + (f"rewrote {', '.join(changed)}" if changed else "already applied"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
