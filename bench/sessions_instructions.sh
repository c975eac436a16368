#!/usr/bin/env bash
# What keeping sessions costs the recorder, in instructions (issue 35): `capture -r` of a
# pcap of 200,000 64-byte frames, 4,096 two-way UDP flows sent round robin (every packet of
# another flow than the one before: the session table's worst case; the direction flips
# every 4,096 packets), written to pcapng with its index, under valgrind --tool=callgrind,
# with sessions and with --no-sessions; then the same for a `lab mix` of 10,000 connections.
# Instructions are what no other load on the machine moves.
#
# Usage: bench/sessions_instructions.sh [CORECAP_BINARY]   (default: target/release/corecap)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/release/corecap}"
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The worst case's pcap, as bench/sessions_cpu.py writes it, with 200,000 frames.
python3 -c 'import sys; sys.path.insert(0, "bench"); import sessions_cpu; sessions_cpu.round_robin(sys.argv[1], 200000)' "$work/rr.pcap"
count() {
  local input=$1
  shift
  rm -rf "$work/out" && mkdir "$work/out"
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bin" capture -r "$input" -w "$work/out/out.pcapng" -q "$@" 2>&1 |
    awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
report() {
  local title=$1 input=$2 packets=$3
  local with without
  with=$(count "$input")
  without=$(count "$input" --no-sessions)
  echo "$title"
  echo "with sessions:    $with"
  echo "without sessions: $without"
  awk -v a="$with" -v b="$without" -v n="$packets" 'BEGIN {
    printf "extra a packet:   %d\nratio:            %.3f\n", (a - b) / n, a / b }'
}
report "round robin, 200000 frames over 4096 flows:" "$work/rr.pcap" 200000
# The many-connection mix bench/sessions_cpu.py records too, smaller: 10,000 connections,
# most of a few packets (the per-connection work: a new slot, a name, a record).
mix=$("$bin" lab mix -w "$work/mix.pcap" --connections 10000 --max-bytes 20M --alpha 1.1)
packets=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["packets"])' "$mix")
echo
report "lab mix, 10000 connections, $packets packets:" "$work/mix.pcap" "$packets"
