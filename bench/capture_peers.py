#!/usr/bin/env python3
"""Capture benchmark on the veth lab: corecap against tcpdump, dumpcap and netsniff-ng.

For each regime and frame size, it sends N packets into the lab's gen0 and captures them
on cap0 with each tool in turn, one at a time. It reports, per tool: captured % of the
packets cap0 received (its rx_packets counter), the drops the tool reports, and CPU
seconds per million packets of the capturing process (getrusage of the child).

Regimes:
  txring     one PACKET_TX_RING generator thread, default veth (receive work in the
             sender's softirq)
  xdp        the XDP live-frames generator (faster than one capture core), 2-queue lab
  xdp1q      the same generator into a 1-queue lab: one RX queue for everything (for
             corecap-xdp-1s against corecap-xdp-spread2, AF_XDP spread in the kernel)
  contended  receive work moved onto the capture core with threaded NAPI pinned to it
             (paper 001, test 3); the capturer is pinned to the same core

Tools: corecap-count (one worker per core, AF_PACKET), corecap-count-1w (one worker on
CPU 1, away from the generator on CPU 0), corecap-write (pcapng files; -nosessions: with --no-sessions), corecap-write-1w
(one worker on CPU 1 writing pcapng), corecap-pipeline and corecap-pipeline-mpsc (capture
on CPU 1, the count app on a stage thread on CPU 0, over SPSC rings or the PFQ queue),
corecap-seed-1w / corecap-aes-1w (paper 003 Table II on one core: capture, encrypt with
SEED-GCM or AES-256-GCM and write on CPU 1), corecap-write-pipeline / corecap-seed-pipeline /
corecap-aes-pipeline (two cores: capture on CPU 1, write or encrypt+write on a stage thread
on CPU 0), corecap-xdp and
corecap-xdp-write (AF_XDP, one worker per RX queue), tcpdump -w, dumpcap -w, netsniff-ng.

Each tool is started and traffic is sent only once its packet socket shows in the lab's
/proc/net/packet (and has stayed there for half a second), so a slow start is never
measured as loss. Files go to --dir (default: a directory on the disk under /var/tmp, not
tmpfs). Besides the tool's own CPU (getrusage), it reports the whole machine's busy CPU
seconds (from /proc/stat) from the tool's start to its exit plus a final `sync`, which
includes the page cache's writeback in kernel threads (and the generator, the same for
every tool).

Usage: bench/capture_peers.py [--packets N] [--sizes 64,1518] [--regimes txring,xdp,contended]
       [--tools LIST] [--rate PPS] [--dir DIR] [--out FILE.md]
Needs root, the corecap release binary (cargo build --release), and the peers installed.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.path.join(ROOT, "target", "release", "corecap")
NS = "cc-bench"
# Key file for the encrypting tools, made once per run by `corecap keygen`.
KEY = os.path.join(tempfile.gettempdir(), f"corecap-bench-{os.getpid()}.key")


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def lab_up(queues, napi_cpu=None):
    sh(CORECAP, "lab", "down", "--netns", NS, check=False)
    extra = ["--threaded-napi", str(napi_cpu)] if napi_cpu is not None else []
    sh(CORECAP, "lab", "up", "--netns", NS, "--queues", str(queues), *extra)


def lab_down():
    sh(CORECAP, "lab", "down", "--netns", NS, check=False)


def rx_packets():
    r = sh("ip", "netns", "exec", NS, "cat", "/sys/class/net/cap0/statistics/rx_packets")
    return int(r.stdout.strip())


def packet_sockets():
    """Packet sockets in the lab's namespace bound to cap0 and running: rows of its
    /proc/net/packet (sk RefCnt Type Proto Iface R Rmem User Inode) with cap0's ifindex and
    R = 1. Tools set their ring up before they bind, so a bound socket is a ready one."""
    r = sh("ip", "netns", "exec", NS, "sh", "-c", "cat /sys/class/net/cap0/ifindex /proc/net/packet", check=False)
    lines = r.stdout.splitlines()
    if not lines:
        return 0
    ifindex = lines[0].strip()
    return sum(1 for l in lines[1:] if len(l.split()) >= 6 and l.split()[4] == ifindex and l.split()[5] == "1")


def wait_ready(p, before, want=1, timeout=20.0):
    """Waits until the tool has opened `want` more packet sockets than `before`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if p.poll() is not None:
            return False
        if packet_sockets() >= before + want:
            time.sleep(0.5)
            return True
        time.sleep(0.05)
    return False


def process_cpu_s(pid):
    """CPU seconds (user + system) that a live process has used so far, all its threads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # Fields 14 and 15 (utime, stime), counted after the command name's closing parenthesis.
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def tool_cmd(tool, outdir, cpu):
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    nse = ["ip", "netns", "exec", NS]
    # The same ring memory for every tool: corecap's -B is per worker (KiB as tcpdump's, or
    # with a suffix as here).
    ring_mib = "256M" if cpu is not None else "128M"
    if tool == "corecap-count":
        cpus = ["--cpus", str(cpu), "--workers", "1"] if cpu is not None else []
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", ring_mib,
                "--count-only", *cpus]
    if tool == "corecap-count-1w":
        # One worker on the core the generator does not use (the placement paper 001 advises).
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--workers", "1", "--cpus", "1", "--count-only"]
    if tool == "corecap-write-1w":
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--workers", "1", "--cpus", "1", "-w", os.path.join(outdir, "corecap.pcapng")]
    if tool in ("corecap-pipeline", "corecap-pipeline-mpsc"):
        # Capture worker on CPU 1, one stage thread (balanced group of 1) on CPU 0.
        q = "mpsc" if tool.endswith("mpsc") else "spsc"
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--workers", "1", "--cpus", "1", "--mode", "pipeline", "--stage-cpus", "0", "--queue", q,
                "--count-only"]
    if tool in ("corecap-seed-1w", "corecap-aes-1w"):
        # Paper 003 Table II, one core: capture, encrypt and write on CPU 1.
        c = "seed" if "seed" in tool else "aes"
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--workers", "1", "--cpus", "1", "--encrypt", c, "--key-file", KEY,
                "-w", os.path.join(outdir, "corecap.pcapng.sealed")]
    if tool in ("corecap-write-pipeline", "corecap-seed-pipeline", "corecap-aes-pipeline"):
        # Paper 003 Table II, two cores: capture on CPU 1, encrypt and write on a stage thread on CPU 0.
        enc = [] if "write" in tool else ["--encrypt", "seed" if "seed" in tool else "aes", "--key-file", KEY]
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--workers", "1", "--cpus", "1", "--mode", "pipeline", "--stage-cpus", "0", *enc,
                "-w", os.path.join(outdir, "corecap.pcapng.sealed")]
    if tool in ("corecap-xdp", "corecap-xdp-write"):
        w = ["-w", os.path.join(outdir, "corecap-xdp.pcapng")] if tool == "corecap-xdp-write" else ["--count-only"]
        return [CORECAP, "capture", "--netns", NS, "-i", "xdp:cap0", "--json", "--stats-interval", "0", *w]
    if tool in ("corecap-xdp-1s", "corecap-xdp-spread2"):
        # Issue 7 item 4: one RX queue, one AF_XDP socket on CPU 1, or two sockets spread
        # by flow in the XDP program (CPU 1 and CPU 0).
        spread = ["--xdp-spread", "2", "--cpus", "1,0"] if tool.endswith("spread2") else ["--cpus", "1"]
        return [CORECAP, "capture", "--netns", NS, "-i", "xdp:cap0", "--json", "--stats-interval", "0", *spread,
                "--count-only"]
    if tool in ("corecap-write", "corecap-write-nosessions"):
        cpus = ["--cpus", str(cpu), "--workers", "1"] if cpu is not None else []
        # Issue 35: the same without the sessions file, for the cost of sessions.
        no = ["--no-sessions"] if tool.endswith("nosessions") else []
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "-w", os.path.join(outdir, "corecap.pcapng"), *no, *cpus]
    if tool in ("corecap-write-per-worker", "corecap-write-per-worker-nosessions"):
        # A file per worker (--per-worker): no merge thread, the layout before one merged
        # file became the default.
        cpus = ["--cpus", str(cpu), "--workers", "1"] if cpu is not None else []
        no = ["--no-sessions"] if tool.endswith("nosessions") else []
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--per-worker", "-w", os.path.join(outdir, "corecap.pcapng"), *no, *cpus]
    if tool == "corecap-write-default":
        # Every default: the ring sized from the link, one worker per RX queue, direct I/O.
        cpus = ["--cpus", str(cpu), "--workers", "1"] if cpu is not None else []
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0",
                "-w", os.path.join(outdir, "corecap.pcapng"), *cpus]
    if tool == "corecap-write-buffered":
        cpus = ["--cpus", str(cpu), "--workers", "1"] if cpu is not None else []
        return [CORECAP, "capture", "--netns", NS, "-i", "cap0", "--json", "--stats-interval", "0", "-B", "256M",
                "--no-direct", "-w", os.path.join(outdir, "corecap.pcapng"), *cpus]
    if tool == "tcpdump":
        return nse + pin + ["tcpdump", "-i", "cap0", "-n", "-B", str(256 * 1024), "-w", os.path.join(outdir, "tcpdump.pcap")]
    if tool == "dumpcap":
        return nse + pin + ["dumpcap", "-i", "cap0", "-q", "-B", "256", "-w", os.path.join(outdir, "dumpcap.pcapng")]
    if tool == "netsniff-ng":
        return nse + pin + ["netsniff-ng", "--in", "cap0", "--out", os.path.join(outdir, "netsniff.pcap"), "--silent",
                            "--ring-size", "256MiB"]
    raise ValueError(tool)


def parse_captured(tool, out, err):
    """(captured, drops) as the tool reports them."""
    text = out + "\n" + err
    if tool.startswith("corecap"):
        line = [l for l in out.splitlines() if '"summary"' in l][-1]
        v = json.loads(line)
        d = v["drops"]
        return v["packets"], d["kernel"] + d.get("app", 0) + d.get("disk", 0)
    if tool == "tcpdump":
        cap = int(re.search(r"(\d+) packets? captured", text).group(1))
        drop = int(re.search(r"(\d+) packets? dropped by kernel", text).group(1))
        return cap, drop
    if tool == "dumpcap":
        m = re.search(r"received/dropped on interface[^:]*:\s*(\d+)/(\d+)", text)
        if m:
            return int(m.group(1)), int(m.group(2))
        m = re.search(r"Packets(?: captured)?: (\d+)", text)
        return (int(m.group(1)) if m else 0), 0
    if tool == "netsniff-ng":
        inc = re.search(r"(\d+)\s+packets incoming", text)
        passed = re.search(r"(\d+)\s+packets passed filter", text)
        failed = re.search(r"(\d+)\s+packets failed filter", text)
        cap = int(passed.group(1)) if passed else (int(inc.group(1)) if inc else 0)
        return cap, int(failed.group(1)) if failed else 0
    raise ValueError(tool)


def run_one(tool, regime, size, packets, outdir, rate=None):
    cpu = 1 if regime == "contended" else None
    cmd = tool_cmd(tool, outdir, cpu)
    so = tempfile.TemporaryFile(mode="w+")
    se = tempfile.TemporaryFile(mode="w+")
    sockets = packet_sockets()
    busy0 = busy_jiffies()
    p = subprocess.Popen(cmd, stdout=so, stderr=se, text=True)
    if not wait_ready(p, sockets):
        p.kill()
        p.wait()
        se.seek(0)
        raise RuntimeError(f"{tool} did not open its packet socket: {se.read()[-500:]}")
    # What starting cost (rings allocated and zeroed by the kernel, threads, files): the
    # figure "after start" leaves it out, so a run's per-packet cost is seen on its own.
    setup_cpu_s = process_cpu_s(p.pid)
    rx0 = rx_packets()
    # The generator always runs on CPU 0, so every tool meets the same sender.
    gen = [CORECAP, "gen", "--netns", NS, "-i", "gen0", "--count", str(packets), "--size", str(size),
           "--flows", "4096", "--json", "--cpus", "0"]
    if regime in ("xdp", "xdp1q"):
        gen += ["--engine", "xdp"]
    if rate:
        gen += ["--rate", str(rate)]
    g = sh(*gen)
    time.sleep(1.5)
    offered = rx_packets() - rx0
    p.send_signal(signal.SIGINT)
    deadline = time.time() + 60
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            p.kill()
        time.sleep(0.05)
    p.returncode = os.waitstatus_to_exitcode(status)
    sh("sync")
    sys_cpu_s = (busy_jiffies() - busy0) / os.sysconf("SC_CLK_TCK")
    so.seek(0)
    se.seek(0)
    out, err = so.read(), se.read()
    cap, drops = parse_captured(tool, out, err)
    gen_rep = json.loads(g.stdout)
    for f in os.listdir(outdir):
        os.unlink(os.path.join(outdir, f))
    cpu_s = ru.ru_utime + ru.ru_stime
    return {"tool": tool, "regime": regime, "size": size, "offered": offered, "sent": gen_rep["sent"],
            "gen_pps": gen_rep["pps"], "captured": cap, "drops": drops, "cpu_s": cpu_s,
            "cpu_s_per_mpkt": cpu_s / (cap / 1e6) if cap else None,
            "setup_cpu_s": setup_cpu_s,
            "run_cpu_s_per_mpkt": (cpu_s - setup_cpu_s) / (cap / 1e6) if cap else None,
            "sys_cpu_s": sys_cpu_s, "sys_cpu_s_per_mpkt": sys_cpu_s / (cap / 1e6) if cap else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=5_000_000)
    ap.add_argument("--sizes", default="64,1518")
    ap.add_argument("--regimes", default="txring,xdp,contended")
    ap.add_argument("--tools", default="corecap-count,corecap-count-1w,corecap-write,corecap-xdp,corecap-xdp-write,"
                                       "tcpdump,dumpcap,netsniff-ng")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dir", default=None, help="where the tools write (default: a new directory under /var/tmp)")
    ap.add_argument("--rate", type=int, default=None,
                    help="offered packets per second (default: as fast as the generator goes)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    tools = [t for t in a.tools.split(",") if t.startswith("corecap") or shutil.which(t)]
    skipped = [t for t in a.tools.split(",") if t not in tools]
    rows = []
    if any("seed" in t or "aes" in t for t in tools) and not os.path.exists(KEY):
        sh(CORECAP, "keygen", "-o", KEY)
    outdir = tempfile.mkdtemp(prefix="corecap-bench-", dir=a.dir or "/var/tmp")
    try:
        for regime in a.regimes.split(","):
            if regime == "txring":
                lab_up(1)
            elif regime == "xdp":
                lab_up(2)
            elif regime == "xdp1q":
                lab_up(1)
            else:
                lab_up(1, napi_cpu=1)
            for size in [int(s) for s in a.sizes.split(",")]:
                for tool in tools:
                    r = run_one(tool, regime, size, a.packets, outdir, a.rate)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
            lab_down()
    finally:
        lab_down()
        shutil.rmtree(outdir, ignore_errors=True)
        if os.path.exists(KEY):
            os.unlink(KEY)
    report(rows, a, skipped)


def report(rows, a, skipped):
    lines = ["# Capture benchmark: corecap and peers on the veth lab", "",
             f"Command: `{' '.join(sys.argv)}`", "",
             f"Machine: {os.cpu_count()} CPUs, {platform.machine()}, Linux {platform.release()}; "
             f"{a.packets} packets per cell, 4096 flows, files written to {a.dir or '/var/tmp'}"
             + (f", offered at {a.rate} packets/s." if a.rate else ", offered as fast as the generator goes.")
             , ""]
    if skipped:
        lines += [f"Skipped (not installed): {', '.join(skipped)}", ""]
    lines += ["| regime | size | tool | gen Mpps | offered | captured | captured % | drops | CPU s | CPU s / Mpkt "
              "| start CPU s | after start CPU s / Mpkt | system CPU s (with sync) | system CPU s / Mpkt |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pct = 100.0 * r["captured"] / r["offered"] if r["offered"] else 0.0
        per = f"{r['cpu_s_per_mpkt']:.3f}" if r["cpu_s_per_mpkt"] else "-"
        sper = f"{r['sys_cpu_s_per_mpkt']:.3f}" if r.get("sys_cpu_s_per_mpkt") else "-"
        rper = f"{r['run_cpu_s_per_mpkt']:.3f}" if r.get("run_cpu_s_per_mpkt") else "-"
        lines.append(f"| {r['regime']} | {r['size']} | {r['tool']} | {r['gen_pps'] / 1e6:.2f} | {r['offered']} | "
                     f"{r['captured']} | {pct:.2f} | {r['drops']} | {r['cpu_s']:.2f} | {per} | "
                     f"{r.get('setup_cpu_s', 0):.2f} | {rper} | "
                     f"{r.get('sys_cpu_s', 0):.2f} | {sper} |")
    publish("\n".join(lines) + "\n", a.out,
            "\n```json\n" + "\n".join(json.dumps(r) for r in rows) + "\n```\n")


if __name__ == "__main__":
    main()
