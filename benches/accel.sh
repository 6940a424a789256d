#!/usr/bin/env bash
# accel.sh: TCP acceleration (issue 36) against kernel MPTCP, the plain
# tunnel and the raw paths, on the same `mpt emu` paths in the same run.
#
#   sudo benches/accel.sh [--rounds 3] [--duration 20] [--cc cubic,bbr]
#                         [--cases geo+dsl,lossy-wifi+lte] [--objects 10]
#                         [--legs pinned|single]   (default pinned)
#
#   C 10.78.0.2 (.3) ─ A ═╤═ a1 ─[E1: path 1]─ b1 ═╤═ B ─ S 10.79.0.2
#     (client host)   (mptd,                        (mptd,    (server host)
#                      accelerate)                   far end)
#                        └═ a2 ─[E2: path 2]─ b2 ═┘
#
# Cases (the emulator's settings each way, as conf/scenarios/unlike.toml):
#   geo+dsl         GEO 20 Mbit/s 300 ms 1500 kB queue; DSL 10 Mbit/s 12.5 ms 64 kB
#   lossy-wifi+lte  WiFi 50 Mbit/s 5 ms 320 kB, 1 % loss; LTE 20 Mbit/s 30 ms 150 kB
# Modes, each one TCP stream C -> S of DURATION s including slow start
# (iperf3 -C CC at the end hosts, -O 0):
#   raw1, raw2  over one path alone (policy rules at A and B route C's
#               addresses .2 and .3 over path 1 and path 2; mptd idle)
#   tunnel      through the tunnel (port 5201, not selected)
#   accel       through the tunnel, accelerated (port 5202, selected:
#               split at A, carried by BBR legs inside the tunnel: a set
#               of legs pinned one per path, or with --legs single one
#               leg striped by the tunnel; A's tx bytes on a1 and a2 are
#               printed)
#   mptcp       kernel MPTCP end to end (mptcpize), first subflow on path
#               1 (from .2), an endpoint .3 adds a subflow on path 2; A's
#               tx bytes on a1 and a2 prove both paths carried it
# Then OBJECTS 1 MB objects fetched one after another (a new connection
# each, as a page's fetches) per mode tunnel / accel / mptcp: the median
# completion time. Medians of ROUNDS; ratios accel / mptcp against the
# targets of issue 36. Namespaces, daemons and emulators go on every exit.
#
# Environment: MPTD_BIN, MPT_BIN (default <target dir>/release/{mptd,mpt},
# built first unless MPT_SKIP_BUILD=1), CARGO_TARGET_DIR.
set -euo pipefail

ROUNDS=3
DURATION=20
CC_LIST="cubic,bbr"
CASE_LIST="geo+dsl,lossy-wifi+lte"
OBJECTS=10
LEGS=pinned

usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS="${2:?}"; shift 2 ;;
        --duration) DURATION="${2:?}"; shift 2 ;;
        --cc) CC_LIST="${2:?}"; shift 2 ;;
        --cases) CASE_LIST="${2:?}"; shift 2 ;;
        --objects) OBJECTS="${2:?}"; shift 2 ;;
        --legs) LEGS="${2:?}"; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "--rounds: a count >= 1" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 2 ]] || { echo "--duration: whole seconds >= 2" >&2; exit 2; }
[[ "$OBJECTS" =~ ^[0-9]+$ ]] || { echo "--objects: a count" >&2; exit 2; }
[[ "$LEGS" == pinned || "$LEGS" == single ]] || { echo "--legs: pinned or single" >&2; exit 2; }
IFS=, read -r -a CCS <<<"$CC_LIST"
IFS=, read -r -a CASES <<<"$CASE_LIST"
for c in "${CASES[@]}"; do
    [[ "$c" == geo+dsl || "$c" == lossy-wifi+lte || "$c" == wifi+lte ]] || { echo "--cases: unknown case $c" >&2; exit 2; }
done
[[ $EUID -eq 0 ]] || { echo "accel.sh needs root (network namespaces): sudo $0" >&2; exit 1; }
for tool in iperf3 ip nft ethtool python3 mptcpize; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y iperf3 iproute2 nftables ethtool python3 mptcpize)" >&2; exit 1; }
done
say() { printf '==> %s\n' "$*" >&2; }

TAG="mptac-$$"
WORK="$(mktemp -d "/tmp/${TAG}.XXXXXX")"
NAMESPACES=()
PIDS=()
halt() {
    local p
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
on_exit() {
    local rc=$?
    trap - EXIT INT TERM
    (( ${#PIDS[@]} )) && halt "${PIDS[@]}"
    local ns
    for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    if [[ $rc -ne 0 ]]; then
        echo "accel.sh failed (exit $rc); logs kept in $WORK" >&2
        for f in "$WORK"/*.log; do [[ -s "$f" ]] && { echo "----- $f" >&2; tail -n 15 "$f" >&2; }; done
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$(dirname "$0")/.."
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [[ "${MPT_SKIP_BUILD:-0}" != 1 && -z "${MPTD_BIN:-}" ]]; then
    cargo build --release -p mptd -p mpt-cli --bins
fi
MPTD="$(realpath "${MPTD_BIN:-$TARGET_DIR/release/mptd}")"
MPT="$(realpath "${MPT_BIN:-$TARGET_DIR/release/mpt}")"

C="$TAG-c"; A="$TAG-a"; E1="$TAG-e1"; E2="$TAG-e2"; B="$TAG-b"; S="$TAG-s"
for ns in "$C" "$A" "$E1" "$E2" "$B" "$S"; do
    ip netns add "$ns"; NAMESPACES+=("$ns"); ip -n "$ns" link set lo up
done
veth() {
    ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
    [[ "$3" != - ]] && ip -n "$1" addr add "$3" dev "$2"
    [[ "$6" != - ]] && ip -n "$4" addr add "$6" dev "$5"
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true
    ip netns exec "$4" ethtool -K "$5" tso off gso off gro off >/dev/null 2>&1 || true
    ip -n "$1" link set "$2" up; ip -n "$4" link set "$5" up
}
veth "$C" up0 10.78.0.2/24 "$A" lan0 10.78.0.1/24
ip -n "$C" addr add 10.78.0.3/24 dev up0
veth "$A" a1 10.81.1.1/24 "$E1" e1a -
veth "$E1" e1b - "$B" b1 10.81.1.2/24
veth "$A" a2 10.81.2.1/24 "$E2" e2a -
veth "$E2" e2b - "$B" b2 10.81.2.2/24
veth "$B" wan0 10.79.0.1/24 "$S" eth0 10.79.0.2/24
ip -n "$C" route add default via 10.78.0.1
ip -n "$S" route add default via 10.79.0.1
for ns in "$A" "$B"; do
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0
done
# Raw-path routing tables (used only while the rules of raw_on exist).
ip -n "$A" route add 10.79.0.0/24 via 10.81.1.2 dev a1 table 101
ip -n "$A" route add 10.79.0.0/24 via 10.81.2.2 dev a2 table 102
ip -n "$B" route add 10.78.0.0/24 via 10.81.1.1 dev b1 table 101
ip -n "$B" route add 10.78.0.0/24 via 10.81.2.1 dev b2 table 102
raw_on() {
    ip -n "$A" rule add pref 100 from 10.78.0.2 to 10.79.0.0/24 lookup 101
    ip -n "$A" rule add pref 100 from 10.78.0.3 to 10.79.0.0/24 lookup 102
    ip -n "$B" rule add pref 100 to 10.78.0.2 lookup 101
    ip -n "$B" rule add pref 100 to 10.78.0.3 lookup 102
}
raw_off() {
    for ns in "$A" "$B"; do while ip -n "$ns" rule del pref 100 2>/dev/null; do :; done; done
}
# MPTCP: a second subflow from C's .3 (path 2); the server accepts it.
ip netns exec "$C" ip mptcp limits set subflow 2 add_addr_accepted 2
ip netns exec "$C" ip mptcp endpoint add 10.78.0.3 dev up0 subflow
ip netns exec "$S" ip mptcp limits set subflow 2 add_addr_accepted 2

for side in a b; do
    if [[ $side == a ]]; then me=1; peer=2; nets=10.78.0.0/24; else me=2; peer=1; fi
    cat >"$WORK/$side.toml" <<EOF
[daemon]
control = "$WORK/$side.sock"
log = "warn"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "10.99.0.$me/24"
accel_port = 7411
accel_legs = "$LEGS"

[[connection]]
name = "peer"
peer_ipv4 = "10.99.0.$peer"
networks = ["$( [[ $side == a ]] && echo 10.79.0.0/24 || echo 10.78.0.0/24 )"]
$( [[ $side == a ]] && echo 'accelerate = ["10.79.0.0/24:5202,8002"]' )
keepalive = "100ms"
dead_timer = "1500ms"

[[connection.path]]
name = "p1"
local = "10.81.1.$me"
remote = "10.81.1.$peer"

[[connection.path]]
name = "p2"
local = "10.81.2.$me"
remote = "10.81.2.$peer"
EOF
done
ip netns exec "$A" "$MPTD" --config "$WORK/a.toml" >"$WORK/mptd-a.log" 2>&1 & PIDS+=("$!")
ip netns exec "$B" "$MPTD" --config "$WORK/b.toml" >"$WORK/mptd-b.log" 2>&1 & PIDS+=("$!")
ip netns exec "$S" iperf3 -s -p 5201 >"$WORK/iperf-s1.log" 2>&1 & PIDS+=("$!")
ip netns exec "$S" iperf3 -s -p 5202 >"$WORK/iperf-s2.log" 2>&1 & PIDS+=("$!")
ip netns exec "$S" mptcpize run iperf3 -s -p 5203 >"$WORK/iperf-s3.log" 2>&1 & PIDS+=("$!")
cat >"$WORK/objects.py" <<'PY'
# serve PORT...: answers every connection with 1 MB and closes.
# fetch HOST PORT N: N fetches one after another; prints each time in ms.
import socket, sys, threading, time
SIZE = 1 << 20
def serve(port):
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(64)
    blob = b"x" * SIZE
    while True:
        c, _ = l.accept()
        def one(c=c):
            try:
                c.recv(16); c.sendall(blob)
            finally:
                c.close()
        threading.Thread(target=one, daemon=True).start()
if sys.argv[1] == "serve":
    for p in sys.argv[2:]:
        threading.Thread(target=serve, args=(int(p),), daemon=True).start()
    while True:
        time.sleep(3600)
host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for _ in range(n):
    t = time.monotonic()
    s = socket.create_connection((host, port), timeout=30)
    s.sendall(b"GET\n"); got = 0
    while True:
        b = s.recv(65536)
        if not b: break
        got += len(b)
    s.close()
    assert got == SIZE, got
    print("%.1f" % ((time.monotonic() - t) * 1e3))
PY
ip netns exec "$S" python3 "$WORK/objects.py" serve 8001 8002 >"$WORK/obj-s.log" 2>&1 & PIDS+=("$!")
ip netns exec "$S" mptcpize run python3 "$WORK/objects.py" serve 8003 >"$WORK/obj-s3.log" 2>&1 & PIDS+=("$!")

wait_up() {
    for _ in $(seq 100); do
        n=$("$MPT" --socket "$WORK/a.sock" status --json 2>/dev/null | python3 -c 'import json,sys
try: print(sum(p["state"]=="up" for p in json.load(sys.stdin)["connections"][0]["paths"]))
except Exception: print(0)')
        [[ "$n" -ge 2 ]] && return 0
        sleep 0.1
    done
    echo "paths not up" >&2; exit 1
}
EMU=()
set_case() {
    (( ${#EMU[@]} )) && halt "${EMU[@]}"
    EMU=()
    local p1 p2
    case "$1" in
        geo+dsl) p1="--rate 20mbit --delay 300ms --queue 1500kB"; p2="--rate 10mbit --delay 12500us --queue 64kB" ;;
        wifi+lte) p1="--rate 50mbit --delay 5ms --queue 320kB"; p2="--rate 20mbit --delay 30ms --queue 150kB" ;;
        lossy-wifi+lte) p1="--rate 50mbit --delay 5ms --queue 320kB --loss 0.01"; p2="--rate 20mbit --delay 30ms --queue 150kB" ;;
    esac
    # shellcheck disable=SC2086
    ip netns exec "$E1" "$MPT" emu run --a e1a --b e1b $p1 --rt-priority 0 --log warn >>"$WORK/emu1.log" 2>&1 & EMU+=("$!"); PIDS+=("$!")
    # shellcheck disable=SC2086
    ip netns exec "$E2" "$MPT" emu run --a e2a --b e2b $p2 --rt-priority 0 --log warn >>"$WORK/emu2.log" 2>&1 & EMU+=("$!"); PIDS+=("$!")
    sleep 1
    wait_up
}
txb() { ip -n "$A" -s -j link show "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }
# iperf NAME CC PORT [BIND] [WRAP]: Mbit/s received.
iperf() {
    local log="$WORK/iperf-$1.json" bind=()
    [[ -n "${4:-}" ]] && bind=(-B "$4")
    # The server may still be closing the previous test over a 600 ms
    # path ("the server is busy running a test"): try again a few times.
    local try
    for try in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        ip netns exec "$C" ${5:-} iperf3 -c 10.79.0.2 -p "$3" "${bind[@]}" -t "$DURATION" -C "$2" -J >"$log" 2>&1 || true
        grep -q 'server is busy' "$log" || break
        sleep 2
    done
    python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e6))' "$log" 2>/dev/null \
        || { echo "iperf3 $1 failed (try $try)" >&2; tail -5 "$log" >&2; echo 0; }
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {if (NR%2) printf "%.2f", v[(NR+1)/2]; else printf "%.2f", (v[NR/2]+v[NR/2+1])/2}'; }

: >"$WORK/results"
for case in "${CASES[@]}"; do
    say "case $case"
    set_case "$case"
    for (( r = 1; r <= ROUNDS; r++ )); do
        for cc in "${CCS[@]}"; do
            raw_on
            v1=$(iperf "$case-raw1-$cc-$r" "$cc" 5201 10.78.0.2)
            v2=$(iperf "$case-raw2-$cc-$r" "$cc" 5201 10.78.0.3)
            t1=$(txb a1); t2=$(txb a2)
            vm=$(iperf "$case-mptcp-$cc-$r" "$cc" 5203 10.78.0.2 "mptcpize run")
            d1=$(( $(txb a1) - t1 )); d2=$(( $(txb a2) - t2 ))
            raw_off
            vt=$(iperf "$case-tunnel-$cc-$r" "$cc" 5201)
            t1=$(txb a1); t2=$(txb a2)
            va=$(iperf "$case-accel-$cc-$r" "$cc" 5202)
            e1=$(( $(txb a1) - t1 )); e2=$(( $(txb a2) - t2 ))
            echo "$case $cc $r raw1 $v1" >>"$WORK/results"; echo "$case $cc $r raw2 $v2" >>"$WORK/results"
            echo "$case $cc $r mptcp $vm" >>"$WORK/results"; echo "$case $cc $r tunnel $vt" >>"$WORK/results"
            echo "$case $cc $r accel $va" >>"$WORK/results"
            printf '    %s %s round %s: raw %s + %s, mptcp %s (a1 %s B, a2 %s B), tunnel %s, accel %s (a1 %s B, a2 %s B) Mbit/s; load %s\n' \
                "$case" "$cc" "$r" "$v1" "$v2" "$vm" "$d1" "$d2" "$vt" "$va" "$e1" "$e2" "$(cut -d' ' -f1 /proc/loadavg)" >&2
            (( d2 > 1000000 )) || echo "    warning: MPTCP's second subflow carried only $d2 B on path 2" >&2
        done
    done
    if [[ "$case" == geo+dsl && "$OBJECTS" -gt 0 ]]; then
        for (( r = 1; r <= ROUNDS; r++ )); do
            raw_on
            m=$(ip netns exec "$C" mptcpize run python3 "$WORK/objects.py" fetch 10.79.0.2 8003 "$OBJECTS" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
            raw_off
            t=$(ip netns exec "$C" python3 "$WORK/objects.py" fetch 10.79.0.2 8001 "$OBJECTS" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
            a=$(ip netns exec "$C" python3 "$WORK/objects.py" fetch 10.79.0.2 8002 "$OBJECTS" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
            echo "$case obj $r mptcp $m" >>"$WORK/results"; echo "$case obj $r tunnel $t" >>"$WORK/results"; echo "$case obj $r accel $a" >>"$WORK/results"
            printf '    %s 1 MB objects round %s: median ms mptcp %s, tunnel %s, accel %s; load %s\n' "$case" "$r" "$m" "$t" "$a" "$(cut -d' ' -f1 /proc/loadavg)" >&2
        done
    fi
done
"$MPT" --socket "$WORK/a.sock" status >"$WORK/status-a.txt" 2>&1 || true

echo
echo "One TCP stream C -> S, ${DURATION} s including slow start; medians of $ROUNDS; Mbit/s; $(nproc) cores; accel legs $LEGS"
printf '%-15s %-5s %7s %7s %7s %7s %7s %11s %9s\n' case cc raw1 raw2 mptcp tunnel accel accel/mptcp accel/sum
pick() { median $(awk -v c="$1" -v k="$2" -v m="$3" '$1==c && $2==k && $4==m {print $5}' "$WORK/results"); }
for case in "${CASES[@]}"; do
    for cc in "${CCS[@]}"; do
        r1=$(pick "$case" "$cc" raw1); r2=$(pick "$case" "$cc" raw2); m=$(pick "$case" "$cc" mptcp)
        t=$(pick "$case" "$cc" tunnel); a=$(pick "$case" "$cc" accel)
        printf '%-15s %-5s %7s %7s %7s %7s %7s %11s %9s\n' "$case" "$cc" "$r1" "$r2" "$m" "$t" "$a" \
            "$(awk -v a="$a" -v m="$m" 'BEGIN {printf "%.2f", (m > 0 ? a / m : 0)}')" \
            "$(awk -v a="$a" -v x="$r1" -v y="$r2" 'BEGIN {printf "%.2f", (x + y > 0 ? a / (x + y) : 0)}')"
    done
done
if grep -q " obj " "$WORK/results"; then
    m=$(pick geo+dsl obj mptcp); t=$(pick geo+dsl obj tunnel); a=$(pick geo+dsl obj accel)
    echo "1 MB objects over geo+dsl, median completion (ms): mptcp $m, tunnel $t, accel $a; accel/mptcp $(awk -v a="$a" -v m="$m" 'BEGIN {printf "%.2f", (m > 0 ? a / m : 0)}')"
fi
echo "targets (issue 36): geo+dsl cubic accel/mptcp >= 1.2 and accel/sum >= 1.0; lossy-wifi+lte cubic accel/mptcp >= 1.1; objects accel/mptcp <= 0.5"
echo "status of A at the end:"; sed 's/^/  /' "$WORK/status-a.txt"
