#!/usr/bin/env python3
"""What the index costs the recorder: the same traffic recorded with and without
`--no-index`, interleaved, several rounds; CPU seconds of the capture process per million
packets (getrusage of the child: every thread, the workers and the disk writer that builds
the index).

The traffic is bench/query_speed.py's: 512-byte frames, phases of hosts that come and go,
bursts of 32 packets per host, recorded with `capture -w -b filesize:256` on the lab.

Usage: bench/index_cost.py [--gib 0.5] [--phases 15] [--rounds 3] [--out FILE.md]
Needs root and the corecap release binary (cargo build --release).
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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    a.per_phase = int(a.gib * (1 << 30) / 564 / a.phases) + 1
    work = tempfile.mkdtemp(prefix="corecap-index-cost-", dir=a.dir)
    qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
    qs.sh(qs.CORECAP, "lab", "up", "--netns", qs.NS, "--queues", "1")
    runs = {True: [], False: []}
    try:
        # One run of each first, not counted: the first capture after the lab is up costs
        # up to twice as much CPU whichever mode it is, and fell on the index's side.
        if a.warmup:
            for index in (True, False):
                d = os.path.join(work, f"warmup-{index}")
                _, cpu, summary = qs.record(d, a, index)
                print(f"warm-up {'index' if index else 'plain'}: "
                      f"{1e6 * cpu / summary['packets']:.3f} s per million (not counted)",
                      file=sys.stderr)
                shutil.rmtree(d)
        for r in range(a.rounds):
            # Alternate which goes first, so a trend on the machine falls on both.
            for index in ((True, False) if r % 2 == 0 else (False, True)):
                d = os.path.join(work, f"r{r}-{'index' if index else 'plain'}")
                _, cpu, summary = qs.record(d, a, index)
                pk = summary["packets"]
                idx = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                          if f.endswith(".idx"))
                cap = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                          if f.endswith(".pcapng"))
                runs[index].append((cpu, pk, summary["drops"], idx, cap, summary["cpu_user"]))
                print(f"round {r} {'index' if index else 'plain'}: {cpu:.3f} s CPU, "
                      f"{pk} packets, {1e6 * cpu / pk:.3f} s per million, drops {summary['drops']}",
                      file=sys.stderr)
                shutil.rmtree(d)
    finally:
        qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
        shutil.rmtree(work, ignore_errors=True)
    per = {k: [1e6 * c / p for c, p, *_ in v] for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in per.items()}
    pairs = [100.0 * (i - p) / p for i, p in zip(per[True], per[False])]
    user = {k: [1e6 * x[5] / x[1] for x in v] for k, v in runs.items()}
    umed = {k: statistics.median(v) for k, v in user.items()}
    cmd = "bench/index_cost.py " + " ".join(sys.argv[1:])
    lines = [
        "# What the index costs the recorder",
        "",
        f"Command: `python3 {cmd}`",
        "",
        f"Traffic: 512-byte frames, {a.phases} phases of {a.flows} hosts sliding by {a.step}, "
        f"bursts of {a.burst}; about {a.gib} GiB a run; {a.rounds} rounds, with and without "
        "the index interleaved. CPU: every thread of the capture process (getrusage).",
        "",
        "| round | with index, s/Mpkt | without, s/Mpkt | cost | user only, with | without |",
        "|---|---|---|---|---|---|",
    ]
    for r, (i, p, c, ui, up) in enumerate(zip(per[True], per[False], pairs, user[True], user[False])):
        lines.append(f"| {r} | {i:.3f} | {p:.3f} | {c:+.1f}% | {ui:.3f} | {up:.3f} |")
    idx_pct = [100.0 * x[3] / x[4] for x in runs[True] if x[4]]
    lines += [
        "",
        f"Median: {med[True]:.3f} against {med[False]:.3f} s per million packets: "
        f"**{100.0 * (med[True] - med[False]) / med[False]:+.1f}%**. "
        f"User time alone: {umed[True]:.3f} against {umed[False]:.3f} "
        f"({1e3 * (umed[True] - umed[False]):+.0f} ns a packet, "
        f"{100.0 * (umed[True] - umed[False]) / med[False]:+.1f}% of the total without the index). "
        f"Index size {statistics.median(idx_pct):.2f}% of the capture. "
        f"Drops with the index: {[x[2] for x in runs[True]]}; without: {[x[2] for x in runs[False]]}.",
        "",
    ]
    publish("\n".join(lines), a.out)


if __name__ == "__main__":
    main()
