#!/usr/bin/env bash
# raw_paths.sh: what the like-paths testbed carries without the tunnel, all
# paths at once: the control for `mpt bench conf/scenarios/like-paths.toml`.
#
#   sudo benches/raw_paths.sh [--paths 12] [--duration 10] [--runs 1]
#
# The like-paths scenario compares 4 TCP streams through mpt over N
# tbf-shaped veth paths with N times 4 streams over one path alone. That
# ratio is only fair if the machine can carry N shaped paths at once: on a
# 2-core machine 2N tbf qdiscs, their timers and the veth softirqs might
# fall behind and cap the paths below their rate whatever the tunnel does.
# This script measures exactly that, with no tunnel:
#   one:  iperf3 -P 4 over path 0 alone (the scenario's baseline);
#   all:  N iperf3 clients at once, one stream each, each over its own path.
# and prints all / (N x one) per run. The paths are shaped as in the
# scenario: tbf rate 100mbit burst 32kbit latency 50ms on both veth ends.
#
# Namespaces rawpaths-<pid>-{a,b} (10.77.<i>.1 <-> 10.77.<i>.2) and the
# iperf3 servers are removed on every exit (trap EXIT INT TERM). Only
# addresses inside them are used.
set -euo pipefail

PATHS=12
DURATION=10
RUNS=1

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --paths) PATHS="${2:?--paths needs a count}"; shift 2 ;;
        --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
        --runs) RUNS="${2:?--runs needs a count}"; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
[[ "$PATHS" =~ ^[0-9]+$ && "$PATHS" -ge 1 && "$PATHS" -le 32 ]] || { echo "--paths: expected 1..32, got '$PATHS'" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || { echo "--duration: expected whole seconds >= 1, got '$DURATION'" >&2; exit 2; }
[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || { echo "--runs: expected a count >= 1, got '$RUNS'" >&2; exit 2; }
if [[ $EUID -ne 0 ]]; then
    echo "raw_paths.sh needs root (network namespaces): sudo $0 $*" >&2
    exit 1
fi
command -v iperf3 >/dev/null || { echo "raw_paths.sh needs iperf3 (apt-get install iperf3)" >&2; exit 1; }

A="rawpaths-$$-a"
B="rawpaths-$$-b"
WORK="$(mktemp -d "/tmp/rawpaths-$$.XXXXXX")"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT INT TERM

ip netns add "$A"
ip netns add "$B"
for (( i = 0; i < PATHS; i++ )); do
    ip -n "$A" link add "va$i" type veth peer name "vb$i" netns "$B"
    ip -n "$A" addr add "10.77.$i.1/24" dev "va$i"
    ip -n "$B" addr add "10.77.$i.2/24" dev "vb$i"
    ip -n "$A" link set "va$i" up
    ip -n "$B" link set "vb$i" up
    tc -n "$A" qdisc add dev "va$i" root tbf rate 100mbit burst 32kbit latency 50ms
    tc -n "$B" qdisc add dev "vb$i" root tbf rate 100mbit burst 32kbit latency 50ms
    ip netns exec "$B" iperf3 -s -p $(( 6100 + i )) -D >/dev/null
done
sleep 1

# received_mbps FILE: the receiver's goodput of an iperf3 JSON report.
received_mbps() {
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' "$1"
}

for (( r = 1; r <= RUNS; r++ )); do
    ip netns exec "$A" iperf3 -c 10.77.0.2 -p 6100 -P 4 -t "$DURATION" -J >"$WORK/one.json"
    one="$(received_mbps "$WORK/one.json")"
    pids=()
    for (( i = 0; i < PATHS; i++ )); do
        ip netns exec "$A" iperf3 -c "10.77.$i.2" -p $(( 6100 + i )) -t "$DURATION" -J >"$WORK/all-$i.json" &
        pids+=($!)
    done
    wait "${pids[@]}"
    all=0
    for (( i = 0; i < PATHS; i++ )); do
        all="$(awk -v a="$all" -v b="$(received_mbps "$WORK/all-$i.json")" 'BEGIN { print a + b }')"
    done
    awk -v r="$r" -v one="$one" -v all="$all" -v n="$PATHS" 'BEGIN {
        printf "run %d: one path, 4 streams %.1f Mbit/s; %d paths at once %.1f Mbit/s = %.3f of %d x one\n",
            r, one, n, all, all / (n * one), n }'
done
