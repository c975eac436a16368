#!/usr/bin/env python3
"""The analyst's page (issue 36): search button to the first session row and to the whole
list, and the timeline's time to draw the whole recording, in headless chromium.

A lab (`corecap lab up`) and a `corecap serve --record` daemon listening on loopback with
a token; the lab sends PACKETS frames of SIZE bytes over FLOWS two-way flows (at least
1 GiB by default), recorded in 100 MB files. Then chromium (driven by chromedriver over
the W3C WebDriver protocol, from a process in the lab's namespace where the daemon
listens) logs in and, ROUNDS times each: draws the Recording screen's timeline of the
whole reach, and runs two searches (one host; every UDP session). The times are the
page's own performance marks (`corecap:search` -> `corecap:first-row` ->
`corecap:all-rows`; `corecap:timeline` -> `corecap:timeline-drawn`), so they include the
daemon's answer, the transfer and the drawing. Prints one JSON object.

Run as root from the repository: python3 bench/page_times.py [--packets N] [--rounds R]
[--day FILES] (first, FILES indexed files over the day before now: the timeline of a day)
Uses target/release/corecap (CORECAP_BIN to change); needs chromium and chromium-driver.
Everything it makes it removes.
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("CORECAP_BIN", "target/release/corecap")
LISTEN = "127.0.0.1:8080"
DRIVER = 9515
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriver:
    """The few WebDriver commands the benchmark needs."""

    def __init__(self, profile):
        self.sid = None
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1440,1000",
                     f"--user-data-dir={profile}"]}}}}
        self.sid = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", DRIVER, timeout=300)
        if self.sid and path != "/session":
            path = f"/session/{self.sid}{path}"
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        v = json.loads(r.read() or b"null")
        if r.status != 200:
            raise RuntimeError(f"webdriver {method} {path}: {v}")
        return v["value"]

    def js(self, script, *args):
        return self.call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script, limit=300):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            v = self.js(script)
            if v:
                return v
            time.sleep(0.02)
        raise RuntimeError(f"never: {script}")

    def el(self, css):
        v = self.call("POST", "/element", {"using": "css selector", "value": css})
        return v[ELEMENT]

    def click(self, css):
        self.call("POST", f"/element/{self.el(css)}/click", {})

    def type(self, css, text):
        e = self.el(css)
        self.call("POST", f"/element/{e}/clear", {})
        self.call("POST", f"/element/{e}/value", {"text": text})


def measure(start, end):
    return f"""const a = performance.getEntriesByName('{start}'), b = performance.getEntriesByName('{end}');
        return a.length && b.length ? b[b.length - 1].startTime - a[a.length - 1].startTime : null;"""


def browse(token, rounds, host):
    """Runs in the lab's namespace: the page's times, as a dict."""
    profile = tempfile.mkdtemp(prefix="corecap-page-bench-")
    driver = subprocess.Popen(["chromedriver", f"--port={DRIVER}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", DRIVER, timeout=1).request("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        b = WebDriver(profile)
        b.call("POST", "/url", {"url": f"http://{LISTEN}/"})
        b.wait("return document.querySelector('[data-testid=login-token]').offsetParent !== null")
        b.type("[data-testid=login-token]", token)
        b.click("[data-testid=login-submit]")
        out = {"timeline_ms": [], "searches": {}}
        b.wait("return document.getElementById('tl-window').textContent")
        for _ in range(rounds):
            b.click("a[data-screen=search]")
            b.js("performance.clearMarks()")
            b.click("a[data-screen=recording]")
            out["timeline_ms"].append(b.wait(measure("corecap:timeline", "corecap:timeline-drawn")))
        b.click("a[data-screen=search]")
        for name, flt in [("one host", f"host {host}"), ("every UDP session", "udp")]:
            first, whole = [], []
            for _ in range(rounds):
                b.type("[data-testid=search-filter]", flt)
                b.click("[data-testid=search-submit]")
                whole.append(b.wait(measure("corecap:search", "corecap:all-rows")))
                first.append(b.js(measure("corecap:search", "corecap:first-row")))
            rows = b.js("return document.getElementById('search-progress').textContent")
            out["searches"][name] = {"filter": flt, "first_row_ms": first, "all_rows_ms": whole,
                                     "progress": rows}
        b.call("DELETE", "")
        return out
    finally:
        driver.kill()
        driver.wait()
        shutil.rmtree(profile, ignore_errors=True)


def fill_day(rec, files, packets):
    """The day before now in `rec`: `files` pcap files of `packets` 200-byte UDP frames
    each, evenly over 24 hours, each indexed (`corecap index`: index, sessions, catalog)."""
    os.makedirs(rec, exist_ok=True)
    now = int(time.time()) * 1_000_000_000
    span = 86_400 * 1_000_000_000 // files
    payload = b"\x5a" * (200 - 42)
    for n in range(files):
        path = os.path.join(rec, f"day_{n:05d}.pcap")
        t0 = now - 86_400 * 1_000_000_000 + n * span
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
            for i in range(packets):
                flow = i % 64
                udp = struct.pack(">HHHH", 1024 + flow, 5000, 8 + len(payload), 0) + payload
                ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                                 bytes([10, 3, 0, flow]), bytes([10, 4, 0, 1]), ) + udp
                frame = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip
                t = t0 + i * (span // packets)
                f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)))
                f.write(frame)
        subprocess.run([BIN, "index", path], check=True, capture_output=True)


def median(v):
    v = [x for x in v if x is not None]
    return round(statistics.median(v), 1) if v else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--packets", type=int, default=800_000)
    ap.add_argument("--size", type=int, default=1400)
    ap.add_argument("--flows", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--day", type=int, default=0,
                    help="first fill the recording folder with this many indexed files over "
                         "the 24 hours before now (288: one per 5 minutes)")
    ap.add_argument("--day-packets", type=int, default=2000)
    ap.add_argument("--browse", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.browse:
        token, host = a.browse.split(",")
        print(json.dumps(browse(token, a.rounds, host)))
        return
    ns = f"cc-pagebench{os.getpid()}"
    work = tempfile.mkdtemp(prefix="corecap-page-bench-")
    rec, token_file = os.path.join(work, "rec"), os.path.join(work, "token")
    if a.day:
        fill_day(rec, a.day, a.day_packets)
    subprocess.run([BIN, "lab", "up", "--netns", ns, "--queues", "1"], check=True,
                   capture_output=True)
    serve = None
    try:
        serve = subprocess.Popen([BIN, "serve", "--netns", ns, "-i", "cap0", "--record", rec,
                                  "-b", "filesize:100000", "--socket", os.path.join(work, "api.sock"),
                                  "--spool", os.path.join(work, "spool"), "--listen", LISTEN,
                                  "--token-file", token_file],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in serve.stderr:
            if "serving on" in line:
                break
        threading.Thread(target=serve.stderr.read, daemon=True).start()
        t = time.monotonic()
        gen = subprocess.run([BIN, "gen", "--netns", ns, "-i", "gen0", "--json", "--count",
                              str(a.packets), "--size", str(a.size), "--flows", str(a.flows),
                              "--bidir"], check=True, capture_output=True, text=True)
        sent = json.loads(gen.stdout)["sent"]
        time.sleep(2)
        recorded = sum(os.path.getsize(os.path.join(rec, f)) for f in os.listdir(rec)
                       if f.endswith(".pcapng"))
        token = open(token_file).read().strip()
        page = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__,
                               "--rounds", str(a.rounds), "--browse", f"{token},10.1.0.7"],
                              check=True, capture_output=True, text=True)
        times = json.loads(page.stdout)
        report = {
            "day_files": a.day, "day_packets_per_file": a.day_packets,
            "packets_sent": sent, "frame_size": a.size, "flows": a.flows,
            "recording_bytes_whole_files": recorded, "gen_seconds": round(time.monotonic() - t, 1),
            "timeline_ms_median": median(times["timeline_ms"]),
            "searches": {k: {"filter": v["filter"], "first_row_ms_median": median(v["first_row_ms"]),
                             "all_rows_ms_median": median(v["all_rows_ms"]), "page_said": v["progress"]}
                         for k, v in times["searches"].items()},
            "raw": times,
        }
        print(json.dumps(report, indent=2))
    finally:
        if serve:
            serve.terminate()
            serve.wait()
        subprocess.run([BIN, "lab", "down", "--netns", ns], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
