#!/usr/bin/env bash
# branch_tunnel.sh: a branch office with two NAT'd uplinks (DSL and LTE)
# in a full tunnel to a concentrator with one address (issue 32): one TCP
# stream through the tunnel against the two uplinks' raw sum, measured in
# the same run, and the gap in pings when DSL's upstream fails.
#
#   sudo benches/branch_tunnel.sh [--rounds 3] [--duration 15] [--omit 3]
#                                 [--cc cubic,bbr]
#
#                u1 10.1.1.2 ── 10.1.1.1 [R1] 172.16.1.1 ─[E1: DSL]─ 172.16.1.2
#   branch B                      (masquerade)                          [I] ── 198.51.100.10 [C] (one address)
#                u2 10.2.2.2 ── 10.2.2.1 [R2] 172.16.2.1 ─[E2: LTE]─ 172.16.2.2      └── 203.0.113.50 [H]
#
# B has `default via 10.1.1.1 dev u1` (metric 0) and `default via 10.2.2.1
# dev u2 metric 200`; R1 and R2 masquerade out of their WAN links; E1 and
# E2 each run `mpt emu` between their two interfaces (DSL: 20 Mbit/s each
# way, 12 ms +- 1 ms one way, 100 kB queue; LTE: 10 Mbit/s, 27 ms +- 2 ms,
# 150 kB queue; normal jitter, order kept, no loss); I is "the internet"
# (forwards, knows no private prefix); C is the concentrator, one address,
# serving the branch on its shared port, forwarding and masquerading by
# the recipe of docs/DEPLOY.md ("The concentrator forwards"); H is an
# internet host running the iperf3 server. B's mptd has two paths given by
# `interface` only, `remote = "hub.branch.test"` (in /etc/netns/B/hosts)
# and `networks = ["0.0.0.0/0"]`.
#
# Each round, for each congestion control (`iperf3 -C`; one TCP stream,
# DURATION s, the first OMIT s left out):
#   dsl     B -> H with B's mptd stopped, by B's main default (u1)
#   lte     the same with a host route to H via 10.2.2.1 dev u2
#   tunnel  B -> H through the full tunnel (B's mptd running)
# and once per round DSL's upstream fails: pings B -> H at 20/s through
# the tunnel, R1's WAN link (r1w) set down after 1 s, 4 s in all; the
# longest time without an answer (then r1w goes up again and the round
# waits for both paths). R1's and R2's WAN tx bytes during each tunnel run
# show that both uplinks carried it. At the end: medians, tunnel / (dsl +
# lte) (target >= 0.85) and the longest ping gap (target <= 1 s).
# Namespaces, daemons, emulators and temp files go on every exit.
#
# Environment: MPTD_BIN, MPT_BIN (default: <target dir>/release/mptd and
# mpt, built first unless MPT_SKIP_BUILD=1 or the variables are set),
# CARGO_TARGET_DIR (default: target).
set -euo pipefail

ROUNDS=3
DURATION=15
OMIT=3
CC_LIST="cubic,bbr"

usage() {
    sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) ROUNDS="${2:?--rounds needs a count}"; shift 2 ;;
        --rounds=*) ROUNDS="${1#*=}"; shift ;;
        --duration) DURATION="${2:?--duration needs seconds}"; shift 2 ;;
        --duration=*) DURATION="${1#*=}"; shift ;;
        --omit) OMIT="${2:?--omit needs seconds}"; shift 2 ;;
        --omit=*) OMIT="${1#*=}"; shift ;;
        --cc) CC_LIST="${2:?--cc needs a list, e.g. cubic,bbr}"; shift 2 ;;
        --cc=*) CC_LIST="${1#*=}"; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || { echo "--rounds: expected a count >= 1, got '$ROUNDS'" >&2; exit 2; }
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 2 ]] || { echo "--duration: expected whole seconds >= 2, got '$DURATION'" >&2; exit 2; }
[[ "$OMIT" =~ ^[0-9]+$ && "$OMIT" -lt "$DURATION" ]] || { echo "--omit: expected whole seconds < --duration, got '$OMIT'" >&2; exit 2; }
IFS=, read -r -a CCS <<<"$CC_LIST"
(( ${#CCS[@]} >= 1 )) || { echo "--cc: empty list" >&2; exit 2; }
AVAILABLE_CC="$(sysctl -n net.ipv4.tcp_available_congestion_control 2>/dev/null || true)"
for cc in "${CCS[@]}"; do
    [[ "$cc" =~ ^[a-z0-9_]+$ ]] || { echo "--cc: bad name '$cc'" >&2; exit 2; }
    if [[ " $AVAILABLE_CC " != *" $cc "* ]]; then
        modprobe "tcp_$cc" 2>/dev/null || { echo "--cc: $cc is not available (have: $AVAILABLE_CC)" >&2; exit 2; }
    fi
done

if [[ $EUID -ne 0 ]]; then
    echo "branch_tunnel.sh needs root (network namespaces): sudo $0 $*" >&2
    exit 1
fi

say() { printf '==> %s\n' "$*" >&2; }

# --- state for cleanup -------------------------------------------------------
TAG="mptbr-$$"
WORK="$(mktemp -d "/tmp/${TAG}.XXXXXX")"
NAMESPACES=()
PIDS=()
ETC_NETNS=()

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
    (( ${#PIDS[@]} )) && halt "${PIDS[@]}"
    local ns d
    for ns in "${NAMESPACES[@]}"; do ip netns delete "$ns" 2>/dev/null || true; done
    for d in "${ETC_NETNS[@]}"; do rm -rf "$d"; done
    if [[ $rc -ne 0 ]]; then
        echo "branch_tunnel failed (exit $rc); logs kept in $WORK" >&2
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
for tool in iperf3 ip nft ethtool ping python3; do
    command -v "$tool" >/dev/null 2>&1 && continue
    say "installing iperf3, iproute2, nftables, ethtool, iputils-ping, python3"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 iproute2 nftables ethtool iputils-ping python3 >/dev/null
    break
done

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [[ "${MPT_SKIP_BUILD:-0}" != 1 && -z "${MPTD_BIN:-}" && -z "${MPT_BIN:-}" ]]; then
    say "building: cargo build --release -p mptd -p mpt-cli --bins"
    cargo build --release -p mptd -p mpt-cli --bins
fi
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
MPTD="${MPTD_BIN:-$TARGET_DIR/release/mptd}"
MPT="${MPT_BIN:-$TARGET_DIR/release/mpt}"
[[ -x "$MPTD" ]] || { echo "mptd not found at $MPTD: cargo build --release -p mptd" >&2; exit 1; }
[[ -x "$MPT" ]] || { echo "mpt not found at $MPT: cargo build --release -p mpt-cli" >&2; exit 1; }
MPTD="$(abs "$MPTD")"; MPT="$(abs "$MPT")"

# --- the topology ----------------------------------------------------------------
B="$TAG-b"; R1="$TAG-r1"; R2="$TAG-r2"; E1="$TAG-e1"; E2="$TAG-e2"
I="$TAG-i"; C="$TAG-c"; H="$TAG-h"
CONC=198.51.100.10
HOST=203.0.113.50
NAME=hub.branch.test

for ns in "$B" "$R1" "$R2" "$E1" "$E2" "$I" "$C" "$H"; do
    ip netns add "$ns"; NAMESPACES+=("$ns")
    ip -n "$ns" link set lo up
done

# veth NS_A IF_A ADDR_A NS_B IF_B ADDR_B (an address "-" for none); offloads
# off on both ends, so the emulators and the routers see real frames.
veth() {
    ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
    [[ "$3" != - ]] && ip -n "$1" addr add "$3" dev "$2"
    [[ "$6" != - ]] && ip -n "$4" addr add "$6" dev "$5"
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || true
    ip netns exec "$4" ethtool -K "$5" tso off gso off gro off >/dev/null 2>&1 || true
    ip -n "$1" link set "$2" up
    ip -n "$4" link set "$5" up
}

say "namespaces $TAG-{b,r1,r2,e1,e2,i,c,h}"
veth "$B" u1 10.1.1.2/24 "$R1" r1b 10.1.1.1/24
veth "$B" u2 10.2.2.2/24 "$R2" r2b 10.2.2.1/24
veth "$R1" r1w 172.16.1.1/30 "$E1" e1a -
veth "$E1" e1b - "$I" i1 172.16.1.2/30
veth "$R2" r2w 172.16.2.1/30 "$E2" e2a -
veth "$E2" e2b - "$I" i2 172.16.2.2/30
veth "$I" ic 198.51.100.1/24 "$C" c0 "$CONC/24"
veth "$I" ih 203.0.113.1/24 "$H" h0 "$HOST/24"

for r in "$R1:r1w:172.16.1.2" "$R2:r2w:172.16.2.2"; do
    IFS=: read -r ns wan up <<<"$r"
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    ip -n "$ns" route add default via "$up"
    ip netns exec "$ns" nft "add table ip nat; add chain ip nat post { type nat hook postrouting priority srcnat; }; add rule ip nat post oifname \"$wan\" masquerade"
done
ip netns exec "$I" sysctl -qw net.ipv4.ip_forward=1
ip -n "$C" route add default via 198.51.100.1
ip -n "$H" route add default via 203.0.113.1
ip -n "$B" route add default via 10.1.1.1 dev u1
ip -n "$B" route add default via 10.2.2.1 dev u2 metric 200
# Loose reverse-path filtering, as docs/DEPLOY.md asks of a full tunnel.
ip netns exec "$B" sysctl -qw net.ipv4.conf.all.rp_filter=2

# The concentrator forwards (docs/DEPLOY.md, as written, c0 its WAN).
ip netns exec "$C" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "$C" nft 'add table ip mpt_nat; add chain ip mpt_nat post { type nat hook postrouting priority srcnat; }; add rule ip mpt_nat post ip saddr { 10.99.0.0/24 } oifname "c0" masquerade'

# The concentrator by name, for `ip netns exec` in B.
mkdir -p "/etc/netns/$B"; ETC_NETNS+=("/etc/netns/$B")
printf '127.0.0.1 localhost\n%s %s\n' "$CONC" "$NAME" >"/etc/netns/$B/hosts"

# The two links (a = the router's side, so a->b is upstream).
ip netns exec "$E1" "$MPT" emu run --a e1a --b e1b --rate 20mbit --delay 12ms --jitter 1ms \
    --jitter-dist normal --queue 100kB --rt-priority 0 --log warn >"$WORK/emu-dsl.log" 2>&1 &
PIDS+=("$!")
ip netns exec "$E2" "$MPT" emu run --a e2a --b e2b --rate 10mbit --delay 27ms --jitter 2ms \
    --jitter-dist normal --queue 150kB --rt-priority 0 --log warn >"$WORK/emu-lte.log" 2>&1 &
PIDS+=("$!")

ip netns exec "$H" iperf3 -s >"$WORK/iperf3-server.log" 2>&1 &
PIDS+=("$!")

# --- configs -----------------------------------------------------------------------
(umask 077; "$MPT" keypair "$WORK/c.key" >"$WORK/c.pub" 2>/dev/null)
(umask 077; "$MPT" keypair "$WORK/b.key" >"$WORK/b.pub" 2>/dev/null)
cat >"$WORK/c.toml" <<EOF
[daemon]
control = "$WORK/c.sock"
private_key_file = "$WORK/c.key"
log = "info"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "10.99.0.1/24"

[[connection]]
name = "branch"
public_key = "$(cat "$WORK/b.pub")"
peer_ipv4 = "10.99.0.2"
port = 65022
keepalive = "100ms"
dead_timer = "400ms"
EOF
cat >"$WORK/b.toml" <<EOF
[daemon]
control = "$WORK/b.sock"
private_key_file = "$WORK/b.key"
log = "info"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "10.99.0.2/24"

[[connection]]
name = "hub"
public_key = "$(cat "$WORK/c.pub")"
peer_ipv4 = "10.99.0.1"
networks = ["0.0.0.0/0"]
remote_port = 65022
keepalive = "100ms"
dead_timer = "400ms"

[[connection.path]]
name = "dsl"
interface = "u1"
remote = "$NAME"

[[connection.path]]
name = "lte"
interface = "u2"
remote = "$NAME"
EOF
ip netns exec "$B" "$MPT" config check "$WORK/b.toml" >"$WORK/check-b.log" 2>&1 \
    || { cat "$WORK/check-b.log" >&2; exit 1; }
"$MPT" config check "$WORK/c.toml" >"$WORK/check-c.log" 2>&1 \
    || { cat "$WORK/check-c.log" >&2; exit 1; }

# --- helpers -------------------------------------------------------------------
# paths_up SOCKET: the number of paths of the first connection that are up.
paths_up() {
    "$MPT" --socket "$1" status --json 2>/dev/null | python3 -c '
import json, sys
try:
    st = json.load(sys.stdin)
    print(sum(1 for p in st["connections"][0]["paths"] if p["state"] == "up"))
except Exception:
    print(0)'
}

# wait_paths SOCKET N WHAT: waits up to 10 s for N paths up.
wait_paths() {
    for _ in $(seq 100); do
        [[ "$(paths_up "$1")" -ge "$2" ]] && return 0
        sleep 0.1
    done
    echo "$3: $2 path(s) not up within 10 s" >&2
    "$MPT" --socket "$1" status >&2 || true
    exit 1
}

DAEMON_B=""
start_b() {
    ip netns exec "$B" "$MPTD" --config "$WORK/b.toml" >>"$WORK/mptd-b.log" 2>&1 &
    DAEMON_B=$!; PIDS+=("$DAEMON_B")
    wait_paths "$WORK/b.sock" 2 "branch"
}
stop_b() {
    halt "$DAEMON_B"; forget "$DAEMON_B"; DAEMON_B=""
    for _ in $(seq 50); do ip -n "$B" link show mpt0 >/dev/null 2>&1 || return 0; sleep 0.1; done
    echo "branch's mpt0 still there 5 s after its mptd stopped" >&2
    exit 1
}

wan_tx() { ip -n "$1" -s -j link show "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }

# iperf TAG CC: one TCP stream B -> H; prints Mbit/s (receiver, omitted
# seconds left out).
iperf() {
    local log="$WORK/iperf-$1.json"
    ip netns exec "$B" iperf3 -c "$HOST" -t "$DURATION" -O "$OMIT" -C "$2" -J >"$log" 2>&1 || {
        echo "iperf3 ($1) failed; see $log" >&2
        tail -n 5 "$log" >&2
        return 1
    }
    python3 - "$log" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
print("%.2f" % (e["sum_received"]["bits_per_second"] / 1e6))
PY
}

# median V...: the middle value (mean of the two middle ones if even).
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# upstream_gap: pings B -> H at 20/s for 4 s, R1's WAN down after 1 s;
# prints the longest gap between answered pings in ms and the count lost.
upstream_gap() {
    local out="$WORK/ping-$1.txt"
    ip netns exec "$B" ping -n -i 0.05 -W 1 -c 80 "$HOST" >"$out" 2>&1 &
    local ping_pid=$!; PIDS+=("$ping_pid")
    sleep 1
    ip -n "$R1" link set r1w down
    wait "$ping_pid" || true
    forget "$ping_pid"
    python3 - "$out" <<'PY'
import re, sys
seqs = sorted({int(m.group(1)) for m in re.finditer(r"icmp_seq=(\d+) ", open(sys.argv[1]).read())})
if len(seqs) < 2:
    sys.exit("too few pings answered: %d" % len(seqs))
# ping numbers from 1; the gap before the first and after the last count too.
edges = [0] + seqs + [81]
gap = max(b - a for a, b in zip(edges, edges[1:]))
print("%d %d" % (gap * 50, 80 - len(seqs)))
PY
}

# --- the run -----------------------------------------------------------------------
ip netns exec "$C" "$MPTD" --config "$WORK/c.toml" >"$WORK/mptd-c.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do [[ -S "$WORK/c.sock" ]] && break; sleep 0.1; done
sleep 0.5
: >"$WORK/results"

say "$ROUNDS round(s); ${CCS[*]}; one TCP stream, ${DURATION} s (first ${OMIT} s omitted)"
for (( r = 1; r <= ROUNDS; r++ )); do
    say "round $r: raw uplinks (branch mptd stopped)"
    for cc in "${CCS[@]}"; do
        v="$(iperf "dsl-$cc-$r" "$cc")"
        echo "dsl $cc $r $v" >>"$WORK/results"
        printf '    round %s %-5s dsl    %7s Mbit/s\n' "$r" "$cc" "$v" >&2
        ip -n "$B" route add "$HOST/32" via 10.2.2.1 dev u2
        v="$(iperf "lte-$cc-$r" "$cc")"
        ip -n "$B" route del "$HOST/32" via 10.2.2.1 dev u2
        echo "lte $cc $r $v" >>"$WORK/results"
        printf '    round %s %-5s lte    %7s Mbit/s\n' "$r" "$cc" "$v" >&2
    done
    say "round $r: full tunnel"
    start_b
    for cc in "${CCS[@]}"; do
        t1=$(wan_tx "$R1" r1w); t2=$(wan_tx "$R2" r2w)
        v="$(iperf "tunnel-$cc-$r" "$cc")"
        d1=$(( $(wan_tx "$R1" r1w) - t1 )); d2=$(( $(wan_tx "$R2" r2w) - t2 ))
        echo "tunnel $cc $r $v $d1 $d2" >>"$WORK/results"
        printf '    round %s %-5s tunnel %7s Mbit/s   WAN tx bytes: DSL %s, LTE %s\n' "$r" "$cc" "$v" "$d1" "$d2" >&2
        (( d1 > 1000000 && d2 > 1000000 )) || { echo "an uplink carried (almost) no tunnel traffic: DSL $d1 B, LTE $d2 B" >&2; exit 1; }
    done
    say "round $r: DSL's upstream fails (R1's WAN down) under 20/s pings"
    read -r gap lost <<<"$(upstream_gap "$r")"
    echo "gap - $r $gap $lost" >>"$WORK/results"
    printf '    round %s longest gap %s ms, %s of 80 pings lost\n' "$r" "$gap" "$lost" >&2
    ip -n "$R1" link set r1w up
    # The kernel dropped R1's default with the link; put it back.
    ip -n "$R1" route replace default via 172.16.1.2
    wait_paths "$WORK/b.sock" 2 "after R1's WAN came back"
    "$MPT" --socket "$WORK/b.sock" status >"$WORK/status-b-$r.txt" 2>&1 || true
    stop_b
done

echo
echo "Branch (DSL 20 Mbit/s 12 ms, LTE 10 Mbit/s 27 ms, both NAT'd) -> internet host; full tunnel, MTU 1400;"
echo "one TCP stream, ${DURATION} s (first ${OMIT} s omitted), medians of $ROUNDS, Mbit/s; $(nproc) cores:"
printf '%-6s %8s %8s %9s %9s %15s   %s\n' cc dsl lte "dsl+lte" tunnel "tunnel/sum" "tunnel runs"
for cc in "${CCS[@]}"; do
    dsl="$(median $(awk -v c="$cc" '$1 == "dsl" && $2 == c { print $4 }' "$WORK/results"))"
    lte="$(median $(awk -v c="$cc" '$1 == "lte" && $2 == c { print $4 }' "$WORK/results"))"
    tun="$(median $(awk -v c="$cc" '$1 == "tunnel" && $2 == c { print $4 }' "$WORK/results"))"
    runs="$(awk -v c="$cc" '$1 == "tunnel" && $2 == c { printf "%s%s", s, $4; s = "," }' "$WORK/results")"
    ratio="$(awk -v t="$tun" -v a="$dsl" -v b="$lte" 'BEGIN { printf "%.2f", (a + b > 0 ? t / (a + b) : 0) }')"
    printf '%-6s %8s %8s %9.2f %9s %9s %5s   %s\n' "$cc" "$dsl" "$lte" \
        "$(awk -v a="$dsl" -v b="$lte" 'BEGIN { print a + b }')" "$tun" "$ratio" \
        "$(awk -v x="$ratio" 'BEGIN { print (x >= 0.85 ? "ok" : "LOW") }')" "$runs"
done
echo
echo "WAN tx bytes during the tunnel runs (DSL, LTE):" \
    "$(awk '$1 == "tunnel" { printf "%s%s %s: %s, %s", s, $2, $3, $5, $6; s = "; " }' "$WORK/results")"
gaps="$(awk '$1 == "gap" { printf "%s%s", s, $4; s = "," }' "$WORK/results")"
worst="$(awk '$1 == "gap" && $4 > m { m = $4 } END { print m + 0 }' "$WORK/results")"
echo "DSL upstream down, 20/s pings through the tunnel: longest gap ${worst} ms (runs: ${gaps} ms;" \
    "lost: $(awk '$1 == "gap" { printf "%s%s", s, $5; s = "," }' "$WORK/results") of 80) $( (( worst <= 1000 )) && echo ok || echo HIGH)"
