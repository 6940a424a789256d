#!/usr/bin/env bash
# Runs every fuzz target for N seconds each (default 60).
#
#   fuzz/run.sh [seconds] [target...]   (no target: all of `cargo fuzz list`)
#
# cargo-fuzz passes -Zsanitizer=address and other nightly flags to rustc;
# RUSTC_BOOTSTRAP=1 lets the stable toolchain accept them. Corpora grow in
# fuzz/corpus/<target>/, crashes land in fuzz/artifacts/<target>/ (both are
# git-ignored). Exits non-zero on the first target that finds a crash.
set -euo pipefail

cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
targets=("$@")

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz not found; installing it from crates.io" >&2
    cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP=1
if [ "${#targets[@]}" -eq 0 ]; then
    # Every [[bin]] of Cargo.toml: decode session handshake open reorder_flow
    # noise_responder.
    mapfile -t targets < <(cargo fuzz list)
fi
for t in "${targets[@]}"; do
    extra=()
    # The header parser rejects datagrams over MAX_DATAGRAM (9216 bytes);
    # let inputs reach past that (libFuzzer's default limit is 4096).
    if [ "$t" = decode ]; then
        extra=(-max_len=9300)
    fi
    echo "== fuzzing $t for ${secs}s" >&2
    cargo fuzz run "$t" -- -max_total_time="$secs" "${extra[@]}"
done
