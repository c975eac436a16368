#!/usr/bin/env python3
"""Finding connections again (issue 35): list one host's connections, and get one TLS
server name's packets, over a recording of at least 1 GiB; corecap against tshark and
tcpdump reading the same bytes.

1. Writes a pcap of --gib GiB: 1400-byte UDP frames over --flows two-way flows (10.1.x.y
   <-> 10.2.0.1), and in its middle the TLS and HTTP connections of the test capture
   `crates/cli/tests/data/real/sessions-loopback.pcap` (server names `www.example.org` and
   a 200-byte one), re-timed to fit.
2. Records it with `corecap capture -r PCAP -w DIR/rec.pcapng -b filesize:100000`: 100 MB files, each
   with its index and sessions file, as a recorder writes them.
3. Times, each --runs times after one untimed run (the page cache warm, as on a sensor
   whose recording was just written; medians):
   - `corecap flows DIR --host H` against `tshark -r PCAP -q -z conv,udp,ip.addr==H`
     (one host's connections);
   - `corecap query DIR --sni www.example.org -w OUT` against `tcpdump -r PCAP -w OUT
     'tcp port 4433'` (the server name's packets; tcpdump needs the port, which an
     analyst starting from a name does not have), with the bytes corecap read.

Usage: bench/flows_listing.py [--gib 1] [--flows 2048] [--runs 5] [--dir DIR]
Uses target/release/corecap (CORECAP_BIN to change); needs tshark and tcpdump.
Prints a Markdown report; everything it makes in its own temporary folder it removes.
"""

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CORECAP_BIN", os.path.join(ROOT, "target", "release", "corecap"))
LOOPBACK = os.path.join(ROOT, "crates", "cli", "tests", "data", "real", "sessions-loopback.pcap")
FRAME = 1400


def read_pcap(path):
    """(link type, [(ts_ns, bytes)]) of a little-endian microsecond pcap."""
    with open(path, "rb") as f:
        data = f.read()
    magic, _, _, _, _, _, link = struct.unpack_from("<IHHiIII", data, 0)
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        sys.exit(f"{path}: not a little-endian pcap")
    scale = 1000 if magic == 0xA1B2C3D4 else 1
    out, at = [], 24
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, at)
        out.append((sec * 1_000_000_000 + frac * scale, data[at + 16: at + 16 + incl]))
        at += 16 + incl
    return link, out


def udp_frame(flow, forward, payload):
    """An Ethernet/IPv4/UDP frame of flow `flow`, one way or the other."""
    a = bytes([10, 1, (flow >> 8) & 255, flow & 255])
    b = bytes([10, 2, 0, 1])
    sport, dport = 1024 + flow, 5000
    if not forward:
        a, b, sport, dport = b, a, dport, sport
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, a, b) + udp
    return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip


def write_pcap(path, gib, flows):
    """The pcap of step 1; the number of frames and of the TLS test's frames."""
    link, extra = read_pcap(LOOPBACK)
    if link != 1:
        sys.exit(f"{LOOPBACK}: link type {link}, not Ethernet")
    payload = b"\x5a" * (FRAME - 42)
    n = (gib << 30) // (FRAME + 16)
    t0 = 1_780_000_000 * 1_000_000_000
    gap = 1000  # 1 us between frames: 1 million frames a second
    half = n // 2
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        rec = struct.Struct("<IIII")
        for i in range(n):
            if i == half:
                first = extra[0][0]
                for ts, data in extra:
                    t = t0 + i * gap + (ts - first)
                    f.write(rec.pack(t // 1_000_000_000, t % 1_000_000_000, len(data), len(data)))
                    f.write(data)
            t = t0 + i * gap
            if i >= half:
                # After the test's frames, which keep their own spacing.
                t += extra[-1][0] - extra[0][0] + gap
            frame = udp_frame(i % flows, (i // flows) % 2 == 0, payload)
            f.write(rec.pack(t // 1_000_000_000, t % 1_000_000_000, len(frame), len(frame)))
            f.write(frame)
    return n, len(extra)


def timed(args, runs):
    """Median seconds of `args` over `runs` runs (after one untimed), and its last output."""
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run(args, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--flows", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    for tool in ("tshark", "tcpdump"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool}")
    work = tempfile.mkdtemp(prefix="flows-listing-", dir=a.dir)
    try:
        pcap = os.path.join(work, "all.pcap")
        frames, tls_frames = write_pcap(pcap, a.gib, a.flows)
        rec = os.path.join(work, "rec")
        os.mkdir(rec)
        t = time.perf_counter()
        subprocess.run([BIN, "capture", "-r", pcap, "-w", os.path.join(rec, "rec.pcapng"),
                        "-b", "filesize:100000", "-q"],
                       check=True, capture_output=True)
        record_s = time.perf_counter() - t
        files = sorted(x for x in os.listdir(rec) if x.endswith(".pcapng"))
        host = "10.1.0.7"
        flows_s, flows_out = timed([BIN, "flows", rec, "--host", host, "--json"], a.runs)
        listed = len(flows_out.stdout.splitlines())
        conv_s, conv_out = timed(
            ["tshark", "-r", pcap, "-q", "-z", f"conv,udp,ip.addr=={host}"], a.runs)
        out = os.path.join(work, "sni.pcapng")
        sni_s, sni_out = timed([BIN, "query", rec, "--sni", "www.example.org", "--json",
                                "--force", "-w", out], a.runs)
        stats = json.loads(sni_out.stdout.strip().splitlines()[-1])
        tout = os.path.join(work, "sni-tcpdump.pcap")
        tcpdump_s, _ = timed(["tcpdump", "-r", pcap, "-w", tout, "tcp port 4433"], a.runs)
        size = os.path.getsize(pcap)
        print(f"""# Finding connections again over {size / 2**30:.2f} GiB (issue 35)

Command: `python3 bench/flows_listing.py --gib {a.gib} --flows {a.flows} --runs {a.runs}`
(release build; medians of {a.runs} runs after one untimed, page cache warm).

Recording: {frames:,} UDP frames of {FRAME} bytes over {a.flows} two-way flows, and the
{tls_frames} frames of the TLS and HTTP test capture in the middle; recorded by `corecap
capture -r PCAP -w DIR/rec.pcapng -b filesize:100000` into {len(files)} files in {record_s:.1f} s.

| question | corecap | peer | peer's time |
|---|---|---|---|
| one host's connections ({host}: {listed} listed) | `flows --host`: {flows_s * 1000:.1f} ms | `tshark -q -z conv,udp,ip.addr==H` | {conv_s:.2f} s |
| a TLS server name's packets ({stats.get('packets')} packets) | `query --sni`: {sni_s * 1000:.1f} ms, read {stats.get('bytes_read', stats.get('read_bytes'))} bytes | `tcpdump -r ... 'tcp port 4433'` (needs the port) | {tcpdump_s:.2f} s |

corecap's raw answer (`query --json`): `{json.dumps(stats)}`
""")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
