"""What every benchmark does with its report: print it, and write it to --out when given
(with `extra` after it in the file only: raw figures for a later reader)."""

import os


def publish(text, out, extra=""):
    print(text)
    if out:
        folder = os.path.dirname(out)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(out, "w") as f:
            f.write(text + extra)
