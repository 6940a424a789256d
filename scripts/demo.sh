#!/usr/bin/env bash
# demo.sh: what mpt is for, in two parts.
#
# Part 1 (uplinks, about two minutes): one TCP stream over emulated uplinks
# that differ: DSL + LTE + a GEO satellite, and a WiFi that goes silent for
# 3 s beside LTE. Each path alone, then through mpt, then kernel MPTCP
# over the same paths (when the kernel has it; mptcpize is installed with
# apt-get if missing), then mpt with TCP acceleration (split at the
# gateway, docs/ACCELERATION.md; needs nft), side by side:
# `mpt bench conf/scenarios/demo.toml`.
# The table, results.json/csv and a chart (plot.svg) go to --out (default
# bench-out/demo-<UTC time>); the chart's path is printed at the end.
#
# Part 2 (LAN speed): TCP throughput through mpt over N unshaped veth
# paths, in clear and encrypted, next to the raw veth throughput measured
# in the same run (the CPU is the limit here, not the paths).
#
#   sudo scripts/demo.sh [--part all|uplinks|lan] [--out DIR]
#                        [--paths 1,2,4] [--duration 5] [--streams 1]
#                        [--modes clear,encrypted,chacha] [--key]
#                        [--scheduler adaptive|weighted]
#
# --part picks the parts (default all). The other options are part 2's:
# --streams S runs S parallel TCP streams (iperf3 -P S), through the tunnel
# and over raw veth alike. --modes picks the tunnel runs: clear (no key),
# encrypted (both sides get the same freshly generated key_file, mode 600:
# the PSK handshake, then the default cipher AES-256-GCM on every
# datagram) and chacha (the same with cipher = "chacha20-poly1305"); the
# default is clear,encrypted; --key is short for --modes encrypted.
# --scheduler sets the connection's scheduler on both sides: adaptive (the
# default, as in mptd) or weighted (round robin by weight, window 1: MPT's
# striping, one packet per path in turn).
#
# For each N it builds two network namespaces joined by N veth pairs
# (10.77.<i>.1/24 <-> 10.77.<i>.2/24), runs mptd in each (tunnel
# 192.168.77.1 <-> 192.168.77.2, MTU 1400), measures iperf3 through the
# tunnel and over veth 0 directly, and prints a table plus per-path packet
# counters. Only addresses inside its own namespaces are used. Namespaces,
# daemons and temp files are removed on every exit (trap EXIT INT TERM).
#
# Environment: MPTD_BIN (default: <target dir>/release/mptd after building),
# CARGO_TARGET_DIR (default: target), MPT_DEMO_SKIP_BUILD=1 to skip cargo.
set -euo pipefail

PATHS_LIST="1,2,4"
DURATION=5
STREAMS=1
MODES="clear,encrypted"
SCHEDULER="adaptive"
PART="all"
OUT=""

usage() {
    sed -n '2,42p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --paths) PATHS_LIST="${2:?--paths needs a list, e.g. 1,2,4}"; shift 2 ;;
        --paths=*) PATHS_LIST="${1#*=}"; shift ;;
        --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
        --duration=*) DURATION="${1#*=}"; shift ;;
        --streams) STREAMS="${2:?--streams needs a count}"; shift 2 ;;
        --streams=*) STREAMS="${1#*=}"; shift ;;
        --modes) MODES="${2:?--modes needs a list, e.g. clear,encrypted}"; shift 2 ;;
        --modes=*) MODES="${1#*=}"; shift ;;
        --key) MODES="encrypted"; shift ;;
        --scheduler) SCHEDULER="${2:?--scheduler needs adaptive or weighted}"; shift 2 ;;
        --scheduler=*) SCHEDULER="${1#*=}"; shift ;;
        --part) PART="${2:?--part needs all, uplinks or lan}"; shift 2 ;;
        --part=*) PART="${1#*=}"; shift ;;
        --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
        --out=*) OUT="${1#*=}"; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
[[ "$PATHS_LIST" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "--paths: expected a list like 1,2,4, got '$PATHS_LIST'" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || { echo "--duration: expected whole seconds >= 1, got '$DURATION'" >&2; exit 2; }
[[ "$STREAMS" =~ ^[0-9]+$ && "$STREAMS" -ge 1 && "$STREAMS" -le 128 ]] || { echo "--streams: expected 1..128, got '$STREAMS'" >&2; exit 2; }
[[ "$MODES" =~ ^(clear|encrypted|chacha)(,(clear|encrypted|chacha))*$ ]] || { echo "--modes: expected a list of clear, encrypted, chacha (e.g. clear,encrypted), got '$MODES'" >&2; exit 2; }
[[ "$SCHEDULER" == adaptive || "$SCHEDULER" == weighted ]] || { echo "--scheduler: expected adaptive or weighted, got '$SCHEDULER'" >&2; exit 2; }
[[ "$PART" == all || "$PART" == uplinks || "$PART" == lan ]] || { echo "--part: expected all, uplinks or lan, got '$PART'" >&2; exit 2; }
IFS=, read -r -a PATH_COUNTS <<<"$PATHS_LIST"
IFS=, read -r -a MODE_LIST <<<"$MODES"
for n in "${PATH_COUNTS[@]}"; do
    (( n >= 1 && n <= 64 )) || { echo "--paths: each count must be 1..64, got $n" >&2; exit 2; }
done

if [[ $EUID -ne 0 ]]; then
    echo "demo.sh needs root (network namespaces): sudo $0 $*" >&2
    exit 1
fi

say() { printf '==> %s\n' "$*"; }

# --- state for cleanup -------------------------------------------------------
TAG="mptdemo-$$"
WORK="$(mktemp -d "/tmp/${TAG}.XXXXXX")"
NAMESPACES=()
PIDS=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local p
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    local ns
    for ns in "${NAMESPACES[@]}"; do
        ip netns delete "$ns" 2>/dev/null || true
    done
    if [[ $rc -ne 0 ]]; then
        echo "demo failed (exit $rc); logs kept in $WORK" >&2
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
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Stops and forgets every process and namespace of the current round.
teardown_round() {
    local p ns
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    PIDS=()
    for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    NAMESPACES=()
}

# --- prerequisites -------------------------------------------------------------
cd "$(dirname "$0")/.."
if ! command -v iperf3 >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    say "installing iperf3 and iproute2"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iproute2 >/dev/null
fi

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [[ "${MPT_DEMO_SKIP_BUILD:-0}" != 1 ]]; then
    say "building: cargo build --release --bins"
    cargo build --release --bins
fi
MPTD="${MPTD_BIN:-$TARGET_DIR/release/mptd}"
[[ -x "$MPTD" ]] || { echo "mptd not found at $MPTD: build it first: cargo build --release --bins" >&2; exit 1; }
MPTD="$(cd "$(dirname "$MPTD")" && pwd)/$(basename "$MPTD")"
MPT_CLI="$(dirname "$MPTD")/mpt"
CLK_TCK="$(getconf CLK_TCK)"

# --- part 1: unlike uplinks, each alone, mpt, kernel MPTCP ---------------------
PLOT=""
if [[ "$PART" != lan ]]; then
    if ! command -v mptcpize >/dev/null 2>&1; then
        say "installing mptcpize (runs iperf3 over kernel MPTCP, the baseline beside mpt)"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mptcpize >/dev/null 2>&1; then
            apt-get update -qq || true
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mptcpize >/dev/null \
                || say "could not install mptcpize (apt-get install -y mptcpize): no MPTCP column"
        fi
    fi
    if ! command -v nft >/dev/null 2>&1; then
        say "installing nftables (mptd steers accelerated TCP flows with an nft tproxy rule)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null 2>&1 \
            || say "could not install nftables (apt-get install -y nftables): no accelerated column"
    fi
    [[ -x "$MPT_CLI" ]] || { echo "mpt not found at $MPT_CLI: build it first: cargo build --release --bins" >&2; exit 1; }
    OUT="${OUT:-bench-out/demo-$(date -u +%Y%m%d-%H%M%S)}"
    say "part 1: one TCP stream over unlike uplinks: each path alone, mpt, mpt accelerated, kernel MPTCP (about 3 minutes)"
    "$MPT_CLI" bench conf/scenarios/demo.toml --mptd "$MPTD" --out "$OUT" --baseline auto
    PLOT="$(cd "$OUT" && pwd)/plot.svg"
    echo "chart: $PLOT"
    if [[ "$PART" == uplinks ]]; then
        exit 0
    fi
fi

# --- part 2: LAN speed over unshaped veths -----------------------------------------
say "part 2: LAN speed: TCP through mpt over unshaped veth paths (the CPU is the limit)"

# --- helpers -------------------------------------------------------------------
# write_config SIDE(1|2) N CONTROL MODE
write_config() {
    local me=$1 n=$2 control=$3 mode=$4 peer=$(( 3 - $1 )) i
    cat <<EOF
[daemon]
control = "$control"
log = "info"
$( [[ "$mode" == chacha ]] && echo 'cipher = "chacha20-poly1305"' )

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "192.168.77.$me/24"

[[connection]]
name = "peer"
peer_ipv4 = "192.168.77.$peer"
networks = []
port = 65022
remote_port = 65022
keepalive = "500ms"
dead_timer = "1500ms"
scheduler = "$SCHEDULER"
EOF
    if [[ "$mode" == encrypted || "$mode" == chacha ]]; then
        echo "key_file = \"$WORK/psk.key\""
    fi
    for (( i = 0; i < n; i++ )); do
        cat <<EOF

[[connection.path]]
name = "p$i"
local = "10.77.$i.$me"
remote = "10.77.$i.$peer"
weight_out = 100
weight_in = 100
window = 1
status = "up"
EOF
    done
}

# cpu_ticks PID: user+system clock ticks used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# iperf_gbps NS SERVER_ADDR LOG: STREAMS TCP streams for DURATION s; prints
# the receiver's rate in Gbit/s (parsed from iperf3 -J without jq).
iperf_gbps() {
    local ns=$1 addr=$2 log=$3
    ip netns exec "$ns" iperf3 -c "$addr" -t "$DURATION" -P "$STREAMS" -J >"$log" 2>&1 || {
        echo "iperf3 to $addr failed; see $log" >&2
        return 1
    }
    awk '/"sum_received"/ { f = 1 }
         f && /"bits_per_second"/ { gsub(/[^0-9.eE+-]/, "", $2); printf "%.3f\n", $2 / 1e9; exit }' \
        FS=: "$log"
}

# wait_tunnel NS ADDR: until a TCP connection to ADDR:5201 (the iperf3
# server) succeeds through the tunnel, or 15 s.
wait_tunnel() {
    local ns=$1 addr=$2
    for _ in $(seq 150); do
        if ip netns exec "$ns" timeout 1 bash -c "exec 3<>/dev/tcp/$addr/5201" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "no TCP connection through the tunnel to $addr within 15 s" >&2
    return 1
}

veth_counter() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }

# 32 random bytes in base64, as `mpt genkey` writes them.
(umask 077; head -c 32 /dev/urandom | base64 >"$WORK/psk.key")

# --- rounds ----------------------------------------------------------------------
RESULTS=()
for n in "${PATH_COUNTS[@]}"; do
    say "N=$n: creating namespaces and $n veth pair(s)"
    A="$TAG-$n-a"; B="$TAG-$n-b"
    ip netns add "$A"; NAMESPACES+=("$A")
    ip netns add "$B"; NAMESPACES+=("$B")
    ip -n "$A" link set lo up
    ip -n "$B" link set lo up
    for (( i = 0; i < n; i++ )); do
        ip -n "$A" link add "va$i" type veth peer name "vb$i" netns "$B"
        ip -n "$A" addr add "10.77.$i.1/24" dev "va$i"
        ip -n "$B" addr add "10.77.$i.2/24" dev "vb$i"
        ip -n "$A" link set "va$i" up
        ip -n "$B" link set "vb$i" up
    done

    ip netns exec "$B" iperf3 -s >"$WORK/iperf3-server-$n.log" 2>&1 &
    PIDS+=("$!")
    sleep 0.3

    say "N=$n: raw veth baseline (iperf3 over va0, ${DURATION} s)"
    RAW="$(iperf_gbps "$A" 10.77.0.2 "$WORK/iperf3-raw-$n.json")"

    ROW="$n $RAW"
    for mode in "${MODE_LIST[@]}"; do
        say "N=$n: starting mptd in both namespaces ($mode)"
        write_config 1 "$n" "$WORK/a-$n.sock" "$mode" >"$WORK/a-$n-$mode.toml"
        write_config 2 "$n" "$WORK/b-$n.sock" "$mode" >"$WORK/b-$n-$mode.toml"
        ip netns exec "$A" "$MPTD" --config "$WORK/a-$n-$mode.toml" >"$WORK/mptd-a-$n-$mode.log" 2>&1 &
        PID_A=$!; PIDS+=("$PID_A")
        ip netns exec "$B" "$MPTD" --config "$WORK/b-$n-$mode.toml" >"$WORK/mptd-b-$n-$mode.log" 2>&1 &
        PID_B=$!; PIDS+=("$PID_B")
        for _ in $(seq 100); do
            ip -n "$A" link show mpt0 >/dev/null 2>&1 && ip -n "$B" link show mpt0 >/dev/null 2>&1 && break
            if ! kill -0 "$PID_A" 2>/dev/null || ! kill -0 "$PID_B" 2>/dev/null; then
                echo "mptd exited during start-up" >&2
                exit 1
            fi
            sleep 0.1
        done
        ip -n "$A" link show mpt0 >/dev/null 2>&1 || { echo "mpt0 did not appear in $A" >&2; exit 1; }
        wait_tunnel "$A" 192.168.77.2

        say "N=$n: through the tunnel, $mode (iperf3 to 192.168.77.2, ${DURATION} s)"
        declare -a TX0=() TXB0=()
        for (( i = 0; i < n; i++ )); do
            TX0[i]=$(veth_counter "$A" "va$i" tx_packets)
            TXB0[i]=$(veth_counter "$A" "va$i" tx_bytes)
        done
        CPU_A0=$(cpu_ticks "$PID_A"); CPU_B0=$(cpu_ticks "$PID_B"); T0=$(date +%s.%N)
        TUN="$(iperf_gbps "$A" 192.168.77.2 "$WORK/iperf3-tunnel-$n-$mode.json")"
        CPU_A1=$(cpu_ticks "$PID_A"); CPU_B1=$(cpu_ticks "$PID_B"); T1=$(date +%s.%N)

        echo "    per-path tx on side A during the tunnel run (kernel veth counters; a GSO batch counts as one packet):"
        for (( i = 0; i < n; i++ )); do
            d=$(( $(veth_counter "$A" "va$i" tx_packets) - TX0[i] ))
            db=$(( $(veth_counter "$A" "va$i" tx_bytes) - TXB0[i] ))
            printf '      p%-3s va%-3s %12d packets %10.1f MB\n' "$i" "$i" "$d" "$(awk -v b="$db" 'BEGIN { print b / 1e6 }')"
        done
        if [[ -x "$MPT_CLI" ]] && "$MPT_CLI" --socket "$WORK/a-$n.sock" status >"$WORK/status-$n-$mode.txt" 2>/dev/null; then
            echo "    mpt status (side A):"
            sed 's/^/      /' "$WORK/status-$n-$mode.txt"
        fi
        CPU="$(awk -v a=$(( CPU_A1 - CPU_A0 )) -v b=$(( CPU_B1 - CPU_B0 )) -v hz="$CLK_TCK" -v t0="$T0" -v t1="$T1" \
            'BEGIN { printf "%.0f/%.0f", 100 * a / hz / (t1 - t0), 100 * b / hz / (t1 - t0) }')"
        RATIO="$(awk -v t="$TUN" -v r="$RAW" 'BEGIN { printf "%.2f", (r > 0 ? t / r : 0) }')"
        printf '    %s: tunnel %s Gbit/s, raw veth %s Gbit/s, ratio %s, mptd CPU A/B %s %%\n' "$mode" "$TUN" "$RAW" "$RATIO" "$CPU"
        ROW="$ROW $mode $TUN $RATIO $CPU"

        for p in "$PID_A" "$PID_B"; do kill -TERM "$p" 2>/dev/null || true; done
        for p in "$PID_A" "$PID_B"; do
            for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        done
    done
    RESULTS+=("$ROW")

    say "N=$n: tearing down"
    teardown_round
done

echo
echo "TCP, $STREAMS stream(s) (iperf3 -P $STREAMS, ${DURATION} s), tunnel MTU 1400, unshaped veths, scheduler $SCHEDULER, $(nproc) cores;"
echo "ratio = tunnel / raw veth measured in the same round; encrypted = key_file (PSK handshake, AES-256-GCM), chacha = the same with ChaCha20-Poly1305:"
HEAD="$(printf '%-6s %16s' paths "raw veth Gbit/s")"
for mode in "${MODE_LIST[@]}"; do
    HEAD="$HEAD$(printf ' %17s %7s %10s' "$mode Gbit/s" ratio "CPU A/B %")"
done
echo "$HEAD"
for r in "${RESULTS[@]}"; do
    read -r -a f <<<"$r"
    line="$(printf '%-6s %16s' "${f[0]}" "${f[1]}")"
    for (( k = 2; k + 3 < ${#f[@]} + 1; k += 4 )); do
        line="$line$(printf ' %17s %7s %10s' "${f[k+1]}" "${f[k+2]}" "${f[k+3]}")"
    done
    echo "$line"
done
if [[ -n "$PLOT" ]]; then
    echo
    echo "part 1's chart (each uplink alone, mpt, kernel MPTCP): $PLOT"
fi
