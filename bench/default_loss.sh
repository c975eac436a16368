#!/usr/bin/env bash
# No loss at the defaults: ROUNDS rounds, each corecap `capture -w` with every option at its
# default, then tcpdump -w -B 262144, on the same file of 320,000 frames of 1514 bytes sent
# by tcpreplay at top speed into the lab. Prints one line per tool per round: what the tool
# captured, where it lost packets (corecap's summary names the place) and its process CPU
# seconds (user + system, from its start to its exit).
# LOAD=cpu runs a busy loop on every CPU during each round, LOAD=disk a writer of 1 GiB
# files through the page cache into DIR's filesystem (as a build or a log shipper
# would), LOAD=both both: a sensor shares its machine with Suricata or Zeek.
# Usage: [LOAD=none|cpu|disk|both] bench/default_loss.sh [ROUNDS] [DIR]   (root; tcpreplay,
#        tcpdump and GNU time installed; CORECAP_BIN=PATH measures another corecap binary;
#        the corecap release binary: cargo build --release)
set -euo pipefail
ROUNDS=${1:-20}
DIR=${2:-/var/tmp/corecap-default-loss}
B="${CORECAP_BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release/corecap}"
NS=cc-default-loss
LOAD=${LOAD:-none}
HOGS=()
# Starts the round's competing load; stop_load ends it (by the PIDs started here).
start_load() {
  HOGS=()
  if [ "$LOAD" = cpu ] || [ "$LOAD" = both ]; then
    for _ in $(seq "$(nproc)"); do
      bash -c 'while :; do :; done' & HOGS+=($!)
    done
  fi
  if [ "$LOAD" = disk ] || [ "$LOAD" = both ]; then
    bash -c 'while :; do dd if=/dev/zero of="$1/hog" bs=1M count=1024 conv=fdatasync status=none; done' \
      _ "$DIR" & HOGS+=($!)
  fi
}
stop_load() {
  for p in "${HOGS[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in "${HOGS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "$DIR/hog"
  HOGS=()
}
cleanup() { stop_load; "$B" lab down --netns $NS >/dev/null 2>&1 || true; rm -rf "$DIR"; }
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
echo "Load: $LOAD"
echo
echo "| round | tool | captured | of | lost where | process CPU s |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  out="$DIR/out"; rm -rf "$out"; mkdir -p "$out"
  start_load
  /usr/bin/time -f "%U %S" -o "$DIR/cc.cpu" \
    "$B" capture --netns $NS -i cap0 -w "$out/rec.pcapng" --stats-interval 0 --json \
    >"$DIR/cc.json" 2>"$DIR/cc.err" & P=$!
  for _ in $(seq 200); do grep -q "capturing on" "$DIR/cc.err" && break; sleep 0.05; done
  sleep 0.3
  ip netns exec $NS tcpreplay -q -t -i gen0 "$DIR/src/src.pcap" >/dev/null 2>&1
  sleep 1; pkill -INT -P $P; wait $P || true
  stop_load
  python3 - "$DIR/cc.json" "$r" "$DIR/cc.cpu" <<'PY'
import json, sys
v = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
d = v["drops"]
where = ", ".join(f"{k} {n}" for k, n in d.items() if n) or "none"
cpu = sum(float(x) for x in open(sys.argv[3]).read().split()[-2:])
print(f"| {sys.argv[2]} | corecap (defaults) | {v['packets']} | {v['kernel_packets']} | {where} | {cpu:.2f} |")
PY
  rm -rf "$out"; mkdir -p "$out"
  start_load
  /usr/bin/time -f "%U %S" -o "$DIR/td.cpu" \
    ip netns exec $NS tcpdump -i cap0 -B 262144 -w "$out/t.pcap" 2>"$DIR/td.err" & P=$!
  sleep 1.5
  ip netns exec $NS tcpreplay -q -t -i gen0 "$DIR/src/src.pcap" >/dev/null 2>&1
  sleep 1; pkill -INT -P $P; wait $P || true
  stop_load
  cap=$(grep -o "^[0-9]* packets captured" "$DIR/td.err" | cut -d' ' -f1)
  recv=$(grep -o "^[0-9]* packets received by filter" "$DIR/td.err" | cut -d' ' -f1)
  kd=$(grep -o "^[0-9]* packets dropped by kernel" "$DIR/td.err" | cut -d' ' -f1)
  cpu=$(tail -1 "$DIR/td.cpu" | awk '{printf "%.2f", $1 + $2}')
  echo "| $r | tcpdump -B 262144 | $cap | $recv | kernel $kd | $cpu |"
done
