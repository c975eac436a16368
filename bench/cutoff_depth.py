#!/usr/bin/env python3
"""What `--flow-cutoff` saves and costs (issue 38): a heavy-tailed mix of whole
connections (`corecap lab mix`: Pareto-sized responses, α = 1.1, many small, a few bulk)
recorded plain and with `--flow-cutoff 15k`, several rounds, alternating which goes first.

Two sources:
- file: `capture -r mix.pcap -w` (a file source waits for the disk, so every packet is
  taken): bytes on disk (packets, index and sessions files), packets kept and cut, and
  CPU seconds of the recording process (getrusage: every thread) per million packets.
- live: the lab's gen0 sends the mix with `tcpreplay --topspeed -K` (as fast as it goes),
  `capture -i cap0 --workers 1` records it: packets counted, kept, cut and dropped, and
  the recorder's CPU per million packets at that rate.

Usage: bench/cutoff_depth.py [--connections 20000] [--max-bytes 20M] [--alpha 1.1] [--rounds 3]
                             [--corecap PATH] [--out FILE.md]
Needs root, tcpreplay and a corecap release binary (cargo build --release).
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from recording import folder_bytes, med, run_capture, sh
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "cc-cutoff-bench"
MODES = {"plain": [], "cut 15k": ["--flow-cutoff", "15k"]}


def file_round(a, mix, work, mode):
    out = os.path.join(work, "rec")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [a.corecap, "capture", "-r", mix, "--workers", "1", "--json", "--stats-interval",
           "0", "-w", os.path.join(out, "rec.pcapng"), "-b", "filesize:256000", *MODES[mode]]
    cpu, s = run_capture(cmd)
    every, pcapng = folder_bytes(out)
    return {"cpu": cpu, "counted": s["kernel_packets"], "kept": s["packets"],
            "cut": s["cut"]["packets"], "every": every, "pcapng": pcapng,
            "balanced": s["balanced"]}


def live_round(a, mix, work, mode):
    out = os.path.join(work, "live")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    sent = {}

    def send():
        r = sh("ip", "netns", "exec", NS, "tcpreplay", "--topspeed", "-K", "-i", "gen0", mix)
        for line in r.stdout.splitlines():
            # "Actual: 23897 packets (12258102 bytes) sent in 0.12 seconds"
            if "Actual:" in line:
                words = line.split()
                sent["n"] = int(words[1])
                sent["s"] = float(words[words.index("in") + 1])
    cmd = [a.corecap, "capture", "--netns", NS, "-i", "cap0", "--workers", "1", "--cpus",
           "1", "--json", "--stats-interval", "0", "-w", os.path.join(out, "rec.pcapng"),
           "-b", "filesize:256000", *MODES[mode]]
    cpu, s = run_capture(cmd, during=send)
    every, pcapng = folder_bytes(out)
    d = s["drops"]
    return {"cpu": cpu, "sent": sent.get("n", 0), "pps": sent.get("n", 0) / sent.get("s", 1),
            "counted": s["kernel_packets"], "kept": s["packets"], "cut": s["cut"]["packets"],
            "drops": d["kernel"] + d["app"] + d["disk"], "every": every, "pcapng": pcapng,
            "balanced": s["balanced"]}


def table(title, res, live):
    plain = med(res["plain"], "every")
    rows = [f"### {title}", "",
            "| mode | counted | kept | cut | drops | pcapng bytes | bytes on disk | of plain |"
            " CPU s / M packets counted |",
            "|---|---|---|---|---|---|---|---|---|"]
    for mode, rs in res.items():
        rows.append(
            f"| {mode} | {med(rs, 'counted'):.0f} | {med(rs, 'kept'):.0f} | "
            f"{med(rs, 'cut'):.0f} | {med(rs, 'drops') if live else 0:.0f} | "
            f"{med(rs, 'pcapng'):.0f} | {med(rs, 'every'):.0f} | "
            f"{100 * med(rs, 'every') / plain:.1f}% | "
            f"{1e6 * med(rs, 'cpu') / max(1, med(rs, 'counted')):.2f} |")
    if live:
        rows.append("")
        rows.append("Offered rate (tcpreplay --topspeed -K, median): " + ", ".join(
            f"{mode} {med(rs, 'pps'):.0f} pps" for mode, rs in res.items()))
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=20000)
    ap.add_argument("--max-bytes", default="20M")
    ap.add_argument("--alpha", default="1.1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corecap", default=os.path.join(ROOT, "target", "release", "corecap"))
    ap.add_argument("--source", choices=["file", "live", "both"], default="both")
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cutoff-bench-", dir="/var/tmp")
    try:
        mix = os.path.join(work, "mix.pcap")
        m = json.loads(sh(a.corecap, "lab", "mix", "-w", mix, "--connections",
                          str(a.connections), "--max-bytes", a.max_bytes,
                          "--alpha", a.alpha).stdout)
        text = [f"## --flow-cutoff 15k on a heavy-tailed mix ({a.connections} connections, "
                f"Pareto α {a.alpha} from 1 KB to {a.max_bytes}, "
                f"{m['packets']} packets, {m['bytes']} frame bytes; median of {a.rounds} "
                "rounds)", ""]
        raw = {}
        if a.source in ("file", "both"):
            res = {k: [] for k in MODES}
            for r in range(a.rounds):
                for mode in (list(MODES) if r % 2 == 0 else list(MODES)[::-1]):
                    res[mode].append(file_round(a, mix, work, mode))
            text.append(table("File source (capture -r mix.pcap -w, 1 worker)", res, False))
            raw["file"] = res
        if a.source in ("live", "both"):
            sh(a.corecap, "lab", "down", "--netns", NS, check=False)
            sh(a.corecap, "lab", "up", "--netns", NS, "--queues", "1")
            try:
                res = {k: [] for k in MODES}
                for r in range(a.rounds):
                    for mode in (list(MODES) if r % 2 == 0 else list(MODES)[::-1]):
                        res[mode].append(live_round(a, mix, work, mode))
                text.append(table("Live at top rate (tcpreplay into the lab, capture -i "
                                  "cap0 --workers 1)", res, True))
                raw["live"] = res
            finally:
                sh(a.corecap, "lab", "down", "--netns", NS, check=False)
        cmd = "bench/cutoff_depth.py " + " ".join(sys.argv[1:])
        publish("\n".join(text) + f"\nCommand: `{cmd}`\n", a.out,
                "\n<!-- raw rounds\n" + json.dumps(raw, indent=1) + "\n-->\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
