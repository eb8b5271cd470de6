#!/usr/bin/env bash
# A multi-host test bed on one Linux box: N "hosts", each a network namespace with its own IP, its own
# process table and hostname (PID and UTS namespaces) and its own /tmp/ray and /dev/shm (a mount namespace), joined by a
# switch on a private subnet. The switch (tools/testbed_switch.py, a user-space learning switch whose
# ports are TAP devices) lives in a namespace of its own, so nothing is added to the machine's own
# network: every packet stays inside the bed and the hosts' loopbacks. It gives each host's cable
# delay, jitter and loss (kernels without sch_netem, as on this project's CI VM, cannot) and pulls it.
#
#   tools/testbed.sh up N [--delay MS] [--jitter MS] [--loss PCT]   build hosts 1..N (every link shaped)
#   tools/testbed.sh down                                            remove everything (also after a crash)
#   tools/testbed.sh shape I [--delay MS] [--jitter MS] [--loss PCT] reshape host I's link (no options: clean)
#   tools/testbed.sh link I up|down                                  plug / unplug host I's cable
#   tools/testbed.sh exec I CMD...                                   run CMD on host I
#   tools/testbed.sh ip I                                            host I's address
#   tools/testbed.sh status                                          what exists now
#
# --delay and --jitter are one way and apply in both directions of the host's cable (between a shaped
# and a clean host: RTT = 2 x delay +- 2 x jitter); --loss PCT drops that share of the frames in each
# direction. Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN), /dev/net/tun, iproute2 (`ip`), util-linux
# (`unshare`, `nsenter`) and python3.
#
# Names: RFB_PREFIX (default rfb) names everything: namespaces PREFIX-sw (the switch) and PREFIX-h1..hN;
# state (PIDs, the switch's control socket) in /run/PREFIX-testbed. RFB_SUBNET (default 10.213.0) is the
# /24: host I is SUBNET.I. `up` first removes a bed of the same prefix left by a crash, so it can always
# be re-run; `down` kills the switch and every process in the bed (a host's anchor is PID 1 of its PID
# namespace, so killing it ends all of that host), then deletes the namespaces; safe when nothing exists.
set -euo pipefail

PREFIX=${RFB_PREFIX:-rfb}
SUBNET=${RFB_SUBNET:-10.213.0}
STATE=/run/${PREFIX}-testbed
SW=${PREFIX}-sw

die() { echo "testbed: $*" >&2; exit 2; }

[[ $PREFIX =~ ^rfb[a-z0-9-]{0,12}$ ]] || die "RFB_PREFIX must be 'rfb' plus up to 12 of [a-z0-9-], not '$PREFIX'"
[[ $SUBNET =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "RFB_SUBNET must be three octets of 10.0.0.0/8 (e.g. 10.213.0), not '$SUBNET'"

need_tools() {
  local tool
  for tool in ip unshare nsenter python3; do
    command -v "$tool" >/dev/null || die "'$tool' is missing (Debian: apt-get install iproute2 util-linux python3)"
  done
}

host_ns() { echo "${PREFIX}-h$1"; }

check_host() {
  [[ $1 =~ ^[1-9][0-9]?$ ]] || die "host must be a number 1..99, not '$1'"
  ip netns list | grep -qx "$(host_ns "$1")\( (id: [0-9]*)\)\?" || die "host $1 does not exist (tools/testbed.sh up N first)"
}

# The namespaces of this prefix that exist now (switch and hosts).
our_namespaces() { ip netns list | awk '{print $1}' | grep -E "^${PREFIX}-(sw|h[0-9]+)$" || true; }

down() {
  local ns pid pids
  # 1. every host's anchor (killing PID 1 of a PID namespace kills everything in it) and the switch,
  #    each only if its PID still names it (PIDs are reused)
  if [[ -d $STATE ]]; then
    for pidfile in "$STATE"/*.pid; do
      [[ -e $pidfile ]] || continue
      pid=$(cat "$pidfile")
      if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" \
          | grep -qE "^rfb-anchor ${PREFIX} h|testbed_switch.py --prefix ${PREFIX} "; then
        kill -9 "$pid" 2>/dev/null || true
      fi
    done
  fi
  # 2. anything else still inside one of our network namespaces (a process that entered it otherwise)
  for ns in $(our_namespaces); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  done
  # 3. the namespaces (a host's eth0 went with the switch; deleting them frees the names)
  for ns in $(our_namespaces); do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE" /etc/netns/"${PREFIX}"-h*
  rmdir /etc/netns 2>/dev/null || true
  [[ -z $(our_namespaces) ]] || die "could not remove: $(our_namespaces | tr '\n' ' ')"
}

# one line to the switch's control socket; its answer must be "ok"
switch_ctl() {
  local answer
  answer=$(python3 - "$STATE/switch.sock" "$*" <<'PY'
import socket, sys
with socket.socket(socket.AF_UNIX) as s:
    s.settimeout(10)
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode())
    print(s.makefile().readline().strip())
PY
  ) || die "the switch does not answer ($STATE/switch.sock): rebuild with tools/testbed.sh up N"
  [[ $answer == ok ]] || die "switch: $answer"
}

DELAY=0 JITTER=0 LOSS=0
parse_shape() {
  while (($#)); do
    case $1 in
      --delay|--jitter|--loss)
        (($# >= 2)) || die "$1 needs a value"
        [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$1 must be a non-negative number, not '$2'"
        case $1 in --delay) DELAY=$2 ;; --jitter) JITTER=$2 ;; --loss) LOSS=$2 ;; esac
        shift 2 ;;
      *) die "unknown option '$1' (--delay MS, --jitter MS, --loss PCT)" ;;
    esac
  done
  awk -v l="$LOSS" 'BEGIN { exit !(l <= 100) }' || die "--loss must be at most 100, not '$LOSS'"
}

shape() { switch_ctl shape "$1" "$DELAY" "$JITTER" "$LOSS"; }

up() {
  local n=$1 i ns
  [[ $n =~ ^[1-9][0-9]?$ ]] || die "N must be a number 1..99, not '$n'"
  down
  mkdir -p "$STATE"
  [[ -c /dev/net/tun ]] || die "/dev/net/tun is missing (the switch's ports are TAP devices)"
  ip netns add "$SW"
  ip -n "$SW" link set lo up
  for ((i = 1; i <= n; i++)); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    # every host resolves every host's name (`ip netns exec` binds /etc/netns/NS/hosts over /etc/hosts)
    mkdir -p "/etc/netns/$ns"
    { echo "127.0.0.1 localhost"; for ((j = 1; j <= n; j++)); do echo "${SUBNET}.$j ${PREFIX}-h$j"; done; } \
      >"/etc/netns/$ns/hosts"
  done
  setsid ip netns exec "$SW" python3 "$(dirname "$0")/testbed_switch.py" --prefix "$PREFIX" --state "$STATE" \
    --hosts "$n" </dev/null >"$STATE/switch.log" 2>&1 &
  echo $! >"$STATE/switch.pid"  # ip netns exec execs the switch: same PID
  local tries
  for ((tries = 0; tries < 400; tries++)); do
    [[ -S $STATE/switch.sock ]] && break
    kill -0 "$(cat "$STATE/switch.pid")" 2>/dev/null || break
    sleep 0.05
  done
  [[ -S $STATE/switch.sock ]] || { local log; log=$(tail -3 "$STATE/switch.log"); down; die "the switch did not start: $log"; }
  for ((i = 1; i <= n; i++)); do
    ns=$(host_ns "$i")
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "${SUBNET}.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$i"
    # The host's anchor: PID 1 of its own PID namespace, with its own hostname (PREFIX-hI) and private
    # /tmp/ray and /dev/shm (Ray finds its "local" raylets with ps and keeps sockets and the object store
    # there: one machine each).
    setsid ip netns exec "$ns" unshare --mount --uts --pid --fork --mount-proc --propagation private \
      bash -c 'echo "$0-$1" >/proc/sys/kernel/hostname && mkdir -p /tmp/ray && mount -t tmpfs -o size=2g tmpfs /tmp/ray \
             && mount -t tmpfs -o size=4g tmpfs /dev/shm && exec -a "rfb-anchor $0 $1" sleep infinity' "$PREFIX" "h$i" \
      </dev/null >/dev/null 2>&1 &
    echo $! >"$STATE/h$i.pid.unshare"
  done
  # the PID recorded is the anchor inside (the `sleep`), which nsenter joins
  for ((i = 1; i <= n; i++)); do
    local anchor="" tries
    for ((tries = 0; tries < 200; tries++)); do
      anchor=$(pgrep -f "^rfb-anchor ${PREFIX} h$i( |\$)" || true)
      [[ -n $anchor ]] && break
      sleep 0.05
    done
    [[ -n $anchor ]] || { down; die "host $i did not start (unshare --pid --mount failed?)"; }
    echo "$anchor" >"$STATE/h$i.pid"
    rm -f "$STATE/h$i.pid.unshare"
  done
  echo "$n" >"$STATE/hosts"
  echo "testbed ${PREFIX}: $n hosts ${SUBNET}.1-${SUBNET}.$n (delay ${DELAY} ms, jitter ${JITTER} ms, loss ${LOSS} % per direction)"
}

host_exec() {
  local i=$1
  shift
  check_host "$i"
  (($#)) || die "exec needs a command"
  local pid
  pid=$(cat "$STATE/h$i.pid" 2>/dev/null) || die "host $i has no anchor (rebuild: tools/testbed.sh up N)"
  exec nsenter --target "$pid" --net --mount --uts --pid -- "$@"
}

need_tools
cmd=${1:-}
shift || true
case $cmd in
  up)
    (($# >= 1)) || die "usage: up N [--delay MS] [--jitter MS] [--loss PCT]"
    n=$1; shift; parse_shape "$@"; up "$n" ;;
  down) down ;;
  shape)
    (($# >= 1)) || die "usage: shape I [--delay MS] [--jitter MS] [--loss PCT]"
    i=$1; shift; check_host "$i"; parse_shape "$@"; shape "$i" ;;
  link)
    (($# == 2)) || die "usage: link I up|down"
    check_host "$1"
    [[ $2 == up || $2 == down ]] || die "link state must be up or down, not '$2'"
    switch_ctl link "$1" "$2" ;;
  exec) (($# >= 1)) || die "usage: exec I CMD..."; host_exec "$@" ;;
  ip) (($# == 1)) || die "usage: ip I"; check_host "$1"; echo "${SUBNET}.$1" ;;
  status)
    for ns in $(our_namespaces); do echo "$ns"; done
    [[ -d $STATE ]] && echo "state: $STATE ($(cat "$STATE/hosts" 2>/dev/null || echo '?') hosts)" || true ;;
  *) die "usage: tools/testbed.sh up N [--delay MS --jitter MS --loss PCT] | down | shape I [...] | link I up|down | exec I CMD... | ip I | status" ;;
esac
