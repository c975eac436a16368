#!/usr/bin/env python3
"""What the index costs the recorder: the same packets recorded with and without
`--no-index`, interleaved, several rounds; CPU seconds of the recording process per million
packets (getrusage of the child: every thread, the workers and the disk writer).

The traffic is bench/query_speed.py's: 512-byte frames, phases of hosts that come and go,
bursts of 32 packets per host, recorded with `capture -w -b filesize:256000`.

Two sources (--source):
- live: the lab's generator sends, `capture -i` records. What a sensor pays, but on a
  2-core VM the kernel's share of a run (the ring's lock, shared with the generator's CPU,
  and wake-ups) moves by tens of percent from run to run, whatever the index does.
  With --rate the generator sends at that many packets a second, so every run offers the
  recorder the same load (as a link does); without, it sends as fast as it can, and its
  speed, and with it how the recorder batches, differs from run to run.
- file: the lab's traffic is recorded once, then `capture -r` records that file again (a
  file source waits for the disk, so every run writes every packet). The same packets
  through the same formatting, index and disk writer, without the ring: the index's share
  of a smaller total, so a stricter bar, and a steadier one.

With --perf, one more live recording with the index runs under `perf record -e cpu-clock`,
and the report gives the share of the recorder's samples in the index's own functions.

With --instructions N, the first N packets of the file source are recorded under
valgrind with and without the index: the instructions a packet, which no other load moves.

Usage: bench/index_cost.py [--source live|file|both] [--gib 0.5] [--phases 15]
                           [--rate PPS] [--rounds 3] [--perf] [--instructions N]
                           [--out FILE.md]
Needs root and the corecap release binary (cargo build --release).
"""

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import query_speed as qs
from report import publish


def sizes(d):
    idx = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".idx"))
    cap = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
              if f.endswith(".pcapng"))
    return idx, cap


def record_file(srcs, outdir, index):
    """Records the files srcs into outdir with `capture -r`; returns (CPU s, user s,
    summary)."""
    os.makedirs(outdir, exist_ok=True)
    cmd = [qs.CORECAP, "capture", *[x for s in srcs for x in ("-r", s)], "--workers", "1",
           "--json",
           "--stats-interval", "0", "-w", os.path.join(outdir, "rec.pcapng"),
           "-b", "filesize:256000"]
    if not index:
        cmd.append("--no-index")
    so = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.DEVNULL, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"capture -r exited {status}")
    so.seek(0)
    summary = qs.json.loads([l for l in so.read().splitlines() if '"summary"' in l][-1])
    return ru.ru_utime + ru.ru_stime, ru.ru_utime, summary


def rounds(a, work, run):
    """a.rounds rounds of run(dir, index) -> (cpu, user, summary), alternating which mode
    goes first; returns {index: [(cpu, packets, drops, idx bytes, cap bytes, user)]}."""
    out = {True: [], False: []}
    for r in range(a.rounds):
        # Alternate which goes first, so a trend on the machine falls on both.
        for index in ((True, False) if r % 2 == 0 else (False, True)):
            d = os.path.join(work, f"r{r}-{'index' if index else 'plain'}")
            cpu, user, summary = run(d, index)
            pk = summary["packets"]
            idx, cap = sizes(d)
            out[index].append((cpu, pk, summary["drops"], idx, cap, user))
            print(f"round {r} {'index' if index else 'plain'}: {cpu:.3f} s CPU, "
                  f"{pk} packets, {1e6 * cpu / pk:.3f} s per million, drops {summary['drops']}",
                  file=sys.stderr)
            shutil.rmtree(d)
    return out


def median_ci(xs, draws=4000):
    """The median of xs and a 95% bootstrap interval for it (rounds drawn with replacement;
    a fixed seed, so a report reads the same from the same rounds)."""
    rng = random.Random(22)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(draws))
    return statistics.median(xs), meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def drops(runs):
    """Every run's drops summed by place."""
    out = {}
    for d in runs:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def table(title, runs, how):
    per = {k: [1e6 * c / p for c, p, *_ in v] for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in per.items()}
    pairs = [100.0 * (i - p) / p for i, p in zip(per[True], per[False])]
    user = {k: [1e6 * x[5] / x[1] for x in v] for k, v in runs.items()}
    umed = {k: statistics.median(v) for k, v in user.items()}
    lines = [
        f"## {title}",
        "",
        how,
        "",
        "| round | with index, s/Mpkt | without, s/Mpkt | cost | user only, with | without |",
        "|---|---|---|---|---|---|",
    ]
    for r, (i, p, c, ui, up) in enumerate(zip(per[True], per[False], pairs, user[True],
                                              user[False])):
        lines.append(f"| {r} | {i:.3f} | {p:.3f} | {c:+.1f}% | {ui:.3f} | {up:.3f} |")
    idx_pct = [100.0 * x[3] / x[4] for x in runs[True] if x[4]]
    packets = {k: sorted({x[1] for x in v}) for k, v in runs.items()}
    mid, lo, hi = median_ci(pairs)
    # The index's work is user-space work: its extra user time against the whole CPU of the
    # run beside it, a figure the kernel's share (the ring, poll, the disk) does not move.
    upairs = [100.0 * (x[5] - y[5]) / y[0] for x, y in zip(runs[True], runs[False])]
    umid, ulo, uhi = median_ci(upairs)
    lines += [
        "",
        f"Median of the rounds' costs (each run against the one beside it): "
        f"**{mid:+.1f}%** (95% bootstrap interval {lo:+.1f}% to {hi:+.1f}%, {len(pairs)} "
        f"rounds). The extra user time alone, against the CPU of the run beside it: "
        f"{umid:+.1f}% ({ulo:+.1f}% to {uhi:+.1f}%). Medians apart: {med[True]:.3f} against "
        f"{med[False]:.3f} s per million packets ({100.0 * (med[True] - med[False]) / med[False]:+.1f}%). "
        f"User time alone: {umed[True]:.3f} against {umed[False]:.3f} "
        f"({1e3 * (umed[True] - umed[False]):+.0f} ns a packet). "
        f"Index size {statistics.median(idx_pct):.2f}% of the capture. "
        f"Packets a run, with the index: {packets[True]}; without: {packets[False]}. "
        f"Drops over every run with the index: {drops(x[2] for x in runs[True])}; "
        f"without: {drops(x[2] for x in runs[False])}.",
        "",
    ]
    return lines


def instructions(srcs, work, packets):
    """The recorder's user-space instructions per packet with and without the index, under
    valgrind (callgrind), over the first `packets` packets of the source: a count no other
    load on the machine moves."""
    if shutil.which("valgrind") is None:
        return ["## Instructions", "", "valgrind is not installed: no count.", ""]
    small = os.path.join(work, "slice.pcapng")
    qs.sh(qs.CORECAP, "capture", *[x for s in srcs for x in ("-r", s)], "-c", str(packets),
          "--workers", "1", "--no-index", "-w", small)
    got = {}
    for index in (True, False):
        d = os.path.join(work, f"valgrind-{index}")
        os.makedirs(d)
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.out",
               qs.CORECAP, "capture", "-r", small, "--workers", "1", "--json",
               "--stats-interval", "0", "-w", os.path.join(d, "rec.pcapng"),
               "-b", "filesize:256000"]
        if not index:
            cmd.append("--no-index")
        r = qs.sh(*cmd, check=False)
        refs = [l for l in r.stderr.splitlines() if "refs:" in l]
        got[index] = int(refs[-1].split(":")[1].replace(",", "").strip())
        shutil.rmtree(d)
    per = {k: v / packets for k, v in got.items()}
    return [
        "## Instructions (valgrind)",
        "",
        f"The recorder (`capture -r` of the first {packets} packets of the source, every "
        "thread) under `valgrind --tool=callgrind`: user-space instructions, which no other "
        "load on the machine moves (the kernel's share, the same with or without the index, "
        "is not counted).",
        "",
        "| | instructions | per packet |",
        "|---|---|---|",
        f"| with the index | {got[True]:,} | {per[True]:.0f} |",
        f"| without | {got[False]:,} | {per[False]:.0f} |",
        "",
        f"The index: **{per[True] - per[False]:+.0f} instructions a packet, "
        f"{100.0 * (got[True] - got[False]) / got[False]:+.1f}%** of the recorder's "
        "user-space instructions.",
        "",
    ]


def perf_share(a, work):
    """One live recording with the index under perf: the share of the recorder's cpu-clock
    samples in the index's functions, and the top of the profile."""
    if shutil.which("perf") is None:
        return ["## perf", "", "perf is not installed: no profile.", ""]
    data = os.path.join(work, "perf.data")
    d = os.path.join(work, "perf-rec")
    holder = {}

    def attach(pid):
        holder["p"] = subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-p", str(pid), "-o", data],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    def detach():
        p = holder.pop("p")
        p.send_signal(signal.SIGINT)
        p.wait()

    qs.record(d, a, True, started=attach, stopping=detach)
    shutil.rmtree(d)
    rep = qs.sh("perf", "report", "-i", data, "--no-children", "--sort", "sym", "--stdio",
                check=False).stdout
    rows = []
    for line in rep.splitlines():
        # "  16.24%  [k] symbol": the share, kernel ([k]) or user ([.]), the symbol.
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].endswith("%"):
            rows.append((float(parts[0][:-1]), parts[1] == "[k]", parts[2].strip()))
    index = sum(p for p, _, s in rows if "corecap_index::" in s)
    kernel = sum(p for p, k, _ in rows if k)
    top = [f"| {p:.2f}% | {'kernel' if k else 'user'} | `{s}` |" for p, k, s in rows[:12]]
    return [
        "## Where a live recording's CPU goes (perf)",
        "",
        "One more live recording with the index, under `perf record -e cpu-clock` (every "
        "thread of the recorder). The index's own functions (`corecap_index::*`: the flow "
        "tuple, the keys, the postings, the regions' sets, the sidecar) take "
        f"**{index:.1f}%** of the samples; the kernel {kernel:.1f}%.",
        "",
        "| share | where | function |",
        "|---|---|---|",
        *top,
        "",
    ]


def main():
    ap = qs.traffic_args(0.5, 15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--source", choices=["live", "file", "both"], default="both")
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--instructions", type=int, default=0, metavar="PACKETS",
                    help="count the recorder's instructions under valgrind over this many "
                    "packets of the file source")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    a.per_phase = int(a.gib * (1 << 30) / 564 / a.phases) + 1
    work = tempfile.mkdtemp(prefix="corecap-index-cost-", dir=a.dir)
    qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
    qs.sh(qs.CORECAP, "lab", "up", "--netns", qs.NS, "--queues", "1")
    cmd = "bench/index_cost.py " + " ".join(sys.argv[1:])
    lines = [
        "# What the index costs the recorder",
        "",
        f"Command: `python3 {cmd}`",
        "",
        f"Traffic: 512-byte frames, {a.phases} phases of {a.flows} hosts sliding by {a.step}, "
        f"bursts of {a.burst}; about {a.gib} GiB a run; {a.rounds} rounds, with and without "
        "the index interleaved. CPU: every thread of the recording process (getrusage). The "
        "cost of a round is its run with the index against the run without it beside it.",
        "",
    ]
    try:
        if a.source in ("live", "both"):
            # One run of each first, not counted: the first capture after the lab is up
            # costs up to twice as much CPU whichever mode it is.
            if a.warmup:
                for index in (True, False):
                    d = os.path.join(work, f"warmup-{index}")
                    qs.record(d, a, index)
                    shutil.rmtree(d)

            def live(d, index):
                _, cpu, summary = qs.record(d, a, index)
                return cpu, summary["cpu_user"], summary

            sends = (f"at {a.rate:,} packets a second" if a.rate
                     else "as fast as it can, which varies from run to run")
            lines += table("Live: `capture -i` on the lab", rounds(a, work, live),
                           f"The generator on CPU 0, sending {sends}; the recorder's worker "
                           "on CPU 1.")
        srcs = []
        if a.source in ("file", "both") or a.instructions:
            src_dir = os.path.join(work, "src")
            qs.record(src_dir, a, False)
            srcs = [os.path.join(src_dir, f) for f in sorted(os.listdir(src_dir))
                    if f.endswith(".pcapng")]
            # In the page cache for every run alike.
            for src in srcs:
                with open(src, "rb") as f:
                    while f.read(1 << 24):
                        pass

        if a.source in ("file", "both"):
            def from_file(d, index):
                return record_file(srcs, d, index)

            if a.warmup:
                for index in (True, False):
                    d = os.path.join(work, f"warmup-file-{index}")
                    record_file(srcs, d, index)
                    shutil.rmtree(d)
            lines += table("File: `capture -r` of one recording of the lab's traffic",
                           rounds(a, work, from_file),
                           f"The source: {len(srcs)} pcapng files, "
                           f"{sum(os.path.getsize(s) for s in srcs) >> 20} MiB (the lab's "
                           "traffic recorded once), read from the page cache.")
        if a.instructions:
            lines += instructions(srcs, work, a.instructions)
        if a.perf:
            lines += perf_share(a, work)
    finally:
        qs.sh(qs.CORECAP, "lab", "down", "--netns", qs.NS, check=False)
        shutil.rmtree(work, ignore_errors=True)
    publish("\n".join(lines), a.out)


if __name__ == "__main__":
    main()
