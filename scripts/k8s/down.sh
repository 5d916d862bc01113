#!/usr/bin/env bash
# Stop the test bed that scripts/k8s/up.sh started and leave the host as it was: each
# component is stopped by the pid up.sh recorded (never by name), the private dockerd's
# containers are removed, whatever the kubelet and dockerd mounted under $DET_K8S_HOME and the
# exec root is unmounted, their empty cgroups are removed, and the cluster state (run/) is
# wiped. Kept: the binaries, the PKI and the private dockerd's images. Safe to run twice, or
# after a failed up. Settings: scripts/k8s/common.sh.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

say() { echo "[k8s down] $*" >&2; }

# stop NAME SECONDS: SIGTERM the recorded pid, SIGKILL it if it outlives SECONDS.
stop() {
  local name=$1 limit=$2 pid i
  pid=$(pid_of "$name") || return 0
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for (( i = 0; i < limit * 5; i++ )); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$name ($pid) outlived ${limit}s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      sleep 0.5
    fi
    say "stopped $name ($pid)"
  fi
  rm -f "$RUN/pids/$name"
}

unmount_all_under() {
  local point pass
  for pass in 1 2 3; do
    mapfile -t points < <(mounts_under "$1")
    [ ${#points[@]} -gt 0 ] || return 0
    for point in "${points[@]}"; do
      umount "$point" 2>/dev/null || umount -l "$point" 2>/dev/null \
        || { [ "$pass" = 3 ] && say "could not unmount $point"; }
    done
  done
}

# The kubelet first, so it restarts nothing we remove; then the pods' containers.
stop kubelet 15
if running dockerd && docker version > /dev/null 2>&1; then
  mapfile -t ids < <(docker ps -aq)
  if [ ${#ids[@]} -gt 0 ]; then
    docker rm -f "${ids[@]}" > /dev/null 2>&1
    say "removed ${#ids[@]} containers"
  fi
fi
unmount_all_under "$RUN/kubelet"   # secret and projected volumes (tmpfs), the root's bind mount

stop dockerd 30   # it stops its own containerd
stop kube-scheduler 20
stop kube-controller-manager 20
stop kube-apiserver 20
stop etcd 20

# Overlay mounts, shm and the default netns file that dockerd leaves behind.
unmount_all_under "$K"
unmount_all_under "$DX"
for cg in /sys/fs/cgroup/*/"$CGROUP_PARENT" /sys/fs/cgroup/"$CGROUP_PARENT"; do
  [ -d "$cg" ] || continue
  find "$cg" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
  rmdir "$cg" 2>/dev/null || say "cgroup $cg is not empty; left in place"
done

# /run/containerd/s, if up.sh found no /run/containerd: only once empty, and while no shim
# (of any daemon) runs, which could be about to put its socket there.
if [ -e "$RUN/made-run-containerd" ] && ! pgrep -f containerd-shim > /dev/null; then
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
fi

left=$( { mounts_under "$K"; mounts_under "$DX"; } )
if [ -n "$left" ]; then
  say "still mounted (run/ and $DX kept): $left"
  exit 1
fi
rm -rf "$RUN" "$DX"
say "done"
