#!/usr/bin/env bash
# What keeping sessions costs the recorder, in instructions (issue 35): `capture -r` of a
# pcap of 200,000 64-byte frames, 4,096 two-way UDP flows sent round robin (every packet of
# another flow than the one before: the session table's worst case; the direction flips
# every 4,096 packets), written to pcapng with its index, under valgrind --tool=callgrind,
# with sessions and with --no-sessions. Instructions are what no other load on the machine
# moves.
#
# Usage: bench/sessions_instructions.sh [CORECAP_BINARY]   (default: target/release/corecap)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/release/corecap}"
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/rr.pcap" <<'PY'
import struct, sys
n, flows = 200000, 4096
out = open(sys.argv[1], 'wb')
out.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
for i in range(n):
    f = i % flows
    a, b, sp, dp = bytes([10, 1, f >> 8, f & 255]), bytes([10, 2, 0, 1]), 1024 + f, 5000
    if (i // flows) % 2:
        a, b, sp, dp = b, a, dp, sp
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 46, 0, 0, 64, 17, 0, a, b)
    fr = b'\x02' * 6 + b'\x04' * 6 + b'\x08\x00' + ip + struct.pack('!HHHH', sp, dp, 26, 0) + bytes(18)
    out.write(struct.pack('<IIII', 1_000_000 + i // 1000, (i % 1000) * 1000, len(fr), len(fr)) + fr)
PY
count() {
  rm -rf "$work/out" && mkdir "$work/out"
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bin" capture -r "$work/rr.pcap" -w "$work/out/out.pcapng" -q "$@" 2>&1 |
    awk '/refs:/ {gsub(",", "", $NF); print $NF}'
}
with=$(count)
without=$(count --no-sessions)
echo "with sessions:    $with"
echo "without sessions: $without"
awk -v a="$with" -v b="$without" 'BEGIN {
  printf "extra a packet:   %d\nratio:            %.3f\n", (a - b) / 200000, a / b }'
