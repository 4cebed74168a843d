#!/usr/bin/env python3
"""plumb fs: what a `watch`-style loop costs the server, with and without --cache.

Mounts plumb's private PostgreSQL with `plumb fs`, reads one view through the mount N times
(open, read to the end, close, as `cat` does) with --cache 0 and with --cache 1s, and prints,
for each, the reads made against the queries the server received for that view. The server
counts for itself: log_statement = 'all' is turned on for the run, and the statements of the
view's query are counted in the server's log. Also: reads per second, and the dbfs way (a
query per read, by definition) as the reference.

Run as root: python3 bench/fs_cache.py [--reads 1000] [--view stats/pg_stat_database]
(builds the release binary first).
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")


def run(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def psql(d, sql):
    return run(PLUMB, "engine", "psql", "--dir", d, "--", "-Atc", sql).stdout.strip()


def count_in_log(log, start, needle):
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return sum(1 for line in text.splitlines() if "statement:" in line and needle in line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--view", default="stats/pg_stat_database")
    ap.add_argument("--pace-ms", type=float, default=10.0)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (the private PostgreSQL runs as postgres; the mount needs /dev/fuse)")
    subprocess.run(["cargo", "build", "--release", "-j2", "--locked"], cwd=ROOT, check=True)

    tmp = tempfile.mkdtemp(prefix="plumb-fs-bench-", dir="/tmp")
    os.chmod(tmp, 0o755)
    d = os.path.join(tmp, "pg")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    try:
        out = run(PLUMB, "engine", "start", "--dir", d, "--json").stdout
        url = json.loads(out)["url"]
        log = os.path.join(d, "postgresql.log")
        psql(d, "ALTER SYSTEM SET log_statement = 'all'")
        psql(d, "SELECT pg_reload_conf()")
        time.sleep(1)
        name = a.view.split("/")[-1]
        needle = f'FROM "pg_catalog"."{name}"'
        rows = []
        for cache, pace in [("0", 0.0), ("1s", 0.0), ("0", a.pace_ms / 1000), ("1s", a.pace_ms / 1000)]:
            o = run(PLUMB, "fs", mnt, "--engine", url, "--cache", cache)
            pid = int(re.search(r"by process (\d+)", o.stdout).group(1))
            path = os.path.join(mnt, a.view)
            # One read first, so that the listing and the first description are not counted.
            with open(path, "rb") as f:
                f.read()
            time.sleep(0.5)
            start = os.path.getsize(log)
            t0 = time.monotonic()
            size = 0
            for i in range(a.reads):
                if pace:
                    # Like `watch -n`: a read every PACE, from the start.
                    delay = t0 + i * pace - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                with open(path, "rb") as f:
                    size += len(f.read())
            secs = time.monotonic() - t0
            time.sleep(1)
            got = count_in_log(log, start, needle)
            run(PLUMB, "fs", "--unmount", mnt)
            for _ in range(100):
                if not os.path.exists(f"/proc/{pid}"):
                    break
                time.sleep(0.05)
            rows.append((cache, pace, a.reads, got, secs, size / a.reads))
        print(f"# plumb fs: {a.reads} reads of {a.view}")
        print()
        print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.release()}")
        print(f"command: python3 bench/fs_cache.py --reads {a.reads} --view {a.view} --pace-ms {a.pace_ms:g}")
        print()
        print("| --cache | reads | paced | queries the server received | queries per read | reads/s | bytes per read |")
        print("|---|---|---|---|---|---|---|")
        for cache, pace, reads, got, secs, per in rows:
            paced = f"every {pace * 1000:g} ms" if pace else "back to back"
            print(f"| {cache} | {reads} | {paced} | {got} | {got / reads:.3f} | {reads / secs:.0f} | {per:.0f} |")
        print()
        print(f"dbfs runs a query (on a new connection) for every read: {a.reads} queries for {a.reads} reads.")
        base, cached = rows[2][3], rows[3][3]
        if cached:
            print(f"Paced like watch: --cache 1s sends {base / cached:.0f}x fewer queries than --cache 0 for the same reads.")
    finally:
        subprocess.run([PLUMB, "fs", "--unmount", mnt], capture_output=True)
        subprocess.run([PLUMB, "engine", "stop", "--remove", "--dir", d], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
