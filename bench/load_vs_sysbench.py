#!/usr/bin/env python3
"""plumb load against sysbench on MariaDB, in one go, on one private MariaDB.

    python3 bench/load_vs_sysbench.py [--rows N] [--clients N] [--seconds S] [--reps N]
                                      [--out FILE.md]

1. Starts a MariaDB of its own (Debian's mariadbd: mariadb-install-db into a scratch
   directory, a socket only, a 256 MiB buffer pool, the mysql user), with three databases on
   it: `plumb load --workload point-select --scale N/100000 --keep` creates pgbench's tables
   (plumb_ps), `plumb load --workload read-write --keep` its sysbench-shaped table (plumb_rw),
   and `sysbench oltp_read_write prepare` creates sbtest1 with the same number of rows (sbtest).
2. Alternates, --reps times, with the same clients (sysbench's threads) and seconds:
   `plumb load --workload point-select` and `sysbench oltp_point_select` (one primary-key
   select a transaction, prepared); then `plumb load --workload read-write` and `sysbench
   oltp_read_write` (BEGIN, ten point selects, four range selects, two updates, a delete, an
   insert, COMMIT: the same twenty statements).
3. Per tool: tps and the client's CPU per transaction (user + system of the tool's process over
   every transaction it ran, from the kernel's rusage of the child), medians over the reps;
   the ratios plumb / sysbench.

Writes the table, the machine and the command lines to --out (default
bench/results/load-vs-sysbench-DATE.md). Run as root (mariadbd runs as mysql). Needs sysbench
(apt-get install sysbench) and target/release/plumb (cargo build --release). A benchmark, not a
test: it asserts nothing.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")


def timed(cmd, log, check=True):
    """Run cmd; return (stdout, cpu seconds of the child)."""
    log.append(" ".join(cmd))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu


class Maria:
    def __init__(self, tmp):
        self.dir = tmp
        self.sock = os.path.join(tmp, "mysqld.sock")
        shutil.chown(tmp, "mysql", "mysql")
        data = os.path.join(tmp, "data")
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}",
                        f"--tmpdir={tmp}", "--user=mysql",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(
            ["/usr/sbin/mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.sock}",
             f"--pid-file={tmp}/mariadbd.pid", f"--log-error={tmp}/error.log", f"--tmpdir={tmp}",
             "--skip-networking", "--user=mysql", "--innodb-buffer-pool-size=256M",
             "--max-connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if self.sql("SELECT 1").returncode == 0:
                return
            time.sleep(0.2)
        sys.exit("mariadbd did not come up")

    def sql(self, q):
        return subprocess.run(["mariadb", "--no-defaults", "-uroot", f"--socket={self.sock}",
                               "-e", q], capture_output=True, text=True)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def plumb_load(url, workload, scale, clients, seconds, log):
    db = {"point-select": "plumb_ps", "read-write": "plumb_rw"}[workload]
    out, cpu = timed(
        [PLUMB, "--json", "load", "--engine", url, "--allow-writes", "--workload", workload,
         "--database", db, "--scale", str(scale), "--clients", str(clients), "--rampup", "0s",
         "--duration", f"{seconds}s", "--keep"],
        log,
    )
    j = json.loads(out)
    window = sum(t["committed"] + t["rolled_back"] for t in j["types"])
    ran = sum(s["done"] for s in j["seconds"]) or window
    return {"tps": window / j["window_s"], "cpu_us": cpu / max(ran, 1) * 1e6}


def sysbench(m, test, rows, clients, seconds, log):
    out, cpu = timed(
        ["sysbench", test, "--db-driver=mysql", f"--mysql-socket={m.sock}", "--mysql-user=root",
         "--mysql-db=sbtest", "--tables=1", f"--table-size={rows}", f"--threads={clients}",
         f"--time={seconds}", "--report-interval=0", "run"],
        log,
    )
    n = int(re.search(r"transactions:\s+(\d+)", out).group(1))
    tps = float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", out).group(1))
    return {"tps": tps, "cpu_us": cpu / max(n, 1) * 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows in each tool's table")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    if not shutil.which("sysbench"):
        sys.exit("sysbench is not installed: apt-get install sysbench")
    scale = max(a.rows // 100_000, 1)
    log = []
    tmp = tempfile.mkdtemp(prefix="plumb-sysbench", dir="/tmp")
    os.chmod(tmp, 0o755)
    m = Maria(tmp)
    url = f"mysql://root@localhost/mysql?socket={m.sock}"
    try:
        version = m.sql("SELECT VERSION()").stdout.split()[-1]
        for w in ("point-select", "read-write"):  # creates and keeps the tables
            plumb_load(url, w, scale, 1, 1, log)
        m.sql("CREATE DATABASE sbtest")
        timed(["sysbench", "oltp_read_write", "--db-driver=mysql", f"--mysql-socket={m.sock}",
               "--mysql-user=root", "--mysql-db=sbtest", "--tables=1",
               f"--table-size={scale * 100_000}", "prepare"], log)
        rows = []
        for ours, theirs in (("point-select", "oltp_point_select"), ("read-write", "oltp_read_write")):
            p, s = [], []
            for i in range(a.reps):
                pair = [
                    lambda: p.append(plumb_load(url, ours, scale, a.clients, a.seconds, log)),
                    lambda: s.append(sysbench(m, theirs, scale * 100_000, a.clients, a.seconds, log)),
                ]
                for f in pair if i % 2 == 0 else reversed(pair):
                    f()
            med = lambda v, k: statistics.median(x[k] for x in v)
            rows.append((ours, theirs, med(p, "tps"), med(s, "tps"), med(p, "cpu_us"),
                         med(s, "cpu_us"), [round(x["tps"]) for x in p],
                         [round(x["tps"]) for x in s]))
    finally:
        m.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        f"# plumb load against sysbench on MariaDB, {datetime.date.today()}",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.release()}; MariaDB "
        f"{version} (Debian's), a private server on a socket, 256 MiB buffer pool.",
        f"{scale * 100_000:,} rows a table, {a.clients} clients (sysbench threads), {a.seconds} s "
        f"a run, {a.reps} runs a tool, alternating; medians.",
        "",
        "| shape | plumb tps | sysbench tps | ratio | plumb CPU µs/tx | sysbench CPU µs/tx | ratio | runs (plumb; sysbench) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ] + [
        f"| `--workload {pw}` / `{sw}` | {pt:.0f} | {st:.0f} | {pt / st:.3f} | {pc:.1f} | {sc:.1f} "
        f"| {pc / sc:.2f} | {pr}; {sr} |"
        for (pw, sw, pt, st, pc, sc, pr, sr) in rows
    ] + [
        "",
        "Commands:",
        "",
        "```",
    ] + log + ["```", ""]
    text = "\n".join(lines)
    print(text)
    out = a.out or os.path.join(ROOT, "bench", "results",
                                f"load-vs-sysbench-{datetime.date.today()}.md")
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
