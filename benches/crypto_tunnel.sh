#!/usr/bin/env bash
# crypto_tunnel.sh: single-stream TCP throughput through mpt with encryption
# off (no key_file) and on (the same key_file on both sides), in one run.
#
#   sudo benches/crypto_tunnel.sh [--paths 1,2] [--duration 5] [--runs 3]
#
# For each path count N it builds two network namespaces joined by N veth
# pairs (10.78.<i>.1/24 <-> 10.78.<i>.2/24), as scripts/demo.sh does, then
# runs iperf3 (single TCP stream, DURATION s) through the tunnel
# (192.168.78.1 <-> 192.168.78.2, MTU 1400) RUNS times per mode. The modes
# alternate (off/on, on/off, ...) with the daemons restarted in between, so
# a drift of the machine does not favour one mode. Before each measurement
# the control socket must report the mode: encrypted and established, or
# not encrypted. Prints every run, then the medians and the on/off ratio.
# Namespaces, daemons and temp files go on every exit (trap EXIT INT TERM).
#
# Environment: MPTD_BIN (default: <target dir>/release/mptd after building),
# CARGO_TARGET_DIR (default: target), MPT_SKIP_BUILD=1 to skip cargo.
set -euo pipefail

PATHS_LIST="1,2"
DURATION=5
RUNS=3

usage() {
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --paths) PATHS_LIST="${2:?--paths needs a list, e.g. 1,2}"; shift 2 ;;
        --paths=*) PATHS_LIST="${1#*=}"; shift ;;
        --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
        --duration=*) DURATION="${1#*=}"; shift ;;
        --runs) RUNS="${2:?--runs needs a count}"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
[[ "$PATHS_LIST" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "--paths: expected a list like 1,2, got '$PATHS_LIST'" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || { echo "--duration: expected whole seconds >= 1, got '$DURATION'" >&2; exit 2; }
[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || { echo "--runs: expected a count >= 1, got '$RUNS'" >&2; exit 2; }
IFS=, read -r -a PATH_COUNTS <<<"$PATHS_LIST"
for n in "${PATH_COUNTS[@]}"; do
    (( n >= 1 && n <= 64 )) || { echo "--paths: each count must be 1..64, got $n" >&2; exit 2; }
done

if [[ $EUID -ne 0 ]]; then
    echo "crypto_tunnel.sh needs root (network namespaces): sudo $0 $*" >&2
    exit 1
fi

say() { printf '==> %s\n' "$*"; }

# --- state for cleanup -------------------------------------------------------
TAG="mptcrypto-$$"
WORK="$(mktemp -d "/tmp/${TAG}.XXXXXX")"
NAMESPACES=()
PIDS=()       # live processes we started (iperf3 server, mptd)
DAEMONS=()    # the two mptd of the current run (also in PIDS)

# stop_pids PID...: TERM, up to 3 s of grace, then KILL; reaps them.
stop_pids() {
    local p
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pids "${PIDS[@]}"
    local ns
    for ns in "${NAMESPACES[@]}"; do
        ip netns delete "$ns" 2>/dev/null || true
    done
    if [[ $rc -ne 0 ]]; then
        echo "crypto_tunnel failed (exit $rc); logs kept in $WORK" >&2
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

# --- prerequisites -------------------------------------------------------------
cd "$(dirname "$0")/.."
for tool in iperf3 ip python3; do
    command -v "$tool" >/dev/null 2>&1 && continue
    say "installing iperf3, iproute2 and python3"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iproute2 python3 >/dev/null
    break
done

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [[ "${MPT_SKIP_BUILD:-0}" != 1 && -z "${MPTD_BIN:-}" ]]; then
    say "building: cargo build --release -p mptd -p mpt-cli"
    cargo build --release -p mptd -p mpt-cli
fi
MPTD="${MPTD_BIN:-$TARGET_DIR/release/mptd}"
[[ -x "$MPTD" ]] || { echo "mptd not found at $MPTD: build it first: cargo build --release -p mptd" >&2; exit 1; }
MPTD="$(cd "$(dirname "$MPTD")" && pwd)/$(basename "$MPTD")"
MPT_CLI="$(dirname "$MPTD")/mpt"
CLK_TCK="$(getconf CLK_TCK)"

# The one key both sides read: 32 random bytes in base64, mode 0600.
KEY="$WORK/psk.key"
if [[ -x "$MPT_CLI" ]] && "$MPT_CLI" genkey "$KEY" >/dev/null 2>&1; then
    :
else
    rm -f "$KEY"
    (umask 077; head -c 32 /dev/urandom | base64 >"$KEY")
fi
chmod 600 "$KEY"

# --- helpers -------------------------------------------------------------------
# write_config SIDE(1|2) N CONTROL KEY_FILE(or empty)
write_config() {
    local me=$1 n=$2 control=$3 key=$4 peer=$(( 3 - $1 )) i
    cat <<EOF
[daemon]
control = "$control"
log = "info"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "192.168.78.$me/24"

[[connection]]
name = "peer"
peer_ipv4 = "192.168.78.$peer"
networks = []
port = 65023
remote_port = 65023
keepalive = "500ms"
dead_timer = "1500ms"
scheduler = "weighted"
EOF
    [[ -n "$key" ]] && echo "key_file = \"$key\""
    for (( i = 0; i < n; i++ )); do
        cat <<EOF

[[connection.path]]
name = "p$i"
local = "10.78.$i.$me"
remote = "10.78.$i.$peer"
weight_out = 100
weight_in = 100
window = 1
status = "up"
EOF
    done
}

# cpu_ticks PID: user+system clock ticks used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# iperf_gbps NS SERVER_ADDR LOG: single TCP stream for DURATION s; prints
# the receiver's rate in Gbit/s (parsed from iperf3 -J without jq).
iperf_gbps() {
    local ns=$1 addr=$2 log=$3
    ip netns exec "$ns" iperf3 -c "$addr" -t "$DURATION" -J >"$log" 2>&1 || {
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

# session SOCKET: "encrypted established handshakes auth_drops replay_drops"
# of the first connection, from the control socket's status request.
session() {
    python3 - "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b'{"version":1,"request":"status"}\n')
buf = b""
while not buf.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
r = json.loads(buf)
if not r.get("ok"):
    sys.exit("status request failed: %s" % r.get("error"))
c = r["status"]["connections"][0]
ses, drops = c["session"], c["drops"]
print(int(ses["encrypted"]), int(ses["established"]), ses["handshakes"],
      drops["auth"], drops["replay"])
PY
}

# median V...: the middle value (mean of the two middle ones if even).
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_mode N MODE(off|on) RUN: starts both daemons in MODE, checks the
# session state, measures once, stops the daemons. Appends to the result
# arrays GBPS_<mode> and CPU_<mode>.
run_mode() {
    local n=$1 mode=$2 run=$3 key="" a b pid_a pid_b enc est hs auth rep
    [[ "$mode" == on ]] && key="$KEY"
    a="$WORK/a-$n-$mode-$run"; b="$WORK/b-$n-$mode-$run"
    write_config 1 "$n" "$a.sock" "$key" >"$a.toml"
    write_config 2 "$n" "$b.sock" "$key" >"$b.toml"
    ip netns exec "$A" "$MPTD" --config "$a.toml" >"$a.log" 2>&1 &
    pid_a=$!; PIDS+=("$pid_a")
    ip netns exec "$B" "$MPTD" --config "$b.toml" >"$b.log" 2>&1 &
    pid_b=$!; PIDS+=("$pid_b")
    DAEMONS=("$pid_a" "$pid_b")
    for _ in $(seq 100); do
        ip -n "$A" link show mpt0 >/dev/null 2>&1 && ip -n "$B" link show mpt0 >/dev/null 2>&1 && break
        if ! kill -0 "$pid_a" 2>/dev/null || ! kill -0 "$pid_b" 2>/dev/null; then
            echo "mptd exited during start-up" >&2
            exit 1
        fi
        sleep 0.1
    done
    ip -n "$A" link show mpt0 >/dev/null 2>&1 || { echo "mpt0 did not appear in $A" >&2; exit 1; }
    ip -n "$B" link show mpt0 >/dev/null 2>&1 || { echo "mpt0 did not appear in $B" >&2; exit 1; }
    wait_tunnel "$A" 192.168.78.2

    local side sock
    for side in A B; do
        sock="$a.sock"; [[ $side == B ]] && sock="$b.sock"
        read -r enc est hs auth rep <<<"$(session "$sock")"
        if [[ "$mode" == on && ( "$enc" != 1 || "$est" != 1 ) ]]; then
            echo "side $side: key_file set but session encrypted=$enc established=$est" >&2
            exit 1
        fi
        if [[ "$mode" == off && "$enc" != 0 ]]; then
            echo "side $side: no key_file but session reports encrypted" >&2
            exit 1
        fi
    done

    local c_a0 c_b0 c_a1 c_b1 t0 t1 g cpu
    c_a0=$(cpu_ticks "$pid_a"); c_b0=$(cpu_ticks "$pid_b"); t0=$(date +%s.%N)
    g="$(iperf_gbps "$A" 192.168.78.2 "$WORK/iperf3-$n-$mode-$run.json")"
    c_a1=$(cpu_ticks "$pid_a"); c_b1=$(cpu_ticks "$pid_b"); t1=$(date +%s.%N)
    cpu="$(awk -v a=$(( c_a1 - c_a0 )) -v b=$(( c_b1 - c_b0 )) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
        'BEGIN { printf "%.0f/%.0f", 100 * a / hz / (t1 - t0), 100 * b / hz / (t1 - t0) }')"
    # Receiver-side drops after the run: an encrypted tunnel must not lose
    # datagrams to authentication or replay checks on clean veths.
    read -r enc est hs auth rep <<<"$(session "$b.sock")"
    printf '    run %d %-3s %7s Gbit/s  mptd CPU A/B %7s %%  (B: handshakes %s, auth drops %s, replay drops %s)\n' \
        "$run" "$mode" "$g" "$cpu" "$hs" "$auth" "$rep"
    if [[ "$mode" == on ]]; then GBPS_ON+=("$g"); CPU_ON+=("$cpu"); else GBPS_OFF+=("$g"); CPU_OFF+=("$cpu"); fi

    stop_pids "${DAEMONS[@]}"
    local keep=() p
    for p in "${PIDS[@]}"; do
        [[ "$p" == "$pid_a" || "$p" == "$pid_b" ]] || keep+=("$p")
    done
    PIDS=("${keep[@]}")
    DAEMONS=()
    # The tun devices go with the daemons; wait so the next run can make them.
    for _ in $(seq 50); do
        ip -n "$A" link show mpt0 >/dev/null 2>&1 || ip -n "$B" link show mpt0 >/dev/null 2>&1 || break
        sleep 0.1
    done
}

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
        ip -n "$A" addr add "10.78.$i.1/24" dev "va$i"
        ip -n "$B" addr add "10.78.$i.2/24" dev "vb$i"
        ip -n "$A" link set "va$i" up
        ip -n "$B" link set "vb$i" up
    done
    ip netns exec "$B" iperf3 -s >"$WORK/iperf3-server-$n.log" 2>&1 &
    PIDS+=("$!")

    GBPS_OFF=(); GBPS_ON=(); CPU_OFF=(); CPU_ON=()
    say "N=$n: $RUNS run(s) per mode, ${DURATION} s each, modes alternating"
    for (( r = 1; r <= RUNS; r++ )); do
        if (( r % 2 )); then order=(off on); else order=(on off); fi
        for mode in "${order[@]}"; do
            run_mode "$n" "$mode" "$r"
        done
    done
    OFF="$(median "${GBPS_OFF[@]}")"; ON="$(median "${GBPS_ON[@]}")"
    RATIO="$(awk -v on="$ON" -v off="$OFF" 'BEGIN { printf "%.2f", (off > 0 ? on / off : 0) }')"
    RESULTS+=("$n $OFF $ON $RATIO $(IFS=,; echo "${GBPS_OFF[*]}") $(IFS=,; echo "${GBPS_ON[*]}") $(IFS=,; echo "${CPU_OFF[*]}") $(IFS=,; echo "${CPU_ON[*]}")")

    say "N=$n: tearing down"
    stop_pids "${PIDS[@]}"
    PIDS=()
    for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    NAMESPACES=()
done

echo
echo "Single-stream TCP (iperf3, ${DURATION} s, median of $RUNS), tunnel MTU 1400, unshaped veths, $(nproc) cores:"
printf '%-6s %12s %12s %7s   %-22s %-22s\n' paths "off Gbit/s" "on Gbit/s" "on/off" "runs off" "runs on"
for r in "${RESULTS[@]}"; do
    read -r n off on ratio roff ron _ _ <<<"$r"
    printf '%-6s %12s %12s %7s   %-22s %-22s\n' "$n" "$off" "$on" "$ratio" "$roff" "$ron"
done
echo
echo "mptd CPU % (side A/side B) per run:"
for r in "${RESULTS[@]}"; do
    read -r n _ _ _ _ _ coff con <<<"$r"
    printf '  paths %-3s off %-28s on %s\n' "$n" "$coff" "$con"
done
