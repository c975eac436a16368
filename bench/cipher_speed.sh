#!/bin/sh
# Cipher throughput on 1500-byte buffers: corecap's SEED (crates/seed) and the aes-gcm
# crate, against OpenSSL's own `openssl speed -evp` in the same run.
# Usage: bench/cipher_speed.sh [OUT.md]
set -eu
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
cargo build -q --release -p corecap-seed --example seed_speed
ours=$(target/release/examples/seed_speed)
# -mr lines: +F:<n>:<name>:<bytes/s for each -bytes size>
ossl() { openssl speed -mr -elapsed -seconds 3 -bytes 1500 "$@" 2>/dev/null | awk -F: '/^\+F:/ {printf "%.1f\n", $4 / 1e6}'; }
seed_cbc=$(ossl -provider legacy -provider default -evp seed-cbc || echo n/a)
aes_gcm=$(ossl -evp aes-256-gcm || echo n/a)
{
  echo "# Cipher throughput, 1500-byte buffers"
  echo
  echo "Command: \`bench/cipher_speed.sh $*\`; $(nproc) CPUs, $(uname -m), $(openssl version)."
  echo "Each figure is one thread for about one second (ours) or three seconds (OpenSSL)."
  echo
  echo '```'
  echo "$ours"
  echo "openssl seed-cbc 1500B: ${seed_cbc} MB/s"
  echo "openssl aes-256-gcm 1500B: ${aes_gcm} MB/s"
  echo '```'
} > "$out"
cat "$out" 2>/dev/null || true
