#!/usr/bin/env bash
# What the index costs a packet in instructions, by how the traffic interleaves: the index
# crate's cost example (512-byte UDP frames formatted into pcapng as the recorder does, each
# told to the index) under valgrind, with and without the index, over bursts of 32, 4 and 1
# packets from 1,000 open flows and over bursts of 1 where every packet is a new flow.
# Instructions are what no other load on the machine moves; only the example's passes are
# counted (`--toggle-collect`), not making the frames or finishing the sidecar.
#
# Usage: bench/index_instructions.sh [--out FILE.md]
set -euo pipefail
cd "$(dirname "$0")/.."
out=""
if [[ "${1:-}" == "--out" ]]; then
  out="$2"
fi
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }
cargo build --release -p corecap-index --example cost >/dev/null 2>&1
bin=target/release/examples/cost
packets=50000

count() {
  valgrind --tool=callgrind --toggle-collect='cost::pass*' --callgrind-out-file=/dev/null \
    "$bin" "$@" 2>&1 | awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}

report() {
  echo "# What the index costs a packet, by how flows interleave"
  echo
  echo "Command: \`bench/index_instructions.sh${out:+ --out $out}\` (commit $(git rev-parse --short HEAD))"
  echo
  echo "The cost example (\`crates/index/examples/cost.rs\`), $packets packets a pass, 5 passes with"
  echo "the index and 5 without, under \`valgrind --tool=callgrind\`: user-space instructions a"
  echo "packet. Formatting is what the recorder's front end does for a packet without the index"
  echo "(the pcapng block and the copy of its 512 bytes)."
  echo
  echo "| traffic | formatting | the index | index / formatting |"
  echo "|---|---|---|---|"
  for spec in "32 flows=1000" "4 flows=1000" "1 flows=1000" "1 flows=0"; do
    set -- $spec
    with=$(count "$packets" "$1" pcapng "$2")
    without=$(count "$packets" "$1" pcapng "$2" index=no)
    # `without` counts 5 formatting passes; `with` 5 more with the index.
    fmt=$((without / (5 * packets)))
    idx=$(((with - 2 * without) / (5 * packets)))
    if [[ "$2" == "flows=0" ]]; then
      shape="bursts of $1, every packet a new flow"
    else
      shape="bursts of $1 from 1,000 open flows"
    fi
    echo "| $shape | $fmt | $idx | $((100 * idx / fmt))% |"
  done
  echo
}

if [[ -n "$out" ]]; then
  mkdir -p "$(dirname "$out")"
  report | tee "$out"
else
  report
fi
