#!/usr/bin/env bash
# Installs the Debian packages tessera builds with (and, with --test, tests with) when any is
# missing. Run as root (or with sudo available). Set TS_APT_UPDATE=1 to force 'apt-get update'.
#   build: compiler, CMake, PCRE2 (tokenizer regexes), cJSON + libmicrohttpd (server),
#          OpenSSL (prefix-cache hashing), OpenMPI (tensor parallelism across processes)
#   test:  cmocka, clang + its runtime (libFuzzer), curl, python3-venv (openai client tests),
#          chromium + chromium-driver (the web page test)
set -euo pipefail

PKGS=(build-essential cmake pkg-config python3 python3-pip
      libpcre2-dev libcjson-dev libmicrohttpd-dev libssl-dev libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--test" ]; then
    PKGS+=(libcmocka-dev clang libclang-rt-14-dev curl python3-venv chromium chromium-driver
           libsimde-dev)
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A python3 that is not Debian's (pyenv, venv) may already provide pip.
if python3 -m pip --version >/dev/null 2>&1; then
    missing=("${missing[@]/python3-pip}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))

if [ "${#missing[@]}" -eq 0 ] && [ "${TS_APT_UPDATE:-0}" != 1 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]:-(none; updating lists)}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ "${#missing[@]}" -gt 0 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
