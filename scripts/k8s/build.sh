#!/usr/bin/env bash
# Build the single-node Kubernetes test bed that scripts/k8s/up.sh starts: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet (patched by patch_kubelet.py) and kubectl
# from Debian's kubernetes source package, plus the root filesystems of three local images.
#
# Everything lands in one cache directory outside the clone, keyed by the Kubernetes version:
#   DET_K8S_HOME (default ~/.cache/det-jupyter/k8s-1.20.2)
# Idempotent: a finished build leaves a stamp (a hash of this script and the patch script);
# a run that finds a matching stamp returns at once. Cold: ~8.5 min on 2 cores (the Go build);
# after an edit to either script, ~1 min (make reuses its Go cache).
# Needs root (apt-get); /etc/apt is never modified (the source package is fetched with private
# apt lists under the cache directory).
#   build.sh --check   only say whether a current build is cached (exit 0) or not (exit 1)
set -euo pipefail

K8S_VERSION=1.20.2
HERE=$(cd "$(dirname "$0")" && pwd)
K=${DET_K8S_HOME:-$HOME/.cache/det-jupyter/k8s-$K8S_VERSION}
SRC=$K/src/kubernetes-$K8S_VERSION
STAMP=$K/build.stamp
APT_PACKAGES=(golang-go etcd-server docker.io busybox-static gcc libc6-dev openssl curl)
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

log() { echo "k8s/build.sh: $*" >&2; }

want_stamp=$(cat "$HERE/build.sh" "$HERE/patch_kubelet.py" | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]; then
  ok=1
  for b in "${BINARIES[@]}"; do [ -x "$K/bin/$b" ] || ok=0; done
  for p in etcd dockerd docker busybox; do command -v "$p" >/dev/null || ok=0; done
  if [ "$ok" = 1 ]; then
    log "cached in $K"
    exit 0
  fi
fi
if [ "${1:-}" = --check ]; then
  log "no current build in $K; run: bash scripts/k8s/build.sh"
  exit 1
fi

if [ "$(id -u)" != 0 ]; then
  log "needs root (apt-get, and later a private dockerd and kubelet)"
  exit 1
fi
mkdir -p "$K"
rm -f "$STAMP"

# 1. Debian packages: the Go toolchain, etcd, Docker, a static busybox, a C compiler for pause.
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. The kubernetes source package (bookworm ships 1.20.5+really1.20.2), through a deb-src
#    list kept under $K so the host's apt configuration stays as it is.
if [ ! -d "$SRC/cmd/kubelet" ]; then
  mirror=$(awk '$1 == "URIs:" { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { log "no Debian mirror found in /etc/apt"; exit 1; }
  apt_dir=$K/src/apt
  mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial"
  cat > "$apt_dir/sources/kubernetes-src.sources" <<EOF
Types: deb-src
URIs: $mirror
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # (as root: apt's _apt user cannot write under root's home)
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources"
            -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root)
  log "fetching Debian's kubernetes source package from $mirror"
  apt-get "${apt_opts[@]}" update -qq
  (cd "$K/src" && apt-get "${apt_opts[@]}" source --download-only -qq kubernetes)
  orig=$(ls "$K"/src/kubernetes_*really"$K8S_VERSION".orig.tar.gz | head -n1)
  tar -C "$K/src" -xzf "$orig"
  [ -d "$SRC/cmd/kubelet" ] || { log "unexpected layout in $orig"; exit 1; }
fi

# 3. Patch the kubelet, then build. CGO_ENABLED=0 as Debian's own rules do; GOPROXY=off
#    because the tarball vendors every module. make keeps its Go cache under _output/, so
#    a rebuild after a patch change takes seconds for the kubelet.
python3 "$HERE/patch_kubelet.py" "$SRC"
log "building ${BINARIES[*]} (cold: ~8.5 min on 2 cores)"
started=$(date +%s)
what=()
for b in "${BINARIES[@]}"; do what+=("cmd/$b"); done
(cd "$SRC" && nice -n 5 env HOME="${HOME:-/root}" GOPROXY=off GOFLAGS= CGO_ENABLED=0 \
   make WHAT="${what[*]}") > "$K/build.log" 2>&1 \
  || { tail -n 40 "$K/build.log" >&2; log "make failed; full log in $K/build.log"; exit 1; }
log "make took $(( $(date +%s) - started )) s"
# The rule patch_kubelet.py serves: no code in the kubelet that could call a cloud metadata
# service (credential providers, cAdvisor's cloud detection). Checked on the binary.
if grep -a -q -E 'k8s\.io/kubernetes/pkg/credentialprovider/(aws|gcp|azure)\.|cadvisor/utils/cloudinfo/(aws|gce|azure)\.' \
     "$SRC/_output/bin/kubelet"; then
  log "the built kubelet still links cloud credential-provider or cloud-detection code"
  exit 1
fi
mkdir -p "$K/bin"
for b in "${BINARIES[@]}"; do
  install -m 0755 "$SRC/_output/bin/$b" "$K/bin/$b"
done

# 4. Root filesystems of the local images; up.sh imports them into the private dockerd.
#    pause: the sandbox's pause.c from the same source, static. busybox: Debian's static one.
#    hostusr: an empty Debian-shaped skeleton meant to get the host's /usr mounted read-only.
img=$K/images
rm -rf "$img"
mkdir -p "$img/pause" "$img/busybox/bin" "$img/hostusr"
gcc -Os -static -DVERSION="3.2-det" -o "$img/pause/pause" "$SRC/build/pause/linux/pause.c"
strip "$img/pause/pause"

skeleton() {  # a minimal /etc, /tmp and friends in rootfs $1
  (cd "$1" && mkdir -p etc tmp proc sys dev root run var/tmp && chmod 1777 tmp var/tmp)
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$1/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$1/etc/group"
}
skeleton "$img/busybox"
install -m 0755 /bin/busybox "$img/busybox/bin/busybox"
for applet in $("$img/busybox/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$img/busybox/bin/$applet"
done
skeleton "$img/hostusr"
mkdir -p "$img/hostusr/usr"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$img/hostusr/$d"; done

"$K/bin/kubelet" --version >&2
echo "$want_stamp" > "$STAMP"
log "built in $K"
