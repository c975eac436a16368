#!/usr/bin/env python3
"""Fan-out query time over 1, 2 and 3 sensors against the slowest sensor's own query.

Three labs (namespaces made by `corecap lab up`), each with a veth pair to the host and a
`corecap serve --record` daemon listening on it with TLS and client certificates. Each lab
sends PACKETS frames, recorded by its daemon. Then, ROUNDS times: each sensor's own query
(`request --url https://...`) and the fan-out over the first N sensors (`request --sensor
...`), all with the same filter and written to a file. The merge's cost is the fan-out's
median time over the median time of the slowest of its sensors asked alone.

Run as root from the repository: python3 bench/fleet_query.py [--packets N] [--rounds R]
Uses target/release/corecap (CORECAP_BIN to change). Everything it makes it removes.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("CORECAP_BIN", "target/release/corecap")


def run(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def request(tls, args, out, flt):
    """Starts `corecap request ... query -w OUT FILTER`."""
    return subprocess.Popen([BIN, "request", *tls, *args, "query", "-w", out, flt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_all(procs):
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"request failed: {err}")


def measure(flt, rounds, tls, urls, tmp, packets):
    """Per round: each sensor alone; the first k sensors asked at once, each by a request
    of its own (no merge: what k sensors cost this machine together); and the fan-out
    over the first k (the same, plus the merge)."""
    out = os.path.join(tmp, "out.pcapng")
    alone = {n: [] for n in (1, 2, 3)}
    together = {k: [] for k in (1, 2, 3)}
    fan = {k: [] for k in (1, 2, 3)}
    size = {}
    for _ in range(rounds):
        for n in (1, 2, 3):
            t = time.perf_counter()
            wait_all([request(tls, ["--url", urls[n - 1].split("=", 1)[1]], out, flt)])
            alone[n].append(time.perf_counter() - t)
        for k in (1, 2, 3):
            t = time.perf_counter()
            wait_all([request(tls, ["--url", u.split("=", 1)[1]], f"{out}.{i}", flt)
                      for i, u in enumerate(urls[:k])])
            together[k].append(time.perf_counter() - t)
            args = []
            for u in urls[:k]:
                args += ["--sensor", u]
            t = time.perf_counter()
            wait_all([request(tls, args, out, flt)])
            fan[k].append(time.perf_counter() - t)
            size[k] = os.path.getsize(out)
    med = {n: statistics.median(v) for n, v in alone.items()}
    print(f"## filter '{flt}', {packets} packets recorded per sensor, median of {rounds} rounds")
    print()
    print("| sensors | answer bytes | fan-out s | slowest alone s | ratio | "
          "same sensors at once, no merge s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for k in (1, 2, 3):
        f = statistics.median(fan[k])
        slow = max(med[n] for n in range(1, k + 1))
        tog = statistics.median(together[k])
        print(f"| {k} | {size[k]} | {f:.3f} | {slow:.3f} | {f / slow:.2f} | "
              f"{tog:.3f} | {f / tog:.2f} |")
    print()
    print("each sensor alone, s: " + ", ".join(f"s{n} {med[n]:.3f}" for n in (1, 2, 3)))
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--filter", action="append",
                    help="filters to time (default: udp, every packet, and host 10.1.0.7, one flow of 256)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="corecap-fleet-bench-")
    tag = os.getpid() % 100000
    labs, links, daemons = [], [], []
    try:
        pki = os.path.join(tmp, "pki")
        names = []
        for n in (1, 2, 3):
            names += ["--server-name", f"10.214.{n}.2"]
        run(BIN, "certs", pki, *names)
        for n in (1, 2, 3):
            ns = f"ccfb{tag}-{n}"
            run(BIN, "lab", "up", "--netns", ns)
            labs.append(ns)
            h, s = f"cb{tag}h{n}", f"cb{tag}s{n}"
            run("ip", "link", "add", h, "type", "veth", "peer", "name", s, "netns", ns)
            links.append(h)
            run("ip", "addr", "add", f"10.214.{n}.1/30", "dev", h)
            run("ip", "link", "set", h, "up")
            run("ip", "netns", "exec", ns, "ip", "addr", "add", f"10.214.{n}.2/30", "dev", s)
            run("ip", "netns", "exec", ns, "ip", "link", "set", s, "up")
            d = os.path.join(tmp, f"s{n}")
            os.makedirs(d)
            log = open(os.path.join(d, "log"), "w")
            p = subprocess.Popen(
                [BIN, "serve", "--netns", ns, "-i", "cap0", "--socket", f"{d}/api.sock",
                 "--spool", f"{d}/spool", "--record", f"{d}/rec", "-b", "filesize:64000",
                 "--listen", f"10.214.{n}.2:7443", "--tls-cert", f"{pki}/server.pem",
                 "--tls-key", f"{pki}/server.key", "--tls-client-ca", f"{pki}/ca.pem"],
                stdout=subprocess.DEVNULL, stderr=log)
            daemons.append(p)
        time.sleep(3)
        gens = [subprocess.Popen([BIN, "gen", "--netns", ns, "-i", "gen0", "--count",
                                  str(a.packets), "--rate", "200000", "--flows", "256"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for ns in labs]
        for g in gens:
            g.wait()
        time.sleep(2)
        tls = ["--tls-ca", f"{pki}/ca.pem", "--tls-cert", f"{pki}/client.pem",
               "--tls-key", f"{pki}/client.key"]
        urls = [f"s{n}=https://10.214.{n}.2:7443" for n in (1, 2, 3)]
        out = os.path.join(tmp, "out.pcapng")

        for flt in a.filter or ["udp", "host 10.1.0.7"]:
            measure(flt, a.rounds, tls, urls, tmp, a.packets)
    finally:
        for p in daemons:
            p.terminate()
        for p in daemons:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for h in links:
            run("ip", "link", "del", h, check=False)
        for ns in labs:
            run(BIN, "lab", "down", "--netns", ns, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
