"""What the recording benchmarks (cutoff_depth.py, compress_depth.py) share: running a
capture to its end with its CPU time, its JSON summary, the bytes a recording folder holds,
and medians of rounds."""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def folder_bytes(d):
    """(bytes of every file, bytes of the capture files) in folder d: its hidden files (a
    writer's lock, the catalog) left out."""
    names = [f for f in os.listdir(d) if not f.startswith(".")]
    every = sum(os.path.getsize(os.path.join(d, f)) for f in names)
    caps = sum(os.path.getsize(os.path.join(d, f)) for f in names
               if f.endswith((".pcapng", ".zst", ".sealed")))
    return every, caps


def summary_of(text):
    return json.loads([l for l in text.splitlines() if '"summary"' in l][-1])


def run_capture(cmd, during=None):
    """Runs a capture to its end (SIGINT after during() returns, when given); returns
    (CPU s of every thread, summary)."""
    so = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.PIPE, text=True)
    if during:
        # The capture says on stderr when its workers are up.
        for line in p.stderr:
            if "capturing on" in line:
                break
    # The rest of stderr is read on a thread, so a capture that says much never blocks.
    threading.Thread(target=p.stderr.read, daemon=True).start()
    if during:
        time.sleep(0.5)
        during()
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} exited {status}")
    so.seek(0)
    return ru.ru_utime + ru.ru_stime, summary_of(so.read())


def med(rs, k):
    return statistics.median(r[k] for r in rs)
