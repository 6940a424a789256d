#!/usr/bin/env bash
# The test suite, exactly as CI runs it (.ci/run calls this script).
# Needs root: the end-to-end tests create network namespaces, veth pairs
# and tun devices. Installs what it needs on a Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: run as root (the end-to-end tests create network namespaces)" >&2
    exit 2
fi

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
# nftables: the roaming test rewrites a client's source address with it.
command -v nft >/dev/null 2>&1 || need+=(nftables)
# ping: the handover test pings through the tunnel every 10 ms.
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add rustfmt clippy
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== build (release): mptd and mpt are what the end-to-end tests run"
cargo build --release --workspace --bins
echo "== cargo test (release)"
cargo test --release --workspace -- --test-threads=2
