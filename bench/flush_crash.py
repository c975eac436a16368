#!/usr/bin/env python3
"""What a crash costs, and what the flush timer costs.

1. Loss after SIGKILL, by --flush-interval (0, 1 s, 10 s) and rate: a beacon (1 packet a
   second for --beacon-seconds) and dense traffic (--line-rate packets a second of 512 bytes,
   what one worker captures without loss, for --line-seconds; a faster generator only adds
   ring drops, which a killed capture cannot report). Each run records on the lab with `corecap capture -w -b filesize:256000`,
   is killed with SIGKILL, and the next start over the same folder recovers what it left.
   Reported: packets cap0 received before the kill (its rx_packets), packets on disk after
   recovery, the difference, and the age at the kill of the newest packet on disk. The goal:
   nothing older than the interval is lost (age <= interval, and at a beacon's rate at most
   `interval` packets missing).
2. CPU per packet writing 1514-byte frames: this corecap with --flush-interval 1 (the
   default) and 0, the last release's corecap (--prev BINARY: its default wrote a buffer
   only when 1 MiB had filled), and tcpdump -w, each on the same --packets frames, --runs
   times, interleaved. CPU is the capturing process's own (getrusage of the child).

Usage: bench/flush_crash.py [--prev PATH] [--packets N] [--runs N] [--dir DIR] [--out FILE.md]
Needs root, the corecap release binary (cargo build --release) and tcpdump.
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.path.join(ROOT, "target", "release", "corecap")
NS = "cc-flush-bench"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def rx_packets():
    r = sh("ip", "netns", "exec", NS, "cat", "/sys/class/net/cap0/statistics/rx_packets")
    return int(r.stdout.strip())


def packet_sockets():
    r = sh("ip", "netns", "exec", NS, "cat", "/proc/net/packet", check=False)
    return max(0, len(r.stdout.splitlines()) - 1)


def start(cmd, **kw):
    """Starts a capturing process; returns once its packet socket has stayed up 0.3 s."""
    before = packet_sockets()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kw)
    deadline = time.time() + 20
    while packet_sockets() <= before:
        if time.time() > deadline or p.poll() is not None:
            sys.exit(f"{cmd[0]} did not start: {p.stderr.read() if p.poll() is not None else ''}")
        time.sleep(0.02)
    time.sleep(0.3)
    return p


def capture_cmd(binary, out, extra):
    return [binary, "capture", "--netns", NS, "-i", "cap0", "--workers", "1", "--cpus", "1",
            "--stats-interval", "0", "-w", out] + extra


def on_disk(folder):
    """(packets, newest timestamp) over the whole capture files of folder."""
    n, newest = 0, 0.0
    for name in sorted(os.listdir(folder)):
        if name.startswith(".") or name.endswith(".idx"):
            continue
        r = sh("tcpdump", "-tt", "-nn", "-r", os.path.join(folder, name), check=False)
        for line in r.stdout.splitlines():
            n += 1
            newest = max(newest, float(line.split()[0]))
    return n, newest


def crash_run(folder, interval, line_rate, seconds, pps):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    out = os.path.join(folder, "rec.pcapng")
    flags = ["-b", "filesize:256000", "--flush-interval", str(interval)]
    cap = start(capture_cmd(CORECAP, out, flags))
    rx0 = rx_packets()
    gen = [CORECAP, "gen", "--netns", NS, "-i", "gen0", "--engine", "txring", "--cpus", "0",
           "--duration", str(seconds + 30)]
    gen += (["--size", "512", "--flows", "64", "--rate", str(pps)] if line_rate
            else ["--rate", "1", "--flows", "1"])
    g = subprocess.Popen(gen, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    killed = time.time()
    rx = rx_packets() - rx0
    cap.send_signal(signal.SIGKILL)
    cap.wait()
    g.send_signal(signal.SIGINT)
    g.wait()
    # The next start over the folder recovers what the killed one left.
    r = sh(*capture_cmd(CORECAP, out, flags + ["--duration", "0.2"]), check=False)
    recovered = sum(1 for l in r.stderr.splitlines() if "recovered " in l)
    n, newest = on_disk(folder)
    return {"rx": rx, "disk": n, "age": killed - newest if newest else float("nan"),
            "recovered": recovered}


def cpu_run(binary, folder, flags, packets):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    if binary == "tcpdump":
        cmd = ["ip", "netns", "exec", NS, "tcpdump", "-i", "cap0", "-B", "262144", "-n", "-w",
               os.path.join(folder, "t.pcap")]
    else:
        cmd = capture_cmd(binary, os.path.join(folder, "rec.pcapng"), flags)
    p = start(cmd)
    rx0 = rx_packets()
    sh(CORECAP, "gen", "--netns", NS, "-i", "gen0", "--engine", "txring", "--cpus", "0",
       "--size", "1514", "--flows", "64", "--count", str(packets))
    time.sleep(1.0)
    rx = rx_packets() - rx0
    p.send_signal(signal.SIGINT)
    _, _, ru = os.wait4(p.pid, 0)
    return (ru.ru_utime + ru.ru_stime) / rx * 1e6, rx


def crash_table(a):
    lines = ["## Loss after SIGKILL, recovered at the next start", "",
             "| --flush-interval | traffic | received before the kill | on disk after "
             "recovery | missing | newest on disk, age at the kill | bound |",
             "|---|---|---|---|---|---|---|"]
    for interval in (0, 1, 10):
        for line_rate in (False, True):
            secs = a.line_seconds if line_rate else a.beacon_seconds
            r = crash_run(os.path.join(a.dir, "crash"), interval, line_rate, secs, a.line_rate)
            what = f"{a.line_rate} pps (512 B)" if line_rate else "beacon (1/s)"
            # Packets of the last interval, plus those still in the ring or its open block
            # (retired after 10 ms) when the process died.
            bound = (f"missing <= {a.line_rate * interval + a.line_rate // 100} (the last "
                     f"{interval} s + 10 ms)" if line_rate else f"missing <= {interval + 1}")
            row = (f"| {interval} s | {what} | {r['rx']} | {r['disk']} | "
                   f"{r['rx'] - r['disk']} | {r['age']:.3f} s | {bound} |")
            print(row, flush=True)
            lines.append(row)
    return lines


def cpu_table(a):
    lines = ["## CPU per packet writing 1514-byte frames", "",
             f"{a.packets} frames a run, {a.runs} runs each, interleaved; median of the runs.",
             "", "| writer | µs CPU per packet (median) | runs | ratio to corecap "
             "--flush-interval 1 |", "|---|---|---|---|"]
    tools = [("corecap --flush-interval 1", CORECAP, ["--flush-interval", "1"]),
             ("corecap --flush-interval 0", CORECAP, ["--flush-interval", "0"]),
             ("tcpdump -w -B 262144", "tcpdump", [])]
    if a.prev:
        tools.insert(1, ("last release's corecap (no timer)", a.prev, []))
    got = {name: [] for name, _, _ in tools}
    for _ in range(a.runs):
        for name, binary, flags in tools:
            us, rx = cpu_run(binary, os.path.join(a.dir, "cpu"), flags, a.packets)
            got[name].append(us)
            print(f"{name}: {us:.3f} µs/packet over {rx} packets", flush=True)
    base = statistics.median(got[tools[0][0]])
    for name, _, _ in tools:
        m = statistics.median(got[name])
        runs = ", ".join(f"{x:.3f}" for x in got[name])
        lines.append(f"| {name} | {m:.3f} | {runs} | {m / base:.2f} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prev", help="corecap binary of the last release")
    ap.add_argument("--packets", type=int, default=300_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--beacon-seconds", type=float, default=25.0)
    ap.add_argument("--line-seconds", type=float, default=4.0)
    ap.add_argument("--line-rate", type=int, default=200_000)
    ap.add_argument("--parts", default="crash,cpu", help="crash, cpu, or both")
    ap.add_argument("--dir", default="/var/tmp/corecap-flush-bench")
    ap.add_argument("--out")
    a = ap.parse_args()
    if not os.path.exists(CORECAP):
        sys.exit("build first: cargo build --release")
    sh(CORECAP, "lab", "down", "--netns", NS, check=False)
    sh(CORECAP, "lab", "up", "--netns", NS, "--queues", "1")
    lines = ["# Crash loss and flush cost", "",
             f"Command: `{' '.join(sys.argv)}`", "",
             f"Machine: {os.cpu_count()} cores, kernel {os.uname().release}", ""]
    try:
        if "crash" in a.parts:
            lines += crash_table(a) + [""]
        if "cpu" in a.parts:
            lines += cpu_table(a)
    finally:
        sh(CORECAP, "lab", "down", "--netns", NS, check=False)
        shutil.rmtree(a.dir, ignore_errors=True)
    publish("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
