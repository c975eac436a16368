#!/usr/bin/env bash
# No loss at the defaults: ROUNDS rounds, each corecap `capture -w` with every option at its
# default, then tcpdump -w -B 262144, on the same file of 320,000 frames of 1514 bytes sent
# by tcpreplay at top speed into the lab. Prints one line per tool per round: what the tool
# captured and where it lost packets (corecap's summary names the place).
# Usage: bench/default_loss.sh [ROUNDS] [DIR]   (root; tcpreplay and tcpdump installed;
#        CORECAP_BIN=PATH measures another corecap binary;
#        the corecap release binary: cargo build --release)
set -euo pipefail
ROUNDS=${1:-20}
DIR=${2:-/var/tmp/corecap-default-loss}
B="${CORECAP_BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release/corecap}"
NS=cc-default-loss
cleanup() { "$B" lab down --netns $NS >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
"$B" lab down --netns $NS >/dev/null 2>&1 || true
"$B" lab up --netns $NS >/dev/null
rm -rf "$DIR"; mkdir -p "$DIR/src"
# The traffic file: 320,000 frames of 1514 bytes (64 flows), written by corecap itself.
"$B" capture --netns $NS -i cap0 -w "$DIR/src/src.pcap" --pcap --no-index --stats-interval 0 \
  -c 320000 2>/dev/null & P=$!
sleep 1
"$B" gen --netns $NS -i gen0 --size 1518 --count 320000 --flows 64 --rate 100000 >/dev/null
wait $P
echo "| round | tool | captured | of | lost where |"
echo "|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  out="$DIR/out"; rm -rf "$out"; mkdir -p "$out"
  "$B" capture --netns $NS -i cap0 -w "$out/rec.pcapng" --stats-interval 0 --json \
    >"$DIR/cc.json" 2>"$DIR/cc.err" & P=$!
  for _ in $(seq 200); do grep -q "capturing on" "$DIR/cc.err" && break; sleep 0.05; done
  sleep 0.3
  ip netns exec $NS tcpreplay -q -t -i gen0 "$DIR/src/src.pcap" >/dev/null 2>&1
  sleep 1; kill -INT $P; wait $P || true
  python3 - "$DIR/cc.json" "$r" <<'PY'
import json, sys
v = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
d = v["drops"]
where = ", ".join(f"{k} {n}" for k, n in d.items() if n) or "none"
print(f"| {sys.argv[2]} | corecap (defaults) | {v['packets']} | {v['kernel_packets']} | {where} |")
PY
  rm -rf "$out"; mkdir -p "$out"
  ip netns exec $NS tcpdump -i cap0 -B 262144 -w "$out/t.pcap" 2>"$DIR/td.err" & P=$!
  sleep 1.5
  ip netns exec $NS tcpreplay -q -t -i gen0 "$DIR/src/src.pcap" >/dev/null 2>&1
  sleep 1; kill -INT $P; wait $P || true
  cap=$(grep -o "^[0-9]* packets captured" "$DIR/td.err" | cut -d' ' -f1)
  recv=$(grep -o "^[0-9]* packets received by filter" "$DIR/td.err" | cut -d' ' -f1)
  kd=$(grep -o "^[0-9]* packets dropped by kernel" "$DIR/td.err" | cut -d' ' -f1)
  echo "| $r | tcpdump -B 262144 | $cap | $recv | kernel $kd |"
done
