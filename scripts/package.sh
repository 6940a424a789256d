#!/usr/bin/env bash
# package.sh: the Debian package of mpt, target/debian/mpt_VERSION_ARCH.deb.
#
#   scripts/package.sh [--no-build] [--bin-dir DIR] [--out DIR]
#
# Packs the release binaries mptd and mpt (built first unless --no-build:
# `cargo build --release -p mptd -p mpt-cli --bins`, the build
# scripts/test.sh makes anyway; --bin-dir takes them from DIR instead and
# builds nothing), the systemd unit, example configs in
# /etc/mpt, shell completions and man pages (both written by the packed
# `mpt` itself, so they match its command line), the Grafana dashboard,
# the Prometheus alert rules and the docs, with dpkg-deb. No cargo-deb and
# no debhelper: the package is a handful of files and two small
# maintainer scripts, and dpkg-deb is on every Debian machine (including
# CI's) while cargo-deb would be one more tool to install and build.
#
# Prints the path of the .deb on its last line. Environment:
# CARGO_TARGET_DIR (default: target).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=1
OUT=""
BIN=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --no-build) BUILD=0; shift ;;
        --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
        --bin-dir) BIN="${2:?--bin-dir needs a folder}"; BUILD=0; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "package.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
OUT="${OUT:-$TARGET_DIR/debian}"
for tool in dpkg-deb dpkg readelf gzip; do
    command -v "$tool" >/dev/null || { echo "package.sh needs $tool" >&2; exit 1; }
done
if [[ "$BUILD" == 1 ]]; then
    cargo build --release -p mptd -p mpt-cli --bins >&2
fi
BIN="${BIN:-$TARGET_DIR/release}"
for b in mptd mpt; do
    [[ -x "$BIN/$b" ]] || { echo "package.sh: $BIN/$b missing: cargo build --release -p mptd -p mpt-cli --bins" >&2; exit 1; }
done

VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
[[ -n "$VERSION" ]] || { echo "package.sh: no version in Cargo.toml [workspace.package]" >&2; exit 1; }
ARCH="$(dpkg --print-architecture)"
NAME="mpt_${VERSION}_${ARCH}"
STAGE="$OUT/$NAME"
rm -rf "$STAGE"
mkdir -p "$STAGE"

# put MODE SRC DEST: install one file into the package tree.
put() {
    install -D -m "$1" "$2" "$STAGE$3"
}

# Binaries and the service.
put 0755 "$BIN/mptd" /usr/bin/mptd
put 0755 "$BIN/mpt" /usr/bin/mpt
put 0644 conf/mptd.service /lib/systemd/system/mptd.service
# The user, for systemd-sysusers where it runs; postinst makes it too.
mkdir -p "$STAGE/usr/lib/sysusers.d"
echo 'u mpt - "mpt multipath tunnel daemon" /nonexistent' >"$STAGE/usr/lib/sysusers.d/mpt.conf"
chmod 0644 "$STAGE/usr/lib/sysusers.d/mpt.conf"

# /etc/mpt: examples to copy to mptd.toml (conffiles: an edited copy is
# never overwritten by an upgrade) and clients.d for a server's clients.
put 0640 conf/client.toml /etc/mpt/client.toml.example
put 0640 conf/server.toml /etc/mpt/server.toml.example
install -d -m 0750 "$STAGE/etc/mpt/clients.d"

# Completions and man pages, from the binary being packed.
mkdir -p "$STAGE/usr/share/bash-completion/completions" \
    "$STAGE/usr/share/zsh/vendor-completions" "$STAGE/usr/share/fish/vendor_completions.d"
"$BIN/mpt" completions bash >"$STAGE/usr/share/bash-completion/completions/mpt"
"$BIN/mpt" completions zsh >"$STAGE/usr/share/zsh/vendor-completions/_mpt"
"$BIN/mpt" completions fish >"$STAGE/usr/share/fish/vendor_completions.d/mpt.fish"
MAN="$(mktemp -d)"
trap 'rm -rf "$MAN"' EXIT
"$BIN/mpt" generate man "$MAN" >/dev/null
for page in "$MAN"/*.1 "$MAN"/*.8; do
    section="${page##*.}"
    mkdir -p "$STAGE/usr/share/man/man$section"
    gzip -9n <"$page" >"$STAGE/usr/share/man/man$section/$(basename "$page").gz"
done

# Dashboards, alert rules, docs.
put 0644 conf/grafana/mpt-dashboard.json /usr/share/mpt/grafana/mpt-dashboard.json
put 0644 conf/prometheus/mpt-alerts.yml /usr/share/mpt/prometheus/mpt-alerts.yml
DOC=/usr/share/doc/mpt
put 0644 README.md "$DOC/README.md"
for f in OPERATIONS.md ARCHITECTURE.md PROTOCOL.md PERFORMANCE.md; do
    put 0644 "docs/$f" "$DOC/$f"
done
cat >"$STAGE$DOC/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: mpt
License: $(sed -n 's/^license = "\(.*\)"/\1/p' Cargo.toml)

Files: *
Copyright: the mpt authors
License: MIT or Apache-2.0
EOF
chmod 0644 "$STAGE$DOC/copyright"
find "$STAGE/usr/share" -type d -exec chmod 0755 {} +

# What the binaries link: glibc at the newest symbol version they use,
# and libgcc_s (Rust's unwinder).
GLIBC="$(readelf --dyn-syms -W "$BIN/mptd" "$BIN/mpt" | grep -o 'GLIBC_[0-9][0-9.]*' |
    sed 's/GLIBC_//' | sort -uV | tail -n1)"
SIZE_KB="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"

mkdir -p "$STAGE/DEBIAN"
cat >"$STAGE/DEBIAN/control" <<EOF
Package: mpt
Version: $VERSION
Architecture: $ARCH
Maintainer: mpt developers <mpt@localhost>
Section: net
Priority: optional
Installed-Size: $SIZE_KB
Depends: libc6 (>= $GLIBC), libgcc-s1, iproute2, adduser
Description: multipath UDP tunnel over several uplinks
 mptd stripes the IP packets of a tun interface over the UDP paths of its
 connections (DSL, LTE, satellite, several Ethernet uplinks), with
 encryption, loss repair, failover and handover. mpt is its control
 client, link emulator and benchmark harness.
 .
 The service runs as the system user mpt with only CAP_NET_ADMIN. Copy
 /etc/mpt/client.toml.example or server.toml.example to /etc/mpt/mptd.toml,
 edit it, then: systemctl enable --now mptd
EOF
(cd "$STAGE" && find etc -type f | sed 's|^|/|' | sort) >"$STAGE/DEBIAN/conffiles"

cat >"$STAGE/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# mpt postinst: the system user and group mpt, /etc/mpt readable by that
# group, and systemd told about the unit. The service is neither enabled
# nor started: it needs /etc/mpt/mptd.toml first.
set -e
if [ "$1" = configure ]; then
    if ! getent passwd mpt >/dev/null; then
        adduser --system --group --quiet --no-create-home --home /nonexistent \
            --gecos "mpt multipath tunnel daemon" mpt
    fi
    chown root:mpt /etc/mpt /etc/mpt/clients.d
    chmod 0750 /etc/mpt /etc/mpt/clients.d
    for f in /etc/mpt/client.toml.example /etc/mpt/server.toml.example; do
        [ -e "$f" ] && chown root:mpt "$f"
    done
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        # An upgrade restarts a running service with the new binary.
        if [ -n "$2" ] && systemctl is-active --quiet mptd.service; then
            systemctl restart mptd.service || true
        fi
    fi
fi
exit 0
EOF
cat >"$STAGE/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# mpt prerm: stop the service before its binary goes (not on upgrade:
# postinst restarts it then, so the tunnel is down for one restart only).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl stop mptd.service || true
fi
exit 0
EOF
cat >"$STAGE/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# mpt postrm: on purge, /etc/mpt goes if empty (keys and configs written
# there by hand stay). The user mpt stays, as Debian's practice is: files
# it owns may remain.
set -e
if [ "$1" = purge ]; then
    rmdir /etc/mpt/clients.d /etc/mpt 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
exit 0
EOF
chmod 0755 "$STAGE/DEBIAN/postinst" "$STAGE/DEBIAN/prerm" "$STAGE/DEBIAN/postrm"

DEB="$OUT/$NAME.deb"
# xz level 1: 4.1 MB in 2 s of CPU, against 2.9 MB in 8 s at the default
# level 6 (gzip: 5.0 MB, no faster); the test suite builds it every run.
dpkg-deb --root-owner-group -Zxz -z1 --build "$STAGE" "$DEB" >&2
rm -rf "$STAGE"
echo "$DEB"
