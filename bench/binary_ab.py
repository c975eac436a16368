#!/usr/bin/env python3
"""Two corecap binaries recording the same traffic, interleaved: whether a change moved
the recorder's CPU per packet. The traffic and the recording are bench/index_cost.py's
(bench/query_speed.py's phases of hosts in bursts, `capture -w -b filesize:256000`, with the
index); the first round of each is a warm-up, not counted.

Usage: bench/binary_ab.py OLD NEW [--rounds 9] [--gib 0.5] [--phases 15] [--out FILE.md]
Needs root.
"""

import os
import shutil
import statistics
import sys
import tempfile

import query_speed as qs
from report import publish


def main():
    ap = qs.traffic_args(0.5, 15)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    a.per_phase = int(a.gib * (1 << 30) / 564 / a.phases) + 1
    bins = {"old": a.old, "new": a.new}
    qs.CORECAP = a.new
    qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
    qs.sh(qs.CORECAP, "lab", "up", "--netns", qs.NS, "--queues", "1")
    per = {"old": [], "new": []}
    try:
        for r in range(a.rounds):
            for b in (("old", "new") if r % 2 == 0 else ("new", "old")):
                qs.CORECAP = bins[b]
                d = tempfile.mkdtemp(prefix="corecap-ab-", dir=a.dir)
                _, cpu, summary = qs.record(d, a, True)
                shutil.rmtree(d)
                x = 1e6 * cpu / summary["packets"]
                print(f"round {r} {b}: {x:.3f} s per million packets", file=sys.stderr)
                if r > 0:
                    per[b].append(x)
    finally:
        qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
    med = {b: statistics.median(v) for b, v in per.items()}
    lines = [
        "# Two recorders on the same traffic",
        "",
        f"Command: `python3 bench/binary_ab.py {' '.join(sys.argv[1:])}`",
        "",
        f"Traffic: 512-byte frames, {a.phases} phases of {a.flows} hosts, bursts of {a.burst}; "
        f"about {a.gib} GiB a run, with the index; {a.rounds - 1} counted rounds, interleaved. "
        "CPU: every thread of the capture process (getrusage), seconds per million packets.",
        "",
        "| binary | median | runs |",
        "|---|---|---|",
    ] + [f"| {b} (`{bins[b]}`) | {med[b]:.3f} | {', '.join(f'{x:.3f}' for x in per[b])} |"
         for b in ("old", "new")] + [
        "",
        f"New against old: **{100.0 * (med['new'] - med['old']) / med['old']:+.1f}%**.",
        "",
    ]
    publish("\n".join(lines), a.out)


if __name__ == "__main__":
    main()
