#!/usr/bin/env bash
# device_debs.sh — downloads, on this (Debian/Ubuntu) machine, the .deb files of the system
# libraries tessera builds on (scripts/install-deps.sh's list plus pkg-config and cmocka)
# into .debs/, for scripts/device_check.sh to unpack on a GPU machine that has the CUDA
# toolkit but not these libraries and no network. .debs/ is added to git's exclude file so
# it never gets committed; the device tool carries it with carry: [".debs"].
#
#     scripts/device_debs.sh            # then: run device_check.sh with carry [".debs"]
#
# Uses apt-get download only (no install, no root needed beyond reading the package lists).
# The packages come from this machine's distribution; device_check.sh prefers the GPU
# machine's own copy of any library it already has, so only what is missing is taken from
# here. Exit: 0 when every package was downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
      libcjson-dev libcjson1 libmicrohttpd-dev libmicrohttpd12
      libgnutls30 libnettle8 libhogweed6 libtasn1-6 libp11-kit0 libidn2-0 libunistring2 libgmp10
      libssl-dev libssl3 libcmocka-dev libcmocka0 pkgconf pkgconf-bin libpkgconf3 pkg-config)

mkdir -p .debs
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
for p in .debs/ .debs-root/ build-device/ device-check-out/; do
    grep -qx "$p" "$exclude" 2>/dev/null || echo "$p" >>"$exclude"
done

cd .debs
failed=()
for p in "${PKGS[@]}"; do
    if ! ls "${p}"_*.deb >/dev/null 2>&1; then
        apt-get download "$p" >/dev/null 2>&1 || failed+=("$p")
    fi
done
du -sh . | awk '{print "device_debs: " $1 " in .debs/"}'
if [ "${#failed[@]}" -gt 0 ]; then
    echo "device_debs: could not download: ${failed[*]} (apt-get update first?)" >&2
    exit 1
fi
