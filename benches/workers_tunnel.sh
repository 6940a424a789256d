#!/usr/bin/env bash
# workers_tunnel.sh: single-stream TCP throughput and CPU cost of mpt
# against the number of data-plane workers, next to raw veth, in one run.
#
#   sudo benches/workers_tunnel.sh [--modes raw,clear:2,enc:1,enc:2]
#                                  [--runs 3] [--duration 5]
#                                  [--perf OUT.data] [--perf-mode enc:2]
#
# One pair of network namespaces joined by one veth pair
# (10.79.0.1/24 <-> 10.79.0.2/24). Each mode is measured RUNS times with
# iperf3 (one TCP stream, DURATION s); the order of the modes rotates from
# run to run so a drift of the machine favours none:
#   raw      iperf3 over the veth itself, no tunnel
#   clear:T  through mpt (192.168.79.1 <-> .2, MTU 1400), no key_file,
#            `threads = T` on both sides
#   enc:T    the same with one key_file on both sides (encrypted)
# Daemons are restarted for every tunnel measurement and the control
# socket must report the expected session state first. For each tunnel
# run it prints Gbit/s, the CPU seconds both mptd used (utime + stime from
# /proc/<pid>/stat) and CPU seconds per Gbit transferred (the same number
# as cores busy per Gbit/s); at the end the medians and same-run ratios.
#
# --perf OUT.data adds one more run of --perf-mode (default enc:2), not
# counted in the medians, during which `perf record -g` samples both mptd
# (call graphs by DWARF unwinding; PERF_CALLGRAPH overrides, e.g. fp).
# With --perf the script builds and runs the `profiling` cargo profile
# (the release build with line tables; release binaries carry none), for
# every mode, so the medians and the profile come from one binary.
# Namespaces, daemons and temp files go on every exit (trap EXIT INT TERM).
#
# Environment: MPTD_BIN (default: <target dir>/release/mptd after building,
# <target dir>/profiling/mptd with --perf),
# CARGO_TARGET_DIR (default: target), MPT_SKIP_BUILD=1 to skip cargo.
set -euo pipefail

MODES_LIST="raw,clear:2,enc:1,enc:2"
RUNS=3
DURATION=5
PERF_OUT=""
PERF_MODE="enc:2"
PERF_CALLGRAPH="${PERF_CALLGRAPH:-dwarf,16384}"

usage() {
    sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --modes) MODES_LIST="${2:?--modes needs a list, e.g. raw,enc:1,enc:2}"; shift 2 ;;
        --modes=*) MODES_LIST="${1#*=}"; shift ;;
        --runs) RUNS="${2:?--runs needs a count}"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
        --duration=*) DURATION="${1#*=}"; shift ;;
        --perf) PERF_OUT="${2:?--perf needs an output file}"; shift 2 ;;
        --perf=*) PERF_OUT="${1#*=}"; shift ;;
        --perf-mode) PERF_MODE="${2:?--perf-mode needs a mode, e.g. enc:2}"; shift 2 ;;
        --perf-mode=*) PERF_MODE="${1#*=}"; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
MODE_RE='^(raw|(clear|enc):[0-9]+)$'
IFS=, read -r -a MODES <<<"$MODES_LIST"
(( ${#MODES[@]} >= 1 )) || { echo "--modes: empty list" >&2; exit 2; }
for m in "${MODES[@]}"; do
    [[ "$m" =~ $MODE_RE ]] || { echo "--modes: expected raw, clear:T or enc:T, got '$m'" >&2; exit 2; }
done
[[ "$PERF_MODE" =~ ^(clear|enc):[0-9]+$ ]] || { echo "--perf-mode: expected clear:T or enc:T, got '$PERF_MODE'" >&2; exit 2; }
[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || { echo "--runs: expected a count >= 1, got '$RUNS'" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || { echo "--duration: expected whole seconds >= 1, got '$DURATION'" >&2; exit 2; }

if [[ $EUID -ne 0 ]]; then
    echo "workers_tunnel.sh needs root (network namespaces): sudo $0 $*" >&2
    exit 1
fi

say() { printf '==> %s\n' "$*"; }

# --- state for cleanup -------------------------------------------------------
TAG="mptwork-$$"
WORK="$(mktemp -d "/tmp/${TAG}.XXXXXX")"
NAMESPACES=()
PIDS=()

# halt PID...: TERM, up to 3 s of grace, then KILL; reaps them.
halt() {
    local p
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}

# forget PID...: drops them from PIDS (after they were halted).
forget() {
    local keep=() p q drop
    for p in "${PIDS[@]}"; do
        drop=0
        for q in "$@"; do [[ "$p" == "$q" ]] && drop=1; done
        (( drop )) || keep+=("$p")
    done
    PIDS=("${keep[@]}")
}

on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    halt "${PIDS[@]}"
    local ns
    for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    if [[ $rc -ne 0 ]]; then
        echo "workers_tunnel failed (exit $rc); logs kept in $WORK" >&2
        local f
        for f in "$WORK"/*.log; do
            [[ -s "$f" ]] || continue
            echo "----- $f (last 20 lines) -----" >&2
            tail -n 20 "$f" >&2
        done
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- prerequisites -------------------------------------------------------------
cd "$(dirname "$0")/.."
NEED=(iperf3 ip python3)
[[ -n "$PERF_OUT" ]] && NEED+=(perf)
for tool in "${NEED[@]}"; do
    command -v "$tool" >/dev/null 2>&1 && continue
    say "installing iperf3, iproute2, python3 and perf"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iproute2 python3 linux-perf >/dev/null
    break
done

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
PROFILE=release
[[ -n "$PERF_OUT" ]] && PROFILE=profiling
if [[ "${MPT_SKIP_BUILD:-0}" != 1 && -z "${MPTD_BIN:-}" ]]; then
    say "building: cargo build --profile $PROFILE -p mptd -p mpt-cli"
    cargo build --profile "$PROFILE" -p mptd -p mpt-cli
fi
MPTD="${MPTD_BIN:-$TARGET_DIR/$PROFILE/mptd}"
[[ -x "$MPTD" ]] || { echo "mptd not found at $MPTD: build it first: cargo build --profile $PROFILE -p mptd" >&2; exit 1; }
MPTD="$(cd "$(dirname "$MPTD")" && pwd)/$(basename "$MPTD")"
CLK_TCK="$(getconf CLK_TCK)"
if [[ -n "$PERF_OUT" ]]; then
    mkdir -p "$(dirname "$PERF_OUT")"
    PERF_OUT="$(cd "$(dirname "$PERF_OUT")" && pwd)/$(basename "$PERF_OUT")"
fi

KEY="$WORK/psk.key"
(umask 077; head -c 32 /dev/urandom | base64 >"$KEY")

# --- helpers -------------------------------------------------------------------
# config SIDE(1|2) THREADS KEY_FILE(or empty) CONTROL
config() {
    local me=$1 threads=$2 key=$3 control=$4 peer=$(( 3 - $1 ))
    cat <<EOF
[daemon]
control = "$control"
threads = $threads
log = "info"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "192.168.79.$me/24"

[[connection]]
name = "peer"
peer_ipv4 = "192.168.79.$peer"
networks = []
port = 65024
remote_port = 65024
keepalive = "500ms"
dead_timer = "1500ms"
scheduler = "weighted"
EOF
    [[ -n "$key" ]] && echo "key_file = \"$key\""
    cat <<EOF

[[connection.path]]
name = "p0"
local = "10.79.0.$me"
remote = "10.79.0.$peer"
weight_out = 100
weight_in = 100
window = 1
status = "up"
EOF
}

# ticks PID: user + system clock ticks the process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# iperf LOG ADDR: one TCP stream for DURATION s from A to ADDR; prints
# "GBIT_PER_S GBIT_RECEIVED" from the receiver's summary in iperf3 -J.
iperf() {
    local log=$1 addr=$2
    ip netns exec "$A" iperf3 -c "$addr" -t "$DURATION" -J >"$log" 2>&1 || {
        echo "iperf3 to $addr failed; see $log" >&2
        return 1
    }
    python3 - "$log" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print("%.3f %.3f" % (r["bits_per_second"] / 1e9, r["bytes"] * 8 / 1e9))
PY
}

# encrypted SOCKET: 1 if the first connection's session is encrypted and
# established, else 0 (asked over the control socket).
encrypted() {
    python3 - "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b'{"version":1,"request":"status"}\n')
buf = b""
while not buf.endswith(b"\n"):
    part = s.recv(65536)
    if not part:
        break
    buf += part
reply = json.loads(buf)
if not reply.get("ok"):
    sys.exit("status request failed: %s" % reply.get("error"))
ses = reply["status"]["connections"][0]["session"]
print(1 if ses["encrypted"] and ses["established"] else 0)
PY
}

# up_tunnel MODE TAG: starts both daemons for MODE, waits for the tunnel
# and checks the session state. Sets DAEMON_A, DAEMON_B.
up_tunnel() {
    local mode=$1 tag=$2 kind=${1%%:*} threads=${1##*:} key="" want=0 side
    [[ "$kind" == enc ]] && { key="$KEY"; want=1; }
    config 1 "$threads" "$key" "$WORK/$tag-a.sock" >"$WORK/$tag-a.toml"
    config 2 "$threads" "$key" "$WORK/$tag-b.sock" >"$WORK/$tag-b.toml"
    ip netns exec "$A" "$MPTD" --config "$WORK/$tag-a.toml" >"$WORK/$tag-a.log" 2>&1 &
    DAEMON_A=$!; PIDS+=("$DAEMON_A")
    ip netns exec "$B" "$MPTD" --config "$WORK/$tag-b.toml" >"$WORK/$tag-b.log" 2>&1 &
    DAEMON_B=$!; PIDS+=("$DAEMON_B")
    for _ in $(seq 100); do
        ip -n "$A" link show mpt0 >/dev/null 2>&1 && ip -n "$B" link show mpt0 >/dev/null 2>&1 && break
        if ! kill -0 "$DAEMON_A" 2>/dev/null || ! kill -0 "$DAEMON_B" 2>/dev/null; then
            echo "mptd exited during start-up ($mode)" >&2
            exit 1
        fi
        sleep 0.1
    done
    # One successful connection to the iperf3 server through the tunnel
    # (probe once only: iperf3 reopens its listener after each client).
    local reached=0
    for _ in $(seq 150); do
        if ip netns exec "$A" timeout 1 bash -c 'exec 3<>/dev/tcp/192.168.79.2/5201' 2>/dev/null; then
            reached=1
            break
        fi
        sleep 0.1
    done
    (( reached )) || { echo "no TCP connection through the tunnel within 15 s ($mode)" >&2; exit 1; }
    sleep 0.2
    for side in a b; do
        if [[ "$(encrypted "$WORK/$tag-$side.sock")" != "$want" ]]; then
            echo "side $side: session state is not what $mode expects (encrypted+established = $want)" >&2
            exit 1
        fi
    done
}

down_tunnel() {
    halt "$DAEMON_A" "$DAEMON_B"
    forget "$DAEMON_A" "$DAEMON_B"
    for _ in $(seq 50); do
        ip -n "$A" link show mpt0 >/dev/null 2>&1 || ip -n "$B" link show mpt0 >/dev/null 2>&1 || break
        sleep 0.1
    done
}

# measure MODE RUN [PERF_FILE]: one measurement; appends
# "MODE RUN GBPS GBIT CPU_S" to $WORK/results.
measure() {
    local mode=$1 run=$2 perf_file=${3:-} tag out gbps gbit cpu="-" a0 b0 a1 b1 perf_pid=""
    tag="${mode/:/}-$run"
    if [[ "$mode" == raw ]]; then
        out="$(iperf "$WORK/iperf-$tag.json" 10.79.0.2)"
        read -r gbps gbit <<<"$out"
        printf '    run %-4s %-8s %7s Gbit/s\n' "$run" "$mode" "$gbps"
    else
        up_tunnel "$mode" "$tag"
        if [[ -n "$perf_file" ]]; then
            perf record -g --call-graph "$PERF_CALLGRAPH" -F 499 -p "$DAEMON_A,$DAEMON_B" \
                -o "$perf_file" -- sleep "$DURATION" >"$WORK/perf.log" 2>&1 &
            perf_pid=$!; PIDS+=("$perf_pid")
            sleep 0.3
        fi
        a0=$(ticks "$DAEMON_A"); b0=$(ticks "$DAEMON_B")
        out="$(iperf "$WORK/iperf-$tag.json" 192.168.79.2)"
        a1=$(ticks "$DAEMON_A"); b1=$(ticks "$DAEMON_B")
        if [[ -n "$perf_pid" ]]; then
            wait "$perf_pid" || { echo "perf record failed; see $WORK/perf.log" >&2; exit 1; }
            forget "$perf_pid"
        fi
        read -r gbps gbit <<<"$out"
        cpu="$(awk -v t=$(( a1 - a0 + b1 - b0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')"
        printf '    run %-4s %-8s %7s Gbit/s  %7s Gbit  mptd CPU %6s s  %6s CPU s/Gbit\n' \
            "$run" "$mode" "$gbps" "$gbit" "$cpu" \
            "$(awk -v c="$cpu" -v g="$gbit" 'BEGIN { printf "%.3f", (g > 0 ? c / g : 0) }')"
        down_tunnel
    fi
    [[ -z "$perf_file" ]] && echo "$mode $run $gbps $gbit $cpu" >>"$WORK/results"
    return 0
}

# median V...: the middle value (mean of the two middle ones if even).
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- the run -----------------------------------------------------------------------
A="$TAG-a"; B="$TAG-b"
ip netns add "$A"; NAMESPACES+=("$A")
ip netns add "$B"; NAMESPACES+=("$B")
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" link add va0 type veth peer name vb0 netns "$B"
ip -n "$A" addr add 10.79.0.1/24 dev va0
ip -n "$B" addr add 10.79.0.2/24 dev vb0
ip -n "$A" link set va0 up
ip -n "$B" link set vb0 up
ip netns exec "$B" iperf3 -s >"$WORK/iperf3-server.log" 2>&1 &
PIDS+=("$!")
sleep 0.3
: >"$WORK/results"

say "modes ${MODES[*]}: $RUNS run(s) each, ${DURATION} s, one TCP stream, order rotating"
N=${#MODES[@]}
for (( r = 1; r <= RUNS; r++ )); do
    for (( i = 0; i < N; i++ )); do
        measure "${MODES[(i + r - 1) % N]}" "$r"
    done
done
if [[ -n "$PERF_OUT" ]]; then
    say "extra run of $PERF_MODE under perf record (not in the medians): $PERF_OUT"
    measure "$PERF_MODE" perf "$PERF_OUT"
fi

echo
echo "One TCP stream (iperf3, ${DURATION} s), 1 veth path, tunnel MTU 1400, $(nproc) cores; medians of $RUNS:"
printf '%-9s %10s %10s %14s   %s\n' mode "Gbit/s" "of raw" "CPU s/Gbit" "runs Gbit/s"
RAW_MED=""
for m in "${MODES[@]}"; do
    [[ "$m" == raw ]] && RAW_MED="$(median $(awk '$1 == "raw" { print $3 }' "$WORK/results"))"
done
for m in "${MODES[@]}"; do
    g="$(median $(awk -v m="$m" '$1 == m { print $3 }' "$WORK/results"))"
    runs="$(awk -v m="$m" '$1 == m { printf "%s%s", s, $3; s = "," }' "$WORK/results")"
    of="-"
    [[ -n "$RAW_MED" && "$m" != raw ]] && of="$(awk -v g="$g" -v r="$RAW_MED" 'BEGIN { printf "%.2f", (r > 0 ? g / r : 0) }')"
    per="-"
    [[ "$m" != raw ]] && per="$(median $(awk -v m="$m" '$1 == m && $4 > 0 { printf "%.4f\n", $5 / $4 }' "$WORK/results"))"
    printf '%-9s %10s %10s %14s   %s\n' "$m" "$g" "$of" "$per" "$runs"
done
