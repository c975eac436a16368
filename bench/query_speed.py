#!/usr/bin/env python3
"""Retrieval benchmark: record on the lab, then find packets again, corecap query against
tcpdump -r over the same files.

1. Records at least --gib GiB of 512-byte frames on the lab with `corecap capture -w -b
   filesize:256000`, in --phases phases of traffic. Each phase brings its own hosts (a window
   of --flows flows that slides by --step flows per phase, so hosts come and go) and each
   host sends in bursts of --burst packets, as real hosts do. The same traffic is recorded
   a second time with --no-index, to measure what writing the index costs the recorder.
2. Index size against capture size.
3. With the page cache dropped before each run:
   - one host over the whole range: `corecap query DIR 'host H'` against `tcpdump -r F
     'host H'` over every file (wall time, bytes read, and the same packets);
   - a window of one phase out of all of them, no filter: the bytes corecap reads against
     the whole recording.

Usage: bench/query_speed.py [--gib 2] [--phases 60] [--dir DIR] [--out FILE.md]
Needs root and the corecap release binary (cargo build --release).
"""

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.path.join(ROOT, "target", "release", "corecap")
NS = "cc-query-bench"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def drop_caches():
    sh("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def packet_sockets():
    r = sh("ip", "netns", "exec", NS, "cat", "/proc/net/packet", check=False)
    return max(0, len(r.stdout.splitlines()) - 1)


def record(outdir, a, index, started=None, stopping=None):
    """Records every phase into outdir; returns (phase windows, capture CPU s, summary).
    started(pid) is called once the capture is up, stopping() before it is stopped."""
    os.makedirs(outdir, exist_ok=True)
    cmd = [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--workers", "1", "--cpus", "1",
           "--json", "--stats-interval", "0", "-w", os.path.join(outdir, "rec.pcapng"),
           "-b", "filesize:256000"]
    if not index:
        cmd.append("--no-index")
    before = packet_sockets()
    so = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 20
    while packet_sockets() <= before:
        if time.time() > deadline or p.poll() is not None:
            sys.exit("capture did not start")
        time.sleep(0.05)
    time.sleep(0.5)
    if started:
        started(p.pid)
    windows = []
    for ph in range(a.phases):
        t0 = time.time()
        sh(CORECAP, "gen", "--netns", NS, "-i", "gen0", "--engine", "txring", "--size", "512",
           "--flows", str(a.flows), "--flow-base", str(ph * a.step), "--burst", str(a.burst),
           "--count", str(a.per_phase), "--cpus", "0", "--json",
           *(["--rate", str(a.rate)] if getattr(a, "rate", 0) else []))
        windows.append((t0, time.time()))
        time.sleep(0.05)
    time.sleep(0.5)
    if stopping:
        stopping()
    p.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(p.pid, 0)
    so.seek(0)
    summary = json.loads([l for l in so.read().splitlines() if '"summary"' in l][-1])
    # User time alone beside the total: the index is user-space work, and the system time
    # (ring, poll, io_uring) varies most from run to run on a shared machine.
    summary["cpu_user"] = ru.ru_utime
    return windows, ru.ru_utime + ru.ru_stime, summary


def daddr(f):
    return f"10.{1 + (f >> 16)}.{(f >> 8) & 255}.{f & 255}"


def timed(cmd):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True)
    return time.time() - t0, r


def count_pcap(path):
    r = sh("capinfos", "-c", "-M", path, check=False)
    for line in r.stdout.splitlines():
        if "Number of packets" in line:
            return int(line.split(":")[1].strip())
    return 0


def traffic_args(gib, phases):
    """The arguments that shape the recorded traffic and where it goes (also
    bench/index_cost.py's)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=gib)
    ap.add_argument("--phases", type=int, default=phases)
    ap.add_argument("--flows", type=int, default=200)
    ap.add_argument("--step", type=int, default=120)
    ap.add_argument("--burst", type=int, default=32)
    ap.add_argument("--rate", type=int, default=0,
                    help="packets a second the generator sends (0: as fast as it can)")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--out", default=None)
    return ap


def main():
    a = traffic_args(2.0, 60).parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    # 512-byte frames take 564 bytes in corecap pcapng.
    a.per_phase = int(a.gib * (1 << 30) / 564 / a.phases) + 1
    work = tempfile.mkdtemp(prefix="corecap-query-bench-", dir=a.dir)
    sh(CORECAP, "lab", "down", "--netns", NS, check=False)
    sh(CORECAP, "lab", "up", "--netns", NS, "--queues", "1")
    try:
        rec = os.path.join(work, "rec")
        plain = os.path.join(work, "plain")
        windows, cpu_index, sum_index = record(rec, a, True)
        _, cpu_plain, sum_plain = record(plain, a, False)
        shutil.rmtree(plain)
        files = sorted(os.path.join(rec, f) for f in os.listdir(rec) if f.endswith(".pcapng"))
        cap_bytes = sum(os.path.getsize(f) for f in files)
        idx_bytes = sum(os.path.getsize(f + ".idx") for f in files if os.path.exists(f + ".idx"))
        # One host of the middle phase, over the whole recording.
        mid = a.phases // 2
        host = daddr(mid * a.step + a.flows // 2)
        out = os.path.join(work, "q.pcapng")
        drop_caches()
        t_q, r = timed([CORECAP, "query", "--force", rec, "--json", "-w", out, f"host {host}"])
        q = json.loads(r.stdout.decode().strip().splitlines()[-1])
        got = count_pcap(out)
        drop_caches()
        t_t = 0.0
        want = 0
        for f in files:
            o = os.path.join(work, "t.pcap")
            dt, r2 = timed(["tcpdump", "-n", "-r", f, "-w", o, f"host {host}"])
            t_t += dt
            want += count_pcap(o)
            os.unlink(o)
        # One phase's window out of all of them, no filter.
        w0, w1 = windows[mid]
        drop_caches()
        t_w, r3 = timed([CORECAP, "query", "--force", rec, "--json", "-w", out, "--from", f"{w0:.6f}", "--to", f"{w1:.6f}"])
        qw = json.loads(r3.stdout.decode().strip().splitlines()[-1])
        rows = {
            "recorded_packets": sum_index["packets"], "files": len(files), "capture_bytes": cap_bytes,
            "index_bytes": idx_bytes, "index_pct": 100.0 * idx_bytes / cap_bytes,
            "record_cpu_s_index": cpu_index, "record_cpu_s_no_index": cpu_plain,
            "index_cpu_pct": 100.0 * (cpu_index - cpu_plain) / cpu_plain if cpu_plain else None,
            "host": host, "host_packets_corecap": q["packets"], "host_packets_out": got,
            "host_packets_tcpdump": want, "host_bytes_read": q["bytes_read"],
            # Against the whole recording: a query's bytes_total counts only the files the
            # catalog let it open.
            "host_bytes_read_pct": 100.0 * q["bytes_read"] / cap_bytes,
            "host_seconds_corecap": t_q, "host_seconds_tcpdump": t_t, "speedup": t_t / t_q if t_q else None,
            "window_phase": mid, "window_packets": qw["packets"], "window_bytes_read": qw["bytes_read"],
            "window_bytes_read_pct": 100.0 * qw["bytes_read"] / cap_bytes,
            "window_files_opened": qw.get("files"), "window_files_pruned": qw.get("files_pruned"),
            "window_share_pct": 100.0 / a.phases, "window_seconds": t_w,
            "drops_index_run": sum_index["drops"], "drops_plain_run": sum_plain["drops"],
        }
    finally:
        sh(CORECAP, "lab", "down", "--netns", NS, check=False)
        shutil.rmtree(work, ignore_errors=True)
    publish(report(rows, a), a.out, "\n```json\n" + json.dumps(rows, indent=1) + "\n```\n")


def report(r, a):
    lines = ["# Retrieval: corecap query against tcpdump -r", "",
             f"Command: `{' '.join(sys.argv)}`", "",
             f"Recording: {r['recorded_packets']} frames of 512 bytes in {r['files']} files "
             f"({r['capture_bytes'] / 2**30:.2f} GiB), {a.phases} phases of {a.flows} hosts sliding by "
             f"{a.step} per phase, bursts of {a.burst} packets per host. Page cache dropped before each query.", "",
             "| measure | value | goal |", "|---|---|---|",
             f"| index size | {r['index_bytes']} B = {r['index_pct']:.3f}% of the capture | ≤ 2% |",
             f"| recorder CPU with the index / without | {r['record_cpu_s_index']:.2f} s / {r['record_cpu_s_no_index']:.2f} s "
             f"({r['index_cpu_pct']:+.1f}%) | ≤ +15% |",
             f"| one host ({r['host']}) over the whole range: bytes read | {r['host_bytes_read_pct']:.2f}% | ≤ 5% |",
             f"| one host: corecap query / tcpdump -r over every file | {r['host_seconds_corecap']:.2f} s / "
             f"{r['host_seconds_tcpdump']:.2f} s ({r['speedup']:.1f}× faster) | ≥ 20× |",
             f"| one host: packets (corecap, its output, tcpdump) | {r['host_packets_corecap']}, {r['host_packets_out']}, "
             f"{r['host_packets_tcpdump']} | equal |",
             f"| one phase's window ({r['window_share_pct']:.2f}% of the time): bytes read | "
             f"{r['window_bytes_read_pct']:.2f}% ({r['window_packets']} packets, {r['window_seconds']:.2f} s) | about that share |",
             ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
