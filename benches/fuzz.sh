#!/usr/bin/env bash
# fuzz.sh: runs the stable fuzz targets (benches/tests/fuzz/) for a bounded
# time each, from fresh random seeds, and prints the cases run per target.
#
#   benches/fuzz.sh [--seconds N] [TARGET...]
#
# N: seconds per target (default 60). TARGET: a test name filter
# (mss_clamp_bytes mss_clamp_syn checksum noise_messages psk_messages
# api_request api_response config netlink cmd_port_answer); none: all.
# The same targets run in CI as ordinary tests, a few hundred cases each
# from a fixed seed. A failure prints its seed and minimal input; replay
# it with MPT_FUZZ_SEED=<seed> benches/fuzz.sh --seconds 1 TARGET.
# Built with --release (the handshake targets spend their time in X25519).
# Not run by CI. Coverage-guided fuzzing with a nightly toolchain: fuzz/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER=60
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) SECONDS_PER="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done

cargo test --release -p mpt-benches --test fuzz --no-run
# One target at a time: each gets the whole budget, and the report reads
# in order.
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <(cargo test --release -q -p mpt-benches --test fuzz -- --list 2>/dev/null |
        sed -n 's/^\(.*\): test$/\1/p')
fi
for t in "${targets[@]}"; do
    rc=0
    out=$(MPT_FUZZ_SECONDS="$SECONDS_PER" cargo test --release -q -p mpt-benches --test fuzz -- \
        "$t" --nocapture --test-threads=1 2>&1) || rc=$?
    grep -E '^fuzz ' <<<"$out" || true
    if [ "$rc" -ne 0 ]; then
        echo "$out" | tail -40 >&2
        echo "fuzz.sh: $t failed" >&2
        exit 1
    fi
done
