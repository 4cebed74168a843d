#!/usr/bin/env python3
"""plumb compare --history over long histories: the time per run should stay flat as the
history grows (windowed E-divisive, issue 60), where it used to grow with the square of it
(3,000 results did not finish in 90 s).

Makes two real `plumb io run --json` results (one free, one held to 3,000 I/O a second), copies
them into histories of N dated results (the first half free, the second held: one change
point), and times `plumb compare --history` on each, printing seconds and milliseconds per run.

Run: cargo build --release -j2 && python3 bench/compare_history.py [--sizes 300,1000,3000]
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plumb", default=os.path.join(ROOT, "target/release/plumb"))
    ap.add_argument("--sizes", default="300,1000,3000")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="plumb-history-") as d:
        dat = os.path.join(d, "h.dat")
        results = []
        for extra in ([], ["--rate", "3000iops"]):
            out = subprocess.run(
                [a.plumb, "io", "run", "--json", "--duration", "2s", "--warmup", "0s",
                 "--qd", "4", "--bs", "8K", "--size", "32M", *extra, dat],
                check=True, capture_output=True).stdout
            path = os.path.join(d, f"r{len(results)}.json")
            with open(path, "wb") as f:
                f.write(out)
            results.append(path)
        print(f"plumb: {a.plumb}")
        print(f"{'runs':>6} {'seconds':>8} {'ms per run':>10}  change points")
        for n in sizes:
            hist = os.path.join(d, f"h{n}")
            os.mkdir(hist)
            for i in range(n):
                shutil.copy(results[0] if i < n // 2 else results[1],
                            os.path.join(hist, f"{i:05d}.json"))
            t0 = time.monotonic()
            o = subprocess.run([a.plumb, "compare", "--history", hist, "--json"],
                               capture_output=True, text=True)
            took = time.monotonic() - t0
            import json
            changes = json.loads(o.stdout)["changes"] if o.returncode in (0, 1) else o.stderr
            at = sorted({c["run"].rsplit("/", 1)[-1] for c in changes}) if isinstance(changes, list) else changes
            print(f"{n:>6} {took:>8.2f} {1000 * took / n:>10.2f}  {at}")


if __name__ == "__main__":
    main()
