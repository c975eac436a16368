#!/usr/bin/env python3
"""What `--compress zstd` saves and costs (issue 38), beside `--flow-cutoff 15k` and both:
the same traffic recorded four ways, several rounds, the order of the modes turned each
round.

Traffic:
- the heavy-tailed mix (`corecap lab mix`: Pareto-sized responses); its payload is the
  connection's number and zeros, far more compressible than real traffic;
- the same mix with every payload byte random (`lab mix --random-payload`; as TLS, most
  of today's traffic, is to a compressor): only the headers compress;
- with --shares, the same mix with that percent of each payload random and the rest zeros
  (`lab mix --random-share`): traffic that compresses in part;
- the public captures the tests read (crates/cli/tests/data/real), each recorded alone
  (bytes only: they are too small to time).

For each mode, from a file (`capture -r -w`, 1 worker, which waits for the disk so every
packet is taken): bytes on disk (capture files, and everything with indexes and sessions
files), the recorder's CPU (getrusage, every thread) per million packets and against plain
(the median of each round's ratio to plain's in the same round, with their spread), and two queries
over the recording: one connection (`host A and port P`, a needle) and one service
(`tcp port 443`, about a fifth of the packets): median time and the bytes they read.

Usage: bench/compress_depth.py [--connections 20000] [--max-bytes 20M] [--alpha 1.1]
                               [--rounds 3] [--level 1] [--sealed] [--shares 70,85]
                               [--corecap PATH] [--out FILE.md]
--shares adds payloads that are that percent random and the rest zeros (`lab mix
--random-share`): traffic that compresses in part, as most networks' does.
--sealed also records sealed (`--encrypt aes`), plain and compressed.
Needs a corecap release binary (cargo build --release).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from recording import folder_bytes, med, run_capture, sh
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modes(level, key=None):
    z = ["--compress", f"zstd:{level}"]
    m = {"plain": [], "zstd": z, "cut 15k": ["--flow-cutoff", "15k"],
         "cut 15k + zstd": ["--flow-cutoff", "15k", *z]}
    if key:
        sealed = ["--encrypt", "aes", "--key-file", key]
        m.update({"sealed": sealed, "sealed + zstd": [*sealed, *z]})
    return m


def record(a, src, out, extra):
    """Records src into folder out; (CPU s, summary)."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    name = "rec.pcapng.sealed" if "--encrypt" in extra else "rec.pcapng"
    return run_capture([a.corecap, "capture", "-r", src, "--workers", "1", "--json",
                        "--stats-interval", "0", "-w", os.path.join(out, name),
                        "-b", "filesize:256000", *extra])


def query(a, folder, work, flt):
    """(seconds, bytes read, packets) of a query over folder (files in the page cache)."""
    out = os.path.join(work, "q.pcapng")
    t = time.perf_counter()
    key = ["--key-file", a.key] if a.key else []
    r = sh(a.corecap, "query", "--force", "--json", *key, "-w", out, "-r", folder, flt)
    took = time.perf_counter() - t
    v = json.loads(r.stdout.splitlines()[-1])
    return took, v["bytes_read"], v["packets"]


def mix_rounds(a, src, work, needle):
    ms = modes(a.level, a.key)
    res = {k: [] for k in ms}
    for r in range(a.rounds):
        for mode in (list(ms) if r % 2 == 0 else list(ms)[::-1]):
            out = os.path.join(work, "rec")
            cpu, s = record(a, src, out, ms[mode])
            every, caps = folder_bytes(out)
            row = {"cpu": cpu, "counted": s["kernel_packets"], "kept": s["packets"],
                   "every": every, "caps": caps, "balanced": s["balanced"],
                   "drops": sum(s["drops"].values())}
            for name, flt in (("needle", needle), ("service", "tcp port 443")):
                query(a, out, work, flt)  # the files into the page cache, both alike
                qs = [query(a, out, work, flt) for _ in range(3)]
                row[name + "_s"] = statistics.median(q[0] for q in qs)
                row[name + "_read"] = qs[0][1]
                row[name + "_packets"] = qs[0][2]
            res[mode].append(row)
    return res


def mix_table(title, res):
    plain = res["plain"]
    rows = [f"### {title}", "",
            "| mode | kept | drops | capture bytes | bytes on disk | of plain | CPU s / M packets"
            " | CPU of plain (min-max) | needle query: ms, bytes read (of plain) | tcp port 443: ms,"
            " bytes read (of plain) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for mode, rs in res.items():
        cpu = 1e6 * med(rs, "cpu") / max(1, med(rs, "counted"))
        # Each round's CPU against plain's of the same round: pairs keep the ratio when the
        # machine's speed drifts between rounds.
        ratios = sorted(r["cpu"] / p["cpu"] for r, p in zip(rs, plain))
        q = []
        for name in ("needle", "service"):
            q.append(f"{1e3 * med(rs, name + '_s'):.1f} ms, {med(rs, name + '_read'):.0f} B "
                     f"({100 * med(rs, name + '_read') / max(1, med(plain, name + '_read')):.0f}%)"
                     f", {med(rs, name + '_packets'):.0f} pkts")
        rows.append(
            f"| {mode} | {med(rs, 'kept'):.0f} | {med(rs, 'drops'):.0f} | "
            f"{med(rs, 'caps'):.0f} | {med(rs, 'every'):.0f} | "
            f"{100 * med(rs, 'every') / med(plain, 'every'):.1f}% | {cpu:.2f} | "
            f"{100 * statistics.median(ratios):.0f}% ({100 * ratios[0]:.0f}-"
            f"{100 * ratios[-1]:.0f}) | {q[0]} | {q[1]} |")
    return "\n".join(rows) + "\n"


def public_table(a, work):
    real = os.path.join(ROOT, "crates", "cli", "tests", "data", "real")
    files = sorted(f for f in os.listdir(real) if f.endswith((".pcap", ".pcapng")))
    ms = {"plain": [], "zstd": ["--compress", f"zstd:{a.level}"]}
    tot = {m: [0, 0] for m in ms}
    for f in files:
        for mode, extra in ms.items():
            out = os.path.join(work, "pub")
            record(a, os.path.join(real, f), out, extra)
            every, caps = folder_bytes(out)
            tot[mode][0] += every
            tot[mode][1] += caps
    rows = [f"### The public captures of the tests ({len(files)} files of "
            "crates/cli/tests/data/real, each recorded alone)", "",
            "| mode | capture bytes | bytes on disk | capture bytes of plain |", "|---|---|---|---|"]
    for mode, (every, caps) in tot.items():
        rows.append(f"| {mode} | {caps} | {every} | {100 * caps / tot['plain'][1]:.1f}% |")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=20000)
    ap.add_argument("--max-bytes", default="20M")
    ap.add_argument("--alpha", default="1.1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--corecap", default=os.path.join(ROOT, "target", "release", "corecap"))
    ap.add_argument("--sealed", action="store_true",
                    help="also record sealed (--encrypt aes), plain and compressed")
    ap.add_argument("--shares", default="",
                    help="more payloads, each this percent random (70,85): comma-separated")
    ap.add_argument("--out")
    a = ap.parse_args()
    a.shares = [int(p) for p in a.shares.split(",") if p]
    work = tempfile.mkdtemp(prefix="compress-bench-", dir="/var/tmp")
    a.key = None
    try:
        if a.sealed:
            a.key = os.path.join(work, "bench.key")
            sh(a.corecap, "keygen", "-o", a.key)
        payloads = [("Payload as `lab mix` writes it (zeros after a counter)", []),
                    ("Payload random (as TLS is to a compressor)", ["--random-payload"])]
        payloads += [(f"Payload {p}% random, the rest zeros (as traffic that compresses in "
                      "part)", ["--random-share", str(p)]) for p in a.shares]
        sources = []
        for k, (title, more) in enumerate(payloads):
            path = os.path.join(work, f"mix{k}.pcap")
            m = json.loads(sh(a.corecap, "lab", "mix", "-w", path, "--connections",
                              str(a.connections), "--max-bytes", a.max_bytes,
                              "--alpha", a.alpha, *more).stdout)
            sources.append((title, path))
        # One connection of the middle of the mix: client 10.0.0.x port 20000 + i.
        i = a.connections // 2
        needle = f"host 10.0.{(i >> 8) & 255}.{i & 255} and port {20000 + i % 40000}"
        text = [f"## --compress zstd:{a.level} and --flow-cutoff 15k on a heavy-tailed mix "
                f"({a.connections} connections, Pareto α {a.alpha} from 1 KB to "
                f"{a.max_bytes}, {m['packets']} packets, {m['bytes']} frame bytes; median of "
                f"{a.rounds} rounds, capture -r -w with 1 worker)", "",
                f"Needle query: `{needle}`.", ""]
        raw = {}
        for title, src in sources:
            res = mix_rounds(a, src, work, needle)
            text.append(mix_table(title, res))
            raw[title] = res
        text.append(public_table(a, work))
        cmd = "bench/compress_depth.py " + " ".join(sys.argv[1:])
        publish("\n".join(text) + f"\nCommand: `{cmd}`\n", a.out,
                "\n<!-- raw rounds\n" + json.dumps(raw, indent=1) + "\n-->\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
