#!/usr/bin/env python3
"""What keeping sessions costs the recorder in CPU time (issue 35): the same capture file
recorded with sessions and with `--no-sessions`, in pairs, the order turned each round, and
each round's ratio (with sessions over without). The median of the ratios, with their
spread, is the figure: on a shared 2-core machine single runs move by a fifth, while a
pair's two runs see about the same machine.

Inputs (both made here, with `corecap lab mix` and a small writer of its own):
- the worst case: 64-byte UDP frames over 4,096 two-way flows sent round robin (every
  packet of another flow than the one before; the direction flips every 4,096 packets),
  the pcap `bench/sessions_instructions.sh` reads too (`round_robin`), with --frames frames;
- the heavy-tailed mix (`lab mix`, --connections connections, Pareto α 1.1 up to 20M;
  fewer than the 65,536 a file's table holds by default):
  many short connections with names (DNS, TLS, HTTP) and a few bulk transfers.

Each run is `corecap capture -r FILE -w DIR/rec.pcapng --workers 1` (the recorder waits for
its disk, so every packet is taken); CPU is getrusage of the process, every thread.

With --long N, a third input: a `lab mix` of N connections recorded in files of
--long-files-mb million bytes (`-C`), so one table serves several files.

Usage: bench/sessions_cpu.py [--frames 2000000] [--connections 50000] [--rounds 8]
                             [--long 200000] [--long-files-mb 350]
                             [--corecap PATH] [--out FILE.md]
Needs a corecap release binary (cargo build --release).
"""

import argparse
import os
import shutil
import statistics
import struct
import tempfile

from recording import run_capture, sh
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def round_robin(path, n, flows=4096):
    """A pcap of n 64-byte UDP frames, `flows` two-way flows sent round robin."""
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(n):
            f = i % flows
            a, b, sp, dp = bytes([10, 1, f >> 8, f & 255]), bytes([10, 2, 0, 1]), 1024 + f, 5000
            if (i // flows) % 2:
                a, b, sp, dp = b, a, dp, sp
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 46, 0, 0, 64, 17, 0, a, b)
            fr = (b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip
                  + struct.pack("!HHHH", sp, dp, 26, 0) + bytes(18))
            out.write(struct.pack("<IIII", 1_000_000 + i // 1000, (i % 1000) * 1000,
                                  len(fr), len(fr)) + fr)


def record(a, src, out, extra):
    """CPU seconds and packets kept of one recording of src into folder out."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cpu, summary = run_capture([a.corecap, "capture", "-r", src, "--workers", "1", "--json",
                                "--stats-interval", "0", "-w", os.path.join(out, "rec.pcapng"),
                                *extra])
    return cpu, summary["packets"]


def pairs(a, src, work, args=()):
    """Per round: (CPU with, CPU without, packets)."""
    rounds = []
    for r in range(a.rounds):
        order = [[], ["--no-sessions"]]
        if r % 2:
            order.reverse()
        got = {}
        for extra in order:
            got[bool(extra)] = record(a, src, os.path.join(work, "out"), [*args, *extra])
        (with_cpu, n), (without_cpu, _) = got[False], got[True]
        rounds.append((with_cpu, without_cpu, n))
    return rounds


def row(title, rounds):
    ratios = [w / wo for w, wo, _ in rounds]
    n = rounds[0][2]
    per_m = lambda i: statistics.median(r[i] for r in rounds) / n * 1e6
    return (f"| {title} | {n} | {per_m(0):.3f} | {per_m(1):.3f} | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--connections", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--long", type=int, default=0)
    ap.add_argument("--long-files-mb", type=int, default=350)
    ap.add_argument("--corecap", default=os.path.join(ROOT, "target", "release", "corecap"))
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sessions-cpu-", dir="/var/tmp")
    try:
        rr, mix = os.path.join(work, "rr.pcap"), os.path.join(work, "mix.pcap")
        round_robin(rr, a.frames)
        sh(a.corecap, "lab", "mix", "-w", mix, "--connections", str(a.connections),
           "--max-bytes", "20M", "--alpha", "1.1")
        text = ["## The recorder's CPU with sessions and without (`capture -r -w`, 1 worker; "
                f"median of {a.rounds} pairs)", "",
                "| input | packets | CPU s / M packets, sessions | without | ratio (min-max) |",
                "|---|---|---|---|---|",
                row(f"64 B frames, 4,096 flows round robin", pairs(a, rr, work)),
                row(f"`lab mix`, {a.connections} connections", pairs(a, mix, work))]
        command = (f"bench/sessions_cpu.py --frames {a.frames} --connections {a.connections} "
                   f"--rounds {a.rounds}")
        if a.long:
            long_mix = os.path.join(work, "long.pcap")
            sh(a.corecap, "lab", "mix", "-w", long_mix, "--connections", str(a.long),
               "--max-bytes", "20M", "--alpha", "1.1")
            files = ["-C", str(a.long_files_mb)]
            text.append(row(f"`lab mix`, {a.long} connections, files of {a.long_files_mb} MB",
                            pairs(a, long_mix, work, files)))
            command += f" --long {a.long} --long-files-mb {a.long_files_mb}"
        text += ["", f"Command: `{command}`", ""]
        publish("\n".join(text), a.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
