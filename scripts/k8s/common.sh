# Settings and helpers shared by scripts/k8s/up.sh and down.sh (sourced, not run).
#
# Every setting comes from the environment, with a default that stays off the usual
# Kubernetes and Docker ports and paths, so the test bed runs beside a host Docker or
# another cluster:
#   DET_K8S_HOME               build + state (default ~/.cache/det-jupyter/k8s-1.20.2)
#   DET_K8S_API_PORT           kube-apiserver, https on 127.0.0.1 (16443)
#   DET_K8S_ETCD_PORT          etcd clients (23790), DET_K8S_ETCD_PEER_PORT (23800)
#   DET_K8S_KUBELET_PORT       kubelet API (20250), DET_K8S_KUBELET_HEALTHZ_PORT (20248)
#   DET_K8S_NODE               node name (det-node)
#   DET_K8S_DOCKER_EXEC_ROOT   the private dockerd's exec root and sockets (/tmp/det-k8s-dx)
# shellcheck shell=bash

K8S_VERSION=1.20.2
K=${DET_K8S_HOME:-$HOME/.cache/det-jupyter/k8s-$K8S_VERSION}
BIN=$K/bin
RUN=$K/run            # live state: etcd data, kubelet root, pod logs, pid files; wiped by down.sh
LOGS=$K/logs          # one log per component, truncated by every up
PKI=$K/pki            # CA, certificates, tokens: made once, kept
ETC=$K/etc            # kubeconfigs and component configuration, rewritten by every up
DOCKER_DATA=$K/docker-data   # the private dockerd's images, kept between runs
DX=${DET_K8S_DOCKER_EXEC_ROOT:-/tmp/det-k8s-dx}   # short: unix socket paths are limited
CGROUP_PARENT=det-k8s
NODE=${DET_K8S_NODE:-det-node}
API_PORT=${DET_K8S_API_PORT:-16443}
ETCD_PORT=${DET_K8S_ETCD_PORT:-23790}
ETCD_PEER_PORT=${DET_K8S_ETCD_PEER_PORT:-23800}
KUBELET_PORT=${DET_K8S_KUBELET_PORT:-20250}
KUBELET_HEALTHZ_PORT=${DET_K8S_KUBELET_HEALTHZ_PORT:-20248}
KUBECONFIG_ADMIN=$K/kubeconfig
# Start order; down.sh stops them in reverse.
COMPONENTS=(etcd dockerd kube-apiserver kube-controller-manager kube-scheduler kubelet)

export DOCKER_HOST=unix://$DX/docker.sock
# Nothing we start may probe a cloud metadata service (the AWS SDK honours this; the kubelet's
# cloud code is also removed at build time by patch_kubelet.py).
export AWS_EC2_METADATA_DISABLED=true

pid_of() { cat "$RUN/pids/$1" 2>/dev/null; }
running() { local pid; pid=$(pid_of "$1") && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

# Mount points at or below $1, deepest first.
mounts_under() {
  awk -v d="$1" '{ p = $5; gsub(/\\040/, " ", p); if (p == d || index(p, d "/") == 1) print p }' \
    /proc/self/mountinfo | sort -ru
}
