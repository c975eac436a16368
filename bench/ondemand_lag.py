#!/usr/bin/env python3
"""Thread lag of on-demand captures (paper 004's second experiment) on the veth lab.

A `corecap serve` daemon runs a base capture on cap0 while a generator sends background
UDP traffic of one frame size. Each trial starts k captures one after another, `gap`
apart, all asking for the same traffic (`udp`, 50 packets, a pcapng file), in one of
three ways:

  attach   POST /captures to the daemon; the capture joins the base capture's workers
  spawn    POST /captures with mode spawn; a worker kept ready (a parked thread with its
           spare socket) runs the capture on a (shared) core
  spawn fifo  the same, the daemon started with --spawn-priority fifo:N (a second pass of
           the same run, with a daemon of its own: --fifo N)
  tcpdump  start `tcpdump -i cap0 -w FILE -c 50 udp` in the lab's namespace

Thread lag is the first captured packet's timestamp minus the moment the capture was
asked for: for corecap the request's arrival at the daemon (its `lag_us`), for tcpdump the
moment just before the process was started. The captures of a trial are numbered 1..k in
start order ("thread 3" is the third), so the trials cover k = 2..7.

Two sweeps, as in the paper's Fig. 4: lag against frame size (gap fixed), and lag against
gap (frame size fixed). Results: median and p99 per mode, plus the ratio tcpdump/attach.

Usage: bench/ondemand_lag.py [--sizes 100,400,800,1200] [--gaps 0.0001,0.001,0.01,0.1,0.5]
       [--k 7] [--reps 3] [--rate PPS] [--spares N] [--fifo N] [--record]
       [--modes attach,spawn,tcpdump] [--out FILE.md]
Needs root, the corecap release binary (cargo build --release; CORECAP=PATH for another)
and tcpdump.
"""

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.environ.get("CORECAP", os.path.join(ROOT, "target", "release", "corecap"))
NS = "cc-lagbench"
COUNT = 50


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def exchange(sock_path, request):
    """Sends one HTTP request on the daemon's Unix socket; returns (head, body) of the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock_path)
    s.sendall(request)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, payload = out.partition(b"\r\n\r\n")
    return head, payload


def api(sock_path, method, path, body=None):
    """One HTTP request on the daemon's Unix socket; returns (status, JSON)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: corecap\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    head, payload = exchange(sock_path, head.encode() + b"\r\n" + data)
    status = int(head.split()[1])
    return status, json.loads(payload) if payload else None


def metrics(sock_path):
    """GET /metrics on the daemon's Unix socket: the Prometheus text."""
    request = b"GET /metrics HTTP/1.1\r\nHost: corecap\r\nConnection: close\r\n\r\n"
    return exchange(sock_path, request)[1].decode()


def first_pcap_ts(path):
    """Timestamp (s) of the first packet of a pcap file (µs or ns resolution)."""
    with open(path, "rb") as f:
        gh = f.read(24)
        if len(gh) < 24:
            return None
        magic = struct.unpack("<I", gh[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        nano = struct.unpack(endian + "I", gh[:4])[0] == 0xA1B23C4D
        rh = f.read(16)
        if len(rh) < 16:
            return None
        sec, frac = struct.unpack(endian + "II", rh[:8])
        return sec + frac / (1e9 if nano else 1e6)


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    k = min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))
    return v[k]


class Bench:
    def __init__(self, args, fifo=None):
        self.args = args
        self.fifo = fifo
        self.tmp = tempfile.mkdtemp(prefix="corecap-lag-")
        self.sock = os.path.join(self.tmp, "api.sock")
        self.spool = os.path.join(self.tmp, "spool")
        self.daemon = None
        self.gen = None
        self.seq = 0

    def up(self):
        sh(CORECAP, "lab", "down", "--netns", NS, check=False)
        sh(CORECAP, "lab", "up", "--netns", NS, "--queues", "1")
        self.daemon = subprocess.Popen(
            [CORECAP, "serve", "--netns", NS, "-i", "cap0", "--socket", self.sock,
             "--spool", self.spool, "--share-cores", "--max-captures", "64",
             "--spares", str(self.args.spares)]
            + (["--spawn-priority", f"fifo:{self.fifo}"] if self.fifo else [])
            + (["--record", os.path.join(self.tmp, "record"), "-b", "filesize:100M", "--retain", "1G"]
               if self.args.record else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.daemon.stderr:
            if "serving on" in line:
                break
        else:
            sys.exit("corecap serve did not start")

    def down(self):
        self.background(None)
        if self.daemon:
            self.daemon.terminate()
            self.daemon.wait(timeout=30)
        sh(CORECAP, "lab", "down", "--netns", NS, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def background(self, size):
        """(Re)starts the background traffic with frames of `size` bytes (None: stop)."""
        if self.gen:
            self.gen.terminate()
            self.gen.wait(timeout=30)
            self.gen = None
        if size is None:
            return
        self.gen = subprocess.Popen(
            [CORECAP, "gen", "--netns", NS, "-i", "gen0", "--size", str(size), "--flows", "64",
             "--rate", str(self.args.rate), "--duration", "86400", "--cpus", str(self.args.gen_cpu)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    def pool_full(self, timeout=30):
        """Waits until the daemon keeps --spares workers ready on cap0 (the refill thread
        remakes them after a burst), so each trial starts alike."""
        want = f'corecap_spare_sockets{{interface="cap0"}} {self.args.spares}'
        deadline = time.time() + timeout
        while want not in metrics(self.sock):
            if time.time() > deadline:
                print(f"pool not full after {timeout} s", file=sys.stderr)
                return
            time.sleep(0.02)

    def clear_spool(self):
        for f in os.listdir(self.spool):
            if f.startswith(".corecap-captures"):
                continue  # the daemon's catalog, rewritten as captures end
            try:
                os.remove(os.path.join(self.spool, f))
            except FileNotFoundError:
                pass

    def trial(self, mode, gap):
        """Starts k captures `gap` seconds apart; returns their lags in µs, in start order."""
        k = self.args.k
        lags = []
        if self.args.spares:
            self.pool_full()
        if mode == "tcpdump":
            procs = []
            for i in range(k):
                self.seq += 1
                out = os.path.join(self.tmp, f"td{self.seq}.pcap")
                t = time.time()
                p = subprocess.Popen(
                    ["ip", "netns", "exec", NS, "tcpdump", "-i", "cap0", "-w", out, "-c",
                     str(COUNT), "-U", "udp"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append((p, out, t))
                time.sleep(gap)
            for p, out, t in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.terminate()
                    p.wait()
                ts = first_pcap_ts(out)
                lags.append((ts - t) * 1e6 if ts else float("nan"))
                os.remove(out)
            return lags, []
        ids = []
        for i in range(k):
            body = {"interface": "cap0", "filter": "udp", "count": COUNT}
            if mode.startswith("spawn"):
                body["mode"] = "spawn"
            status, v = api(self.sock, "POST", "/captures", body)
            if status != 201:
                sys.exit(f"start failed: {status} {v}")
            ids.append(v["id"])
            time.sleep(gap)
        setups = []
        for cid in ids:
            deadline = time.time() + 30
            while True:
                _, v = api(self.sock, "GET", f"/captures/{cid}")
                if v["state"] != "running" or time.time() > deadline:
                    break
                time.sleep(0.01)
            if v["state"] == "running":
                api(self.sock, "DELETE", f"/captures/{cid}")
            lags.append(v.get("lag_us", float("nan")))
            setups.append(v["setup_us"])
        self.clear_spool()
        return lags, setups

    def sweep(self, points, modes, label=None):
        """points: list of (size, gap). Returns {(size, gap, mode): (lags, by_thread, setups)};
        `label` renames the modes in the keys (a second pass: "spawn" as "spawn fifo")."""
        res = {}
        label = label or {}
        cur_size = None
        for size, gap in points:
            if size != cur_size:
                self.background(size)
                cur_size = size
            for mode in modes:
                lags, by_thread, setups = [], {}, []
                for _ in range(self.args.reps):
                    l, s = self.trial(mode, gap)
                    lags += l
                    setups += s
                    for i, x in enumerate(l):
                        by_thread.setdefault(i + 1, []).append(x)
                mode = label.get(mode, mode)
                res[(size, gap, mode)] = (lags, by_thread, setups)
                print(f"size {size} gap {gap * 1e3:g} ms {mode:10s} median {pct(lags, 50):10.0f} us "
                      f"p99 {pct(lags, 99):10.0f} us", file=sys.stderr)
        return res


def table(res, key_name, keys, modes, fmt):
    out = [f"| {key_name} | " + " | ".join(f"{m} median | {m} p99 | {m} worst" for m in modes)
           + " | tcpdump/attach (median) |",
           "|---|" + "---|" * (3 * len(modes) + 1)]
    for k, rk in keys:
        row = [fmt(k)]
        for m in modes:
            lags = [x for x in res[rk + (m,)][0] if x == x]
            row += [f"{pct(lags, 50):,.0f} µs", f"{pct(lags, 99):,.0f} µs",
                    f"{max(lags) if lags else float('nan'):,.0f} µs"]
        if "attach" in modes and "tcpdump" in modes:
            a = pct([x for x in res[rk + ("attach",)][0] if x == x], 50)
            t = pct([x for x in res[rk + ("tcpdump",)][0] if x == x], 50)
            row.append(f"{t / a:,.0f}×" if a > 0 else "-")
        else:
            row.append("-")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def by_thread_table(res, rk, modes, k):
    out = ["| thread | " + " | ".join(f"{m} median" for m in modes) + " |",
           "|---|" + "---|" * len(modes)]
    for i in range(1, k + 1):
        row = [str(i)]
        for m in modes:
            v = [x for x in res[rk + (m,)][1].get(i, []) if x == x]
            row.append(f"{pct(v, 50):,.0f} µs")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,400,800,1200")
    ap.add_argument("--gaps", default="0.0001,0.001,0.01,0.1,0.5")
    ap.add_argument("--size-for-gaps", type=int, default=400)
    ap.add_argument("--gap-for-sizes", type=float, default=0.01)
    ap.add_argument("--k", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=100000)
    ap.add_argument("--gen-cpu", type=int, default=1,
                    help="the generator's CPU (default 1, the base capture's: the daemon "
                         "answers requests on the CPUs that capture nothing, and a generator "
                         "there stops sending while the daemon works, so the lag would "
                         "measure the daemon's CPU time rather than the capture's start)")
    ap.add_argument("--spares", type=int, default=2,
                    help="workers the daemon keeps ready per interface (serve --spares)")
    ap.add_argument("--fifo", type=int,
                    help="a second pass with serve --spawn-priority fifo:N (spawn mode only)")
    ap.add_argument("--record", action="store_true",
                    help="the daemon also records its base capture (serve --record), as a sensor does")
    ap.add_argument("--modes", default="attach,spawn,tcpdump",
                    help="which ways to start captures (attach, spawn, tcpdump)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (namespaces)")
    if not os.path.exists(CORECAP):
        sys.exit("build first: cargo build --release")
    if not shutil.which("tcpdump"):
        sys.exit("needs tcpdump")
    sizes = [int(x) for x in args.sizes.split(",")]
    gaps = [float(x) for x in args.gaps.split(",")]
    modes = args.modes.split(",")
    points = ([(s, args.gap_for_sizes) for s in sizes]
              + [(args.size_for_gaps, g) for g in gaps if g != args.gap_for_sizes
                 or args.size_for_gaps not in sizes])
    load = [os.getloadavg()]
    b = Bench(args)
    try:
        b.up()
        res = b.sweep(points, modes)
    finally:
        b.down()
    if args.fifo:
        load.append(os.getloadavg())
        b = Bench(args, fifo=args.fifo)
        try:
            b.up()
            res.update(b.sweep(points, ["spawn"], label={"spawn": "spawn fifo"}))
        finally:
            b.down()
        modes = ["attach", "spawn", "spawn fifo", "tcpdump"]
    load.append(os.getloadavg())
    cmd = "python3 bench/ondemand_lag.py " + " ".join(sys.argv[1:])
    tcpdump_v = sh("tcpdump", "--version", check=False).stdout.splitlines()[:1]
    setups = {m: [s for (sz, g, mm), (_, _, st) in res.items() if mm == m for s in st]
              for m in modes if m != "tcpdump"}
    md = [
        "# On-demand capture: thread lag (paper 004, Fig. 4)",
        "",
        f"Command: `{cmd}`",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, kernel {platform.release()}; "
        f"{tcpdump_v[0] if tcpdump_v else 'tcpdump'}.",
        f"Background: UDP at {args.rate} packets/s, 64 flows, generator on CPU {args.gen_cpu}; the base "
        "capture's one worker on CPU 1; each capture asks for `udp`, 50 packets, pcapng "
        f"(tcpdump: pcap). k = {args.k} captures per trial, {args.reps} trials per point; "
        "the lag of every capture counts. "
        f"The daemon keeps {args.spares} workers ready per interface (`serve --spares "
        f"{args.spares}`)"
        + (f"; `spawn fifo` is a second pass with `serve --spawn-priority fifo:{args.fifo}`"
           if args.fifo else "") + ".",
        "",
        "Load average (1, 5, 15 min) at the start of each pass and at the end: "
        + "; ".join(", ".join(f"{x:.2f}" for x in l) for l in load) + ".",
        "",
        "Lag: first captured packet's kernel timestamp minus the request's arrival at the "
        "daemon (corecap) or the moment before the tcpdump process was started.",
        "",
        f"## Lag against frame size (gap {args.gap_for_sizes * 1e3:g} ms)",
        "",
        table(res, "frame size", [(s, (s, args.gap_for_sizes)) for s in sizes], modes, lambda s: f"{s} B"),
        "",
        f"## Lag against gap between captures (frame size {args.size_for_gaps} B)",
        "",
        table(res, "gap", [(g, (args.size_for_gaps, g)) for g in gaps], modes,
              lambda g: f"{g * 1e3:g} ms"),
        "",
        f"## Lag by thread (start order), frame size {args.size_for_gaps} B, gap {args.gap_for_sizes * 1e3:g} ms",
        "",
        by_thread_table(res, (args.size_for_gaps, args.gap_for_sizes), modes, args.k),
        "",
        "## Setup time (request to capture in place)",
        "",
        "; ".join(f"{m}: median {pct(v, 50):,.0f} µs, p99 {pct(v, 99):,.0f} µs"
                  for m, v in setups.items()) + ".",
        "",
    ]
    publish("\n".join(md), args.out)


if __name__ == "__main__":
    main()
