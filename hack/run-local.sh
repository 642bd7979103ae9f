#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs spire-registrar so you can watch it work (`make run`).
#
# With no arguments (the local demo): builds the real etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kwok and spire-server from their pinned modules (first run only; that
# takes a while), starts them on 127.0.0.1 with hack/local-up (kwok plays the kubelet of two fake
# nodes), starts the controller, creates a demo Deployment and the ClusterSPIFFEID in
# manifests/examples, waits until its pods are Running and shows each with its SPIFFE ID, then
# follows the controller's log until Ctrl-C and stops everything. --light runs only etcd and
# kube-apiserver, with pods created bound to nodes that never run them.
#
# With --spire-socket (your own cluster): skips local-up and the demo objects and runs the
# controller against your kubeconfig and SPIRE server socket, with a config generated from the
# flags (or yours, with --config). Run with --help for the flags.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
OUT=$ROOT/_output
# Where hack/build-tools.sh caches the real binaries, per user and outside the clone.
BIN=${SPIRE_REGISTRAR_TOOLS_BIN:-"${XDG_CACHE_HOME:-$HOME/.cache}/spire-registrar/bin"}
KUBECTL=$BIN/kubectl
SPIRE_SERVER=$BIN/spire-server
CONTROLLER=$OUT/spire-registrar
LOCAL_UP=$OUT/tools/local-up

usage() {
  cat <<EOF
Usage: hack/run-local.sh [flags]

With no flags, runs a self-contained demo: a real control plane (etcd, kube-apiserver,
kube-scheduler, kube-controller-manager, and kwok as the kubelet of fake nodes) and spire-server
on 127.0.0.1 (state and logs in _output/local-up), a demo Deployment, the ClusterSPIFFEID of
manifests/examples, and the controller. With --spire-socket, runs the controller against your
own cluster instead.

Flags:
  --spire-socket PATH   SPIRE server admin API socket; selects your-own-cluster mode
  --kubeconfig PATH     kubeconfig of your cluster (default: \$KUBECONFIG, else ~/.kube/config)
  --trust-domain TD     SPIRE trust domain (default: example.org)
  --cluster-name NAME   cluster name, as SPIRE's k8s_psat attestor knows it (default: local)
  --cluster-domain D    cluster DNS domain (default: cluster.local)
  --config FILE         your own ControllerManagerConfig file instead of a generated one
                        (your-own-cluster mode only)
  --light               local demo on etcd and kube-apiserver only: quicker to build and start,
                        but nothing schedules or runs the pods
  --replicas N          pods of the demo Deployment (local demo; default: 3)
  -v N                  controller log verbosity (default: 2)
  -h, --help            show this help

Through make: make run [KUBECONFIG=PATH SPIRE_SOCKET=PATH TRUST_DOMAIN=TD CLUSTER_NAME=NAME]
EOF
}

say() { printf '%s\n' "$*"; }
die() {
  printf 'run-local: %s\n' "$*" >&2
  exit 1
}
# header prints a numbered step title.
header() { printf '\n==> %s\n' "$*"; }

kubeconfig="" spire_socket="" trust_domain="" cluster_name="" cluster_domain="" user_config=""
verbosity=2 light=false replicas=3
while (($# > 0)); do
  case $1 in
    --spire-socket) spire_socket=${2:?--spire-socket needs a path}; shift 2 ;;
    --kubeconfig) kubeconfig=${2:?--kubeconfig needs a path}; shift 2 ;;
    --trust-domain) trust_domain=${2:?--trust-domain needs a value}; shift 2 ;;
    --cluster-name) cluster_name=${2:?--cluster-name needs a value}; shift 2 ;;
    --cluster-domain) cluster_domain=${2:?--cluster-domain needs a value}; shift 2 ;;
    --config) user_config=${2:?--config needs a path}; shift 2 ;;
    --light) light=true; shift ;;
    --replicas) replicas=${2:?--replicas needs a number}; shift 2 ;;
    -v) verbosity=${2:?-v needs a number}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[[ "$verbosity" =~ ^[0-9]+$ ]] || die "-v wants a number, got '$verbosity'"
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || die "--replicas wants a positive number, got '$replicas'"

mode=local
if [[ -n "$spire_socket" ]]; then
  mode=cluster
  ! $light || die "--light is for the local demo; your own cluster is what it is"
elif [[ -n "$kubeconfig" ]]; then
  die "--kubeconfig needs --spire-socket too (the SPIRE server of that cluster); without both, the local demo runs"
elif [[ -n "$user_config" ]]; then
  die "--config is for your own cluster: pass --spire-socket (and --kubeconfig) too"
fi
trust_domain=${trust_domain:-example.org}
cluster_name=${cluster_name:-local}
cluster_domain=${cluster_domain:-cluster.local}

# --- process management ------------------------------------------------------------------------
#
# The long-running children (local-up and the controller) run in sessions of their own, so that
# the Ctrl-C the terminal sends to the foreground process group reaches only this script, which
# then stops them one at a time, in order, with a single SIGTERM each.

LOCAL_UP_PID="" CONTROLLER_PID="" CONTROLLER_LOG="" RUN_DIR="" PIDFILE=""
# Not a function: `setsid CMD &` makes $! the pid of CMD itself (setsid execs it in place, since
# a background child of a shell without job control is no process group leader).
SETSID=""
if command -v setsid >/dev/null; then
  SETSID=setsid
fi

# stop_pid NAME PID GRACE_SECONDS: SIGTERM, wait up to GRACE_SECONDS, then SIGKILL.
stop_pid() {
  local name=$1 pid=$2 grace=$3 waited=0
  [[ -n "$pid" ]] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  say "run-local: stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((waited < grace * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "run-local: $name did not stop within ${grace}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_pid spire-registrar "$CONTROLLER_PID" 15
  stop_pid local-up "$LOCAL_UP_PID" 30
  if [[ -n "$CONTROLLER_PID$LOCAL_UP_PID" ]]; then
    say "run-local: everything stopped; logs are in $RUN_DIR"
  fi
  if [[ -n "$PIDFILE" && "$(cat "$PIDFILE" 2>/dev/null)" == "$$" ]]; then
    rm -f "$PIDFILE"
  fi
  exit "$status"
}
# Ctrl-C while following the log is how the demo is meant to end: exit 0 then, 130 before.
INTERRUPT_STATUS=130
trap cleanup EXIT
trap 'exit $INTERRUPT_STATUS' INT
trap 'exit 143' TERM

# --- helpers -----------------------------------------------------------------------------------

# build_controller builds the controller binary into _output.
build_controller() {
  local start=$SECONDS
  say "run-local: go build -o _output/spire-registrar ./cmd/spire-registrar"
  go build -o "$CONTROLLER" ./cmd/spire-registrar
  say "run-local: built the controller in $((SECONDS - start))s"
}

# write_config PATH SOCKET writes a ControllerManagerConfig for this run.
write_config() {
  local path=$1 socket=$2
  cat >"$path" <<EOF
# Generated by hack/run-local.sh for this run; manifests/examples/config.yaml explains each field.
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: $trust_domain
clusterName: $cluster_name
clusterDomain: $cluster_domain
spireServerSocketPath: $socket
ignoreNamespaces:
  - kube-system
  - kube-public
  - spire-system
# Short, so that an entry deleted by hand in SPIRE comes back quickly in the demo.
gcInterval: 30s
EOF
}

# start_controller CONFIG KUBECONFIG starts the controller in the background, logging to a file.
start_controller() {
  local config=$1 kc=$2
  CONTROLLER_LOG=$RUN_DIR/spire-registrar.log
  : >"$CONTROLLER_LOG"
  say "run-local: _output/spire-registrar --kubeconfig $kc --config $config -v $verbosity"
  say "run-local: its log: $CONTROLLER_LOG"
  $SETSID "$CONTROLLER" --kubeconfig "$kc" --config "$config" -v "$verbosity" >>"$CONTROLLER_LOG" 2>&1 &
  CONTROLLER_PID=$!
}

# controller_alive fails, showing the end of the controller's log, if the controller exited.
controller_alive() {
  kill -0 "$CONTROLLER_PID" 2>/dev/null && return 0
  say "run-local: the controller exited; the end of its log ($CONTROLLER_LOG):" >&2
  tail -n 30 "$CONTROLLER_LOG" | sed 's/^/  | /' >&2
  return 1
}

# entry_count prints how many entries the SPIRE server holds.
entry_count() {
  local out
  out=$("$SPIRE_SERVER" entry count -socketPath "$1" 2>/dev/null) || return 1
  # "3 registration entries" / "1 registration entry"
  printf '%s\n' "${out%% *}"
}

# follow_controller_log follows the controller's log until the controller exits or Ctrl-C.
follow_controller_log() {
  say ""
  say "==> Following the controller's log ($CONTROLLER_LOG); press Ctrl-C to stop everything"
  INTERRUPT_STATUS=0
  # tail exits by itself if the controller does.
  tail -n +1 --pid="$CONTROLLER_PID" -F "$CONTROLLER_LOG" 2>/dev/null || true
  controller_alive || exit 1
}

# --- your own cluster --------------------------------------------------------------------------

run_cluster() {
  RUN_DIR=$OUT/run
  mkdir -p "$RUN_DIR"
  if [[ -z "$kubeconfig" ]]; then
    if [[ -n "${KUBECONFIG:-}" ]]; then
      [[ "$KUBECONFIG" != *:* ]] || die "\$KUBECONFIG lists several files; pass the one to use with --kubeconfig"
      kubeconfig=$KUBECONFIG
    else
      kubeconfig=$HOME/.kube/config
    fi
  fi
  [[ -f "$kubeconfig" ]] || die "kubeconfig $kubeconfig does not exist"
  [[ -S "$spire_socket" ]] || die "$spire_socket is not a socket: pass the SPIRE server's admin API socket (its server.socket_path)"
  kubeconfig=$(cd "$(dirname "$kubeconfig")" && pwd -P)/$(basename "$kubeconfig")

  say "spire-registrar against your cluster"
  say "  kubeconfig:    $kubeconfig"
  say "  SPIRE socket:  $spire_socket"
  say "The controller manages only entries it creates (each carries a k8s:pod-uid selector);"
  say "entries made by other means are left alone."

  header "1/4 kubectl (built from pinned modules by hack/build-tools.sh; first time takes a few minutes)"
  hack/build-tools.sh kubectl

  header "2/4 Building the controller"
  build_controller

  header "3/4 Checking the cluster"
  # Listing ClusterSPIFFEIDs needs the CRD installed and the read access the controller needs too.
  if ! "$KUBECTL" --kubeconfig "$kubeconfig" get clusterspiffeids.spire.spiffe.io -o name >/dev/null; then
    die "cannot list ClusterSPIFFEIDs (kubectl's error is above). If the CRDs are not installed yet:
  $KUBECTL --kubeconfig $kubeconfig apply -k $ROOT/manifests/crds"
  fi
  say "run-local: the cluster serves ClusterSPIFFEIDs"
  local config
  if [[ -n "$user_config" ]]; then
    config=$(cd "$(dirname "$user_config")" && pwd -P)/$(basename "$user_config")
    say "run-local: using your config $config (its spireServerSocketPath must be $spire_socket)"
  else
    config=$RUN_DIR/config.yaml
    write_config "$config" "$spire_socket"
    say "run-local: wrote $config (trustDomain $trust_domain, clusterName $cluster_name)"
  fi

  header "4/4 Starting the controller"
  start_controller "$config" "$kubeconfig"
  sleep 5
  controller_alive || exit 1
  "$KUBECTL" --kubeconfig "$kubeconfig" get clusterspiffeids || true
  if [[ -x "$SPIRE_SERVER" ]]; then
    local n
    n=$(entry_count "$spire_socket" || echo "?")
    say "run-local: the SPIRE server holds $n entries; list them with"
    say "  $SPIRE_SERVER entry show -socketPath $spire_socket"
  fi
  follow_controller_log
}

# --- the local demo ----------------------------------------------------------------------------

# print_new_lines FILE: prints the lines of FILE after the first $printed, up to (not including)
# local-up's closing summary, which this script replaces with its own.
printed=0 summary_seen=false
print_new_lines() {
  local file=$1 total
  $summary_seen && return 0
  [[ -f "$file" ]] || return 0
  total=$(wc -l <"$file")
  ((total > printed)) || return 0
  while IFS= read -r line; do
    if [[ "$line" == "local-up: everything is up"* ]]; then
      summary_seen=true
      break
    fi
    if [[ -n "$line" ]]; then printf '  %s\n' "$line"; fi
  done < <(sed -n "$((printed + 1)),${total}p" "$file")
  printed=$total
}

run_local() {
  local state=$OUT/local-up
  RUN_DIR=$state
  mkdir -p "$state"
  local pidfile=$OUT/run-local.pid
  if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    die "another hack/run-local.sh is running (pid $(cat "$pidfile")); stop it first"
  fi
  echo $$ >"$pidfile"
  PIDFILE=$pidfile

  local world="etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok and spire-server"
  local tools="etcd kube-apiserver spire-server kube-scheduler kube-controller-manager kwok"
  local light_flag=()
  if $light; then
    world="etcd, kube-apiserver and spire-server"
    tools="etcd kube-apiserver spire-server"
    light_flag=(--light)
  fi
  say "spire-registrar local demo"
  say "Runs $world on 127.0.0.1, the controller against them, and a ClusterSPIFFEID selecting the"
  say "pods of a demo workload. State and logs: $state"

  header "1/5 Real binaries: $tools"
  say "They are built from the Go modules pinned in hack/tools into $BIN. The FIRST run"
  say "builds them, which takes a long while on a small machine; later runs, from any clone,"
  say "reuse them at once."
  local start=$SECONDS
  # shellcheck disable=SC2086 # one word per tool
  hack/build-tools.sh $tools
  say "run-local: real binaries ready ($((SECONDS - start))s)"

  header "2/5 Building the controller and local-up"
  build_controller
  start=$SECONDS
  say "run-local: go build -o _output/tools/local-up ./hack/local-up"
  go build -o "$LOCAL_UP" ./hack/local-up
  say "run-local: built local-up in $((SECONDS - start))s"

  header "3/5 Starting $world on 127.0.0.1"
  local env_file=$state/env local_up_log=$state/local-up.log
  rm -f "$env_file"
  : >"$local_up_log"
  say "run-local: _output/tools/local-up --state-dir $state --trust-domain $trust_domain ${light_flag[*]} (log: $local_up_log)"
  start=$SECONDS
  $SETSID "$LOCAL_UP" --state-dir "$state" --trust-domain "$trust_domain" "${light_flag[@]}" >>"$local_up_log" 2>&1 &
  LOCAL_UP_PID=$!
  while [[ ! -f "$env_file" ]]; do
    print_new_lines "$local_up_log"
    if ! kill -0 "$LOCAL_UP_PID" 2>/dev/null; then
      print_new_lines "$local_up_log"
      die "local-up exited before everything was up; see $local_up_log and the component logs in $state"
    fi
    if ((SECONDS - start > 300)); then
      die "local-up is not up after 300s; see $local_up_log"
    fi
    sleep 0.5
  done
  sleep 0.2
  print_new_lines "$local_up_log"
  # The env file sets KUBECONFIG and SPIRE_SERVER_SOCKET.
  # shellcheck source=/dev/null
  source "$env_file"
  local kc=$KUBECONFIG socket=$SPIRE_SERVER_SOCKET
  say "run-local: up in $((SECONDS - start))s"

  header "4/5 Starting the controller"
  local config=$state/config.yaml
  write_config "$config" "$socket"
  say "run-local: wrote $config (trustDomain $trust_domain, clusterName $cluster_name, socket $socket)"
  start_controller "$config" "$kc"

  header "5/5 The demo workload, and the identities the controller gives its pods"
  say "run-local: _output/tools/local-up demo --kubeconfig $kc --spire-socket $socket --replicas $replicas ${light_flag[*]}"
  if ! "$LOCAL_UP" demo --kubeconfig "$kc" --spire-socket "$socket" --replicas "$replicas" "${light_flag[@]}"; then
    controller_alive || exit 1
    say "run-local: the controller's log ($CONTROLLER_LOG):" >&2
    tail -n 40 "$CONTROLLER_LOG" | sed 's/^/  | /' >&2
    exit 1
  fi
  controller_alive || exit 1
  say ""
  say "\$ spire-server entry show -socketPath $socket"
  "$SPIRE_SERVER" entry show -socketPath "$socket"

  local kubectl_note=""
  [[ -x "$KUBECTL" ]] || kubectl_note="
  # kubectl is not built by default; build it once (minutes) with: hack/build-tools.sh kubectl"
  if $light; then
    cat <<EOF

Everything is running. In another shell, poke at it:

  cd $ROOT
  source $env_file    # sets KUBECONFIG and SPIRE_SERVER_SOCKET
  export PATH=$BIN:\$PATH$kubectl_note

  # Watch the entries (run it again after each change):
  spire-server entry show -socketPath \$SPIRE_SERVER_SOCKET

  # A pod that stops matching loses its entry; a deleted pod too (--force because in the light
  # world no kubelet finishes a graceful delete):
  kubectl -n demo label pod web-2 app=db --overwrite
  kubectl -n demo delete pod web-3 --grace-period=0 --force
  kubectl get clusterspiffeids          # the status stats follow

  # An entry deleted behind the controller's back comes back within gcInterval (30s):
  spire-server entry delete -socketPath \$SPIRE_SERVER_SOCKET -entryID <ID from entry show>

Logs: $state (spire-registrar.log, local-up.log, kube-apiserver.log, etcd.log, spire/spire-server.log)
EOF
  else
    cat <<EOF

Everything is running. In another shell, poke at it:

  cd $ROOT
  source $env_file    # sets KUBECONFIG and SPIRE_SERVER_SOCKET
  export PATH=$BIN:\$PATH$kubectl_note

  # Watch the pods and their entries (run them again after each change):
  kubectl -n demo get pods -o wide
  spire-server entry show -socketPath \$SPIRE_SERVER_SOCKET

  # Scale the Deployment: new pods are scheduled, run, and get entries; removed ones lose them:
  kubectl -n demo scale deployment web --replicas=6

  # Roll it out: every pod is replaced, and so is every entry:
  kubectl -n demo rollout restart deployment web

  # Delete a pod: kwok finishes the graceful delete, the entry goes, the ReplicaSet replaces it:
  kubectl -n demo delete pod <name>

  # An entry deleted behind the controller's back comes back within gcInterval (30s):
  spire-server entry delete -socketPath \$SPIRE_SERVER_SOCKET -entryID <ID from entry show>

  # Change the ClusterSPIFFEID and see every entry follow:
  kubectl edit clusterspiffeid demo-web

Logs: $state (spire-registrar.log, local-up.log, and the component logs next to it)
EOF
  fi
  follow_controller_log
}

if [[ $mode == local ]]; then
  run_local
else
  run_cluster
fi
