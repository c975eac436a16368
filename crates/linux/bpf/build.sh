#!/usr/bin/env bash
# Remakes the committed XDP object from its C source (needs clang). build.rs does the same
# into OUT_DIR when clang is present, and falls back to this object when it is not.
set -euo pipefail
cd "$(dirname "$0")"
arch_inc="/usr/include/$(uname -m)-linux-gnu"
clang -O2 -g -target bpf -I"$arch_inc" -c corecap_xdp.c -o corecap_xdp.o
echo "wrote $(pwd)/corecap_xdp.o"
