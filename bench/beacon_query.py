#!/usr/bin/env python3
"""What a query costs against what its answer is: a beacon in an hour of dense traffic.

Writes --gib GiB of synthetic pcap (rotated files of --file-mib MiB, frames of 64 to 1514
bytes, 512 on average) whose timestamps span one hour: many hosts in bursts, one host that
sends one small packet a second for the whole hour (a beacon, C2 implant, DNS client), and
one host with 1% of the packets. `corecap index` indexes every file (timed: the indexer is
the recorder's disk writer thread). Then, with the page cache dropped before each run,
bytes read from disk (getrusage ru_inblock) and wall time of:

  - the beacon over the whole hour: corecap query against tcpdump -r over every file;
  - the beacon over a 5-minute window in the middle;
  - the 1% host over the whole hour, against the bytes of the 4 KiB blocks its packets lie in.

Each corecap answer is checked against tcpdump's packet count.

Usage: bench/beacon_query.py [--gib 1,2] [--file-mib 256] [--dir DIR] [--out FILE.md]
Needs tcpdump and the corecap release binary. The recording's pages are dropped from the
page cache before each run (posix_fadvise DONTNEED), the programs' are not.
"""

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.path.join(ROOT, "target", "release", "corecap")
T0 = 1_700_000_000
HOUR = 3600
BEACON = bytes([10, 9, 9, 9])
ONEPCT = bytes([10, 8, 8, 8])


FOLDERS = []


def drop_caches():
    """Drops the recording's pages from the page cache (the programs' own stay, so the bytes
    read are the recording's: a 40 MB binary with debug info read back would count too)."""
    subprocess.run(["sync"], check=True)
    for folder in FOLDERS:
        for name in os.listdir(folder):
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def frame(src, dst, sport, dport, size):
    ip_len = size - 14
    eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0, src, dst)
    udp = struct.pack("!HHHH", sport, dport, ip_len - 20, 0)
    return (eth + ip + udp).ljust(size, b"\xab")


def write_files(folder, gib, file_mib):
    """Writes the traffic; returns (files, beacon packets, 1% host packets, its offsets)."""
    os.makedirs(folder, exist_ok=True)
    total = int(gib * (1 << 30))
    rng = random.Random(7)
    sizes = [64, 128, 256, 512, 512, 512, 768, 1024, 1514]
    # Packets over the hour: average record 16 + 512 bytes.
    n = total // 528
    step = HOUR * 1_000_000 / n  # microseconds between packets
    files, cur, written = [], None, 0
    beacon_next, beacons, onepct = 0.0, 0, 0
    onepct_blocks = set()
    seq = 0
    for i in range(n):
        t_us = int(i * step)
        if cur is None or written >= file_mib << 20:
            if cur:
                cur.close()
            seq += 1
            path = os.path.join(folder, f"rec_{seq:05}.pcap")
            files.append(path)
            cur = open(path, "wb", buffering=1 << 20)
            cur.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
            written = 24
        if t_us / 1e6 >= beacon_next:
            fr = frame(BEACON, bytes([192, 0, 2, 1]), 40000, 53, 80)
            beacon_next += 1.0
            beacons += 1
        elif i % 100 == 37:
            fr = frame(ONEPCT, bytes([10, 1, 2, 3]), 1234, 8443, rng.choice(sizes))
            onepct += 1
            off = written
            onepct_blocks.update((seq, b) for b in
                                 range(off // 4096, (off + 16 + len(fr) - 1) // 4096 + 1))
        else:
            burst = (i // 64) % 5000
            src = bytes([10, 0, burst // 256 % 256, burst % 256])
            dst = bytes([10, 1, rng.randrange(256), rng.randrange(1, 255)])
            fr = frame(src, dst, 1024 + rng.randrange(20000), rng.choice([80, 443, 53, 8080]),
                       rng.choice(sizes))
        cur.write(struct.pack("<IIII", T0 + t_us // 1_000_000, t_us % 1_000_000, len(fr), len(fr)))
        cur.write(fr)
        written += 16 + len(fr)
    cur.close()
    return files, beacons, onepct, len(onepct_blocks) * 4096


def run(cmd):
    """Runs cmd after dropping the page cache; returns (seconds, bytes read from disk, stdout)."""
    drop_caches()
    t = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    return time.time() - t, ru.ru_inblock * 512, out


def tcpdump_all(files, flt):
    """tcpdump -r over every file; (seconds, bytes read, packets)."""
    drop_caches()
    t, read, n = time.time(), 0, 0
    for f in files:
        p = subprocess.Popen(["tcpdump", "-nn", "-r", f, flt], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        n += sum(1 for _ in p.stdout)
        _, _, ru = os.wait4(p.pid, 0)
        read += ru.ru_inblock * 512
    return time.time() - t, read, n


def query(folder, flt, extra=()):
    out = os.path.join(folder, "..", "answer.pcapng")
    secs, read, stdout = run([CORECAP, "query", "--force", folder, "--json", "-w", out, *extra, flt])
    return secs, read, json.loads(stdout.decode().strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", default="1,2")
    ap.add_argument("--file-mib", type=int, default=256)
    ap.add_argument("--dir", default="/var/tmp/corecap-beacon-bench")
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = ["# A beacon in an hour of dense traffic", "", f"Command: `{' '.join(sys.argv)}`",
             "", f"Machine: {os.cpu_count()} cores, kernel {os.uname().release}, page cache "
             "dropped for the recording's files before every run (the programs stay cached); bytes "
             "read are the process's reads from disk (getrusage ru_inblock).", ""]
    subprocess.run([CORECAP, "--version"], capture_output=True)
    try:
        for gib in [float(x) for x in a.gib.split(",")]:
            shutil.rmtree(a.dir, ignore_errors=True)
            folder = os.path.join(a.dir, "rec")
            FOLDERS[:] = [folder]
            files, beacons, onepct, onepct_bytes = write_files(folder, gib, a.file_mib)
            data = sum(os.path.getsize(f) for f in files)
            t = time.time()
            r = subprocess.run([CORECAP, "index", "--json", *files], capture_output=True)
            index_secs = time.time() - t
            index_bytes = sum(os.path.getsize(f + ".idx") for f in files)
            lines += [f"## {gib:g} GiB: {len(files)} files, {data} bytes; beacon {beacons} "
                      f"packets, 1% host {onepct}", "",
                      f"Index: {index_bytes} bytes = {100 * index_bytes / data:.2f}% of the data, "
                      f"built in {index_secs:.1f} s ({data / index_secs / 1e6:.0f} MB/s).", "",
                      "| query | corecap packets | tcpdump packets | corecap s | tcpdump s | "
                      "speed-up | corecap bytes read | tcpdump bytes read | corecap index bytes "
                      "| bound |", "|---|---|---|---|---|---|---|---|---|---|"]
            host = "host 10.9.9.9"
            secs, read, v = query(folder, host)
            tsecs, tread, tn = tcpdump_all(files, host)
            bound = v["index_bytes"] + 8192 * v["packets"]
            lines.append(f"| beacon, whole hour | {v['packets']} | {tn} | {secs:.3f} | {tsecs:.2f} "
                         f"| {tsecs / secs:.0f}x | {read} | {tread} | {v['index_bytes']} | "
                         f"read <= index + 8 KiB/packet = {bound}: "
                         f"{'yes' if read <= bound else 'NO'} |")
            mid = T0 + HOUR // 2
            secs, read, v = query(folder, host, ["--from", str(mid), "--to", str(mid + 300)])
            lines.append(f"| beacon, 5 minutes | {v['packets']} | 300 | {secs:.3f} | | | {read} | "
                         f"| {v['index_bytes']} | files opened: {v['files'] - v.get('files_pruned', 0)} of "
                         f"{len(files)} |")
            flt = "host 10.8.8.8"
            secs, read, v = query(folder, flt)
            tsecs, tread, tn = tcpdump_all(files, flt)
            lines.append(f"| 1% host, whole hour | {v['packets']} | {tn} | {secs:.3f} | {tsecs:.2f} "
                         f"| {tsecs / secs:.1f}x | {read} | {tread} | {v['index_bytes']} | read <= "
                         f"1.5 x its 4 KiB blocks ({onepct_bytes}) + index: "
                         f"{'yes' if read <= 1.5 * onepct_bytes + v['index_bytes'] else 'NO'} |")
            lines.append("")
            print("\n".join(lines), flush=True)
    finally:
        shutil.rmtree(a.dir, ignore_errors=True)
    publish("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
