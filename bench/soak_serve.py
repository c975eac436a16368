#!/usr/bin/env python3
"""Soak test of `corecap serve`: lab traffic for --minutes, random requests all the while,
and the daemon's RSS, open fds, threads and spool bytes sampled every --every seconds.

The daemon runs a base capture on the lab's cap0 with a spool under --retain. Background
traffic (`corecap gen`, UDP and TCP, at --pps) runs for the whole soak. A client loop
picks at random: start a capture (attach or spawn; pcapng, pcap, flows or count; a count
or a duration; sometimes a filter, sometimes a bad one), stop a running one, list, show,
metrics, a query over the spool, a malformed or oversized body, an unknown field, a
client that sends part of a request and stalls, and one that connects and says nothing.
At the end the samples are written as a table; the last line says whether RSS, fds,
threads and spool bytes stayed flat (the last quarter's maximum within 10%, or 4 fds
and 2 threads, of the first quarter's after warm-up).

With --user USER the daemon runs as `serve -Z USER`: its API threads hold no capability and
one opener thread keeps CAP_NET_RAW, CAP_NET_ADMIN and CAP_IPC_LOCK.

Usage: bench/soak_serve.py [--minutes 30] [--pps 3000] [--every 30] [--user USER] [--out FILE.md]
Needs root and the corecap release binary.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORECAP = os.path.join(ROOT, "target", "release", "corecap")
NS = "cc-soak"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def proc_stats(pid):
    with open(f"/proc/{pid}/status") as f:
        st = {l.split(":")[0]: l.split(":")[1].strip() for l in f if ":" in l}
    rss_kb = int(st["VmRSS"].split()[0])
    threads = int(st["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss_kb, fds, threads


def dir_bytes(d):
    total = 0
    for f in os.listdir(d):
        try:
            total += os.path.getsize(os.path.join(d, f))
        except OSError:
            pass
    return total


def raw(sock_path, data, wait=0.0, read=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    try:
        s.connect(sock_path)
        if data:
            s.sendall(data)
        if wait:
            time.sleep(wait)
        if read:
            try:
                s.recv(65536)
            except OSError:
                pass
    except OSError:
        pass
    finally:
        s.close()


def client(a, sock, spool, stop, counts):
    req = lambda *args: sh(CORECAP, "request", "--socket", sock, *args, check=False)
    running = []
    n = 0
    while not stop.is_set():
        n += 1
        what = random.choice(["start", "start", "start", "stop", "list", "show", "metrics",
                              "query", "bad", "unknown", "big", "slow", "silent"])
        counts[what] = counts.get(what, 0) + 1
        if what == "start":
            args = ["start", "-i", "cap0", "--json"]
            out = random.choice(["pcapng", "pcap", "flows", "count"])
            args += ["--output", out]
            if out != "count":
                args += ["-w", f"s{n}.{ 'jsonl' if out == 'flows' else out}"]
            if random.random() < 0.3:
                args += ["--mode", "spawn"]
            if random.random() < 0.5:
                args += ["-c", str(random.randint(10, 3000))]
            else:
                args += ["--duration", str(random.uniform(0.2, 5.0))]
            if random.random() < 0.5:
                args += [random.choice(["udp", "tcp", "udp port 5001", "host 10.1.0.7", "udp port"])]
            r = req(*args)
            if r.returncode == 0:
                try:
                    running.append(json.loads(r.stdout)["id"])
                except (ValueError, KeyError):
                    pass
        elif what == "stop" and running:
            req("stop", running.pop(random.randrange(len(running))))
        elif what == "list":
            req("list")
        elif what == "show" and running:
            req("show", random.choice(running))
        elif what == "metrics":
            req("metrics")
        elif what == "query":
            req("query", "-w", os.path.join(a.work, "q.pcapng"), "--from", "-10s", "udp port 5002")
        elif what == "bad":
            raw(sock, b"POST /captures HTTP/1.1\r\nContent-Length: 9\r\n\r\n{not json")
        elif what == "unknown":
            body = b'{"interface":"cap0","colour":"red"}'
            raw(sock, b"POST /captures HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif what == "big":
            raw(sock, b"POST /captures HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n" + b"x" * 65536)
        elif what == "slow":
            threading.Thread(target=raw, args=(sock, b"GET /capt", 8.0), daemon=True).start()
        elif what == "silent":
            threading.Thread(target=raw, args=(sock, b"", 8.0, False), daemon=True).start()
        running = running[-50:]
        time.sleep(random.uniform(0.05, 0.4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--pps", type=int, default=3000)
    ap.add_argument("--every", type=float, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--user", default=None, help="run serve -Z USER")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    a.work = tempfile.mkdtemp(prefix="corecap-soak-", dir="/var/tmp")
    spool = os.path.join(a.work, "spool")
    # serve makes the socket's directory, and with -Z gives it to the user, who removes
    # the socket at the end.
    sock = os.path.join(a.work, "run", "api.sock")
    user = ["-Z", a.user] if a.user else []
    if a.user:
        os.chmod(a.work, 0o755)
    sh(CORECAP, "lab", "down", "--netns", NS, check=False)
    sh(CORECAP, "lab", "up", "--netns", NS, "--queues", "1")
    d = subprocess.Popen([CORECAP, "serve", "--netns", NS, "-i", "cap0", "--socket", sock, "--spool", spool,
                          "--retain", "64M", "--share-cores", "--spare-idle", "20"] + user,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not os.path.exists(sock):
        if time.time() > deadline or d.poll() is not None:
            sys.exit("serve did not start")
        time.sleep(0.1)
    secs = int(a.minutes * 60)
    gens = [subprocess.Popen([CORECAP, "gen", "--netns", NS, "-i", "gen0", "--flows", "512", "--proto", p,
                              "--rate", str(a.pps // 2), "--duration", str(secs), "--burst", "8"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in ("udp", "tcp")]
    stop = threading.Event()
    counts = {}
    c = threading.Thread(target=client, args=(a, sock, spool, stop, counts), daemon=True)
    c.start()
    samples = []
    t0 = time.time()
    try:
        while time.time() - t0 < secs:
            time.sleep(a.every)
            rss, fds, thr = proc_stats(d.pid)
            samples.append((time.time() - t0, rss, fds, thr, dir_bytes(spool)))
            print(samples[-1], flush=True)
            if d.poll() is not None:
                break
    finally:
        stop.set()
        c.join(timeout=30)
        for g in gens:
            g.send_signal(signal.SIGINT)
            g.wait()
        alive = d.poll() is None
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
        sh(CORECAP, "lab", "down", "--netns", NS, check=False)
        shutil.rmtree(a.work, ignore_errors=True)
    q = max(1, len(samples) // 4)
    first, last = samples[1:1 + q] or samples[:1], samples[-q:]
    flat = lambda i, slack: max(s[i] for s in last) <= max(s[i] for s in first) * 1.1 + slack
    verdict = {"rss": flat(1, 0), "fds": flat(2, 4), "threads": flat(3, 2), "spool": flat(4, 0)}
    lines = ["# Soak: corecap serve under lab traffic and random requests", "",
             f"Command: `{' '.join(sys.argv)}`", "",
             f"{a.minutes} minutes, {a.pps} packets/s of background UDP and TCP, random requests: "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".",
             f"The daemon was {'alive' if alive else 'DEAD'} at the end; exit status {d.returncode}.", "",
             "| t (s) | RSS (KiB) | open fds | threads | spool bytes |", "|---|---|---|---|---|"]
    lines += [f"| {t:.0f} | {r} | {f} | {h} | {b} |" for t, r, f, h, b in samples]
    lines += ["", "Flat (last quarter's maximum against the first quarter's after warm-up): "
              + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items()) + "."]
    publish("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
