#!/usr/bin/env bash
# Start the single-node Kubernetes test bed that scripts/k8s/build.sh built: etcd, a private
# dockerd, kube-apiserver, kube-controller-manager, kube-scheduler and the (patched) kubelet,
# all on 127.0.0.1, each in its own session with its pid under $DET_K8S_HOME/run/pids.
# Every up starts from an empty cluster; the images of the private dockerd are kept.
#
# Prints the admin kubeconfig's path on stdout once the node is Ready and the default service
# account has its token; progress goes to stderr. On failure it stops what it started
# (down.sh) and exits non-zero. Settings: scripts/k8s/common.sh.
#
# What the pods get: no CNI, no kube-proxy, no cluster DNS. Pods that need a network use
# hostNetwork (they then share the host's loopback and reach the apiserver at
# https://127.0.0.1:$DET_K8S_API_PORT); others get Docker's "none" network. Images are local
# only: busybox:1.35, k8s.gcr.io/pause:3.2 and local/hostusr:1 (mount the host's /usr at /usr,
# read-only, to run host programs); pulls fail on purpose (the daemon's proxy is a dead port).
#
# Host hygiene: dockerd runs without iptables, ip forwarding, masquerading or a bridge; the
# kubelet makes no iptables chains and writes no sysctls; nothing listens beyond 127.0.0.1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

T0=$(date +%s%N)
say() { printf '[k8s up %5.1fs] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*" >&2; }
fail() {
  say "FAILED: $*"
  say "component logs: $LOGS; stopping what was started"
  bash "$HERE/down.sh" >&2 || true
  exit 1
}

# wait_until SECONDS WHAT COMPONENT CMD...: poll CMD, giving up early if COMPONENT has exited.
wait_until() {
  local limit=$1 what=$2 component=$3
  shift 3
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    running "$component" || fail "$component exited while waiting for $what: $(tail -n 5 "$LOGS/$component.log")"
    [ "$(date +%s)" -lt "$deadline" ] || fail "no $what within ${limit}s"
    sleep 0.3
  done
}

# launch NAME CMD...: run CMD in a new session, output to logs/NAME.log, pid to run/pids/NAME.
launch() {
  local name=$1
  shift
  setsid "$@" < /dev/null > "$LOGS/$name.log" 2>&1 &
  echo $! > "$RUN/pids/$name"
}

# --- preconditions -------------------------------------------------------------------------
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  [ -x "$BIN/$b" ] || { echo "k8s/up.sh: $BIN/$b missing; run scripts/k8s/build.sh" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "k8s/up.sh: needs root (dockerd, kubelet)" >&2; exit 1; }
for c in "${COMPONENTS[@]}"; do
  if running "$c"; then
    echo "k8s/up.sh: $c is already running (pid $(pid_of "$c")); run scripts/k8s/down.sh first" >&2
    exit 1
  fi
done
for port in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT"; do
  if ss -Hltn "sport = :$port" | grep -q .; then
    echo "k8s/up.sh: port $port is in use (set DET_K8S_*_PORT, see scripts/k8s/common.sh)" >&2
    exit 1
  fi
done
# Mounts with none of the components running: an earlier bed that ended without down.sh (its
# processes killed with their CI job, say). down.sh is safe on what is left; then check again.
if [ -n "$(mounts_under "$RUN")$(mounts_under "$DX")" ]; then
  say "mounts left under $RUN or $DX by a test bed that stopped without down.sh; cleaning up"
  bash "$HERE/down.sh" >&2 || true
  if [ -n "$(mounts_under "$RUN")$(mounts_under "$DX")" ]; then
    echo "k8s/up.sh: mounts still left under $RUN or $DX after down.sh:" >&2
    { mounts_under "$RUN"; mounts_under "$DX"; } | head -n 10 >&2
    exit 1
  fi
fi

rm -rf "$RUN" "$DX"
mkdir -p "$RUN"/{pids,etcd,kubelet,kubelet-certs,dockershim,pod-logs,container-logs,cni,volume-plugins} \
         "$LOGS" "$PKI" "$ETC" "$DOCKER_DATA" "$DX"
chmod 700 "$RUN/etcd"
# containerd's shims put their sockets under /run/containerd/s, a path they hard-code; if it is
# not there yet, down.sh may remove it again (once empty).
[ -e /run/containerd ] || touch "$RUN/made-run-containerd"

# --- PKI (once per node name) ----------------------------------------------------------------
# issue NAME SUBJECT EXTENSIONS: a key and a certificate signed by the test bed's CA.
issue() {
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2> /dev/null
  printf '%b' "$3" > "$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2> /dev/null
  rm -f "$PKI/$1.csr" "$PKI/$1.ext"
}
random_token() { od -An -tx1 -N24 /dev/urandom | tr -d ' \n'; }

if [ "$(cat "$PKI/node" 2>/dev/null)" != "$NODE" ] || [ ! -f "$PKI/tokens.csv" ]; then
  say "making the CA, certificates and tokens in $PKI"
  rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=det-k8s-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2> /dev/null
  issue apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n"
  issue kubelet "/CN=$NODE" "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$NODE\nextendedKeyUsage=serverAuth\n"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth\n"
  openssl genrsa -out "$PKI/sa.key" 2048 2> /dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2> /dev/null
  printf '%s,admin,admin,system:masters\n%s,system:node:%s,node-%s,system:nodes\n' \
    "$(random_token)" "$(random_token)" "$NODE" "$NODE" > "$PKI/tokens.csv"
  echo "$NODE" > "$PKI/node"
  chmod 600 "$PKI"/*.key "$PKI/tokens.csv"
fi
ADMIN_TOKEN=$(awk -F, '$2 == "admin" { print $1 }' "$PKI/tokens.csv")
NODE_TOKEN=$(awk -F, -v user="system:node:$NODE" '$2 == user { print $1 }' "$PKI/tokens.csv")

# --- configuration ---------------------------------------------------------------------------
# write_kubeconfig FILE USER TOKEN
write_kubeconfig() {
  (umask 077 && cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: det-k8s
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: "$2"
  user: {token: "$3"}
contexts:
- name: det-k8s
  context: {cluster: det-k8s, user: "$2", namespace: default}
current-context: det-k8s
EOF
  )
}
write_kubeconfig "$KUBECONFIG_ADMIN" admin "$ADMIN_TOKEN"
write_kubeconfig "$ETC/kubelet.kubeconfig" "system:node:$NODE" "$NODE_TOKEN"
echo '{}' > "$ETC/docker-daemon.json"   # keeps the host's /etc/docker/daemon.json out of it

# The kubelet's settings that keep it off the host's state: no iptables chains
# (makeIPTablesUtilChains), no sysctl writes (protectKernelDefaults false + the patched
# warn-only tunables), no eviction or image GC of the local images, no device-plugin dir
# under /var/lib/kubelet, a cgroupfs driver under the dockerd's own cgroup parent, and
# maxOpenFiles at the hard limit (no CAP_SYS_RESOURCE to raise it). maxPods 250 (the default is
# 110): BM-11 runs 200 one-slot trials at once, each a pod.
cat > "$ETC/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
hairpinMode: none
oomScoreAdj: 0
maxOpenFiles: 20000
maxPods: 250
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
volumePluginDir: $RUN/volume-plugins
resolvConf: /etc/resolv.conf
featureGates: {DevicePlugins: false}
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 20s
EOF

# --- etcd and dockerd ------------------------------------------------------------------------
say "etcd on 127.0.0.1:$ETCD_PORT"
launch etcd etcd --name det-k8s --data-dir "$RUN/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "det-k8s=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new

say "private dockerd on $DX/docker.sock"
# The proxy is a dead loopback port: an accidental registry pull fails at once, on this host.
launch dockerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
  dockerd --data-root "$DOCKER_DATA" --exec-root "$DX" -H "$DOCKER_HOST" --pidfile "$DX/dockerd.pid" \
  --config-file "$ETC/docker-daemon.json" --containerd-namespace det-k8s \
  --containerd-plugins-namespace det-k8s-plugins \
  --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --bridge=none \
  --oom-score-adjust=0 --exec-opt native.cgroupdriver=cgroupfs --cgroup-parent="/$CGROUP_PARENT" \
  --log-driver=json-file

wait_until 60 "etcd health" etcd curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
say "etcd healthy"

say "kube-apiserver on https://127.0.0.1:$API_PORT"
launch kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" --insecure-port=0 \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" --authorization-mode=Node,RBAC \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP,Hostname \
  --allow-privileged=true --profiling=false

# While the apiserver starts: the local images, imported once into the kept docker-data.
wait_until 60 "dockerd" dockerd docker version
# import_image DIR NAME [docker import -c changes...]
import_image() {
  local dir=$1 name=$2
  shift 2
  docker image inspect "$name" > /dev/null 2>&1 && return 0
  [ -d "$K/images/$dir" ] || fail "no $K/images/$dir; run scripts/k8s/build.sh"
  tar -C "$K/images/$dir" -c . | docker import "$@" - "$name" > /dev/null
  say "imported $name"
}
if [ "$(cat "$K/images.stamp" 2>/dev/null)" != "$(cat "$K/build.stamp" 2>/dev/null)" ]; then
  # a new build (maybe new root filesystems): import them afresh
  docker rmi -f k8s.gcr.io/pause:3.2 busybox:1.35 local/hostusr:1 > /dev/null 2>&1 || true
fi
import_image pause k8s.gcr.io/pause:3.2 -c 'ENTRYPOINT ["/pause"]'
import_image busybox busybox:1.35 -c 'CMD ["sh"]' -c 'ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin'
import_image hostusr local/hostusr:1 -c 'ENV PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin'
cp "$K/build.stamp" "$K/images.stamp" 2>/dev/null || true
say "dockerd ready"

readyz() {
  curl -fsS --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$API_PORT/readyz"
}
wait_until 90 "kube-apiserver /readyz" kube-apiserver readyz
say "kube-apiserver ready"

# --- controllers, scheduler, kubelet ---------------------------------------------------------
# The service-account key and root CA let the token controller give pods their tokens;
# --flex-volume-plugin-dir keeps it from creating /usr/libexec/kubernetes.
launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KUBECONFIG_ADMIN" \
  --leader-elect=false --port=0 --secure-port=0 --bind-address=127.0.0.1 \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --use-service-account-credentials=false --controllers='*,-nodeipam' \
  --flex-volume-plugin-dir="$RUN/volume-plugins" --terminated-pod-gc-threshold=1000
launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KUBECONFIG_ADMIN" \
  --leader-elect=false --port=0 --secure-port=0 --bind-address=127.0.0.1

say "kubelet (node $NODE)"
# --docker is cAdvisor's (deprecated) flag: without it, it retries /var/run/docker.sock for 5 s.
launch kubelet env KUBELET_POD_LOGS_DIR="$RUN/pod-logs" KUBELET_CONTAINER_LOGS_DIR="$RUN/container-logs" \
  "$BIN/kubelet" --config="$ETC/kubelet-config.yaml" --kubeconfig="$ETC/kubelet.kubeconfig" \
  --hostname-override="$NODE" --node-ip=127.0.0.1 --cloud-provider= \
  --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet-certs" \
  --container-runtime=docker --docker-endpoint="$DOCKER_HOST" --docker="$DOCKER_HOST" \
  --container-runtime-endpoint="unix://$DX/dockershim.sock" \
  --experimental-dockershim-root-directory="$RUN/dockershim" \
  --pod-infra-container-image=k8s.gcr.io/pause:3.2 \
  --network-plugin= --cni-conf-dir="$RUN/cni" --cni-bin-dir="$RUN/cni" --cni-cache-dir="$RUN/cni" \
  --v="${DET_K8S_KUBELET_V:-1}"

kubectl_() { "$BIN/kubectl" --kubeconfig="$KUBECONFIG_ADMIN" "$@"; }
node_ready() {
  [ "$(kubectl_ get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
default_token() { kubectl_ -n default get secrets -o name | grep -q default-token; }
wait_until 120 "node $NODE Ready" kubelet node_ready
say "node $NODE Ready"
wait_until 60 "the default service account's token" kube-controller-manager default_token
# For tests/_k8s.py (and anyone else) to find this cluster without repeating common.sh.
printf 'KUBECONFIG=%s\nDOCKER_HOST=%s\nNODE=%s\nAPI_SERVER=https://127.0.0.1:%s\n' \
  "$KUBECONFIG_ADMIN" "$DOCKER_HOST" "$NODE" "$API_PORT" > "$RUN/endpoints"
say "cluster ready"
echo "$KUBECONFIG_ADMIN"
