#!/usr/bin/env bash
# Installs what building tgc needs beyond the Rust toolchain and a C
# compiler: `isl-rs` builds its bundled isl with autoconf, automake and
# libtool (`autogen.sh` + `configure`). apt-get runs only when one of the
# three is missing; `sudo` only when not root. Run by test.sh and
# examples.sh; safe to run by hand.
set -euo pipefail
if ! command -v autoconf >/dev/null || ! command -v automake >/dev/null || ! command -v libtoolize >/dev/null; then
    echo "scripts/setup.sh: installing autoconf automake libtool (needed to build isl)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "scripts/setup.sh: not root and no sudo: install autoconf automake libtool" >&2; exit 1; }
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq autoconf automake libtool >/dev/null
fi
