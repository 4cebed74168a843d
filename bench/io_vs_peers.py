#!/usr/bin/env python3
"""plumb io against its peers, in one go: fio (io_uring) and pg_test_fsync.

    python3 bench/io_vs_peers.py [--dir DIR] [--reps N] [--seconds S] [--out FILE.md]

Runs, alternating the tools and repeating each case (median reported):
  1. 4K random read, QD32, O_DIRECT, 2 GiB file: IOPS and CPU time per I/O (fio io_uring).
  2. The same at QD1: p50 latency (fio total latency, lat_percentiles=1).
  3. The log-write preset (60K sequential writes, QD1, O_DIRECT|O_DSYNC) vs the same fio job:
     IOPS and p99.
  4. plumb io durability 8K fdatasync mean vs pg_test_fsync's fdatasync figure.
Prints a table with the ratios and writes it, with the machine and command lines, to --out
(default bench/results/io-vs-peers-DATE.md). Needs fio (apt-get install fio) and
/usr/lib/postgresql/15/bin/pg_test_fsync. A benchmark, not a test: it asserts nothing.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMB = os.path.join(ROOT, "target", "release", "plumb")
PG_TEST_FSYNC = "/usr/lib/postgresql/15/bin/pg_test_fsync"


def sh(cmd, log):
    log.append(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def plumb_json(args, log):
    return json.loads(sh([PLUMB] + args + ["--json"], log))


def total_row(j, table="total"):
    return next(r for r in j["tables"][table] if r["thread"] is None)


def pct_row(j, label):
    return next(r for r in j["percentiles"] if r["label"] == label)


def fio_json(args, log):
    out = sh(["fio", "--output-format=json"] + args, log)
    # fio may print notes before the JSON document.
    return json.loads(out[out.index("{"):])


def fio_job(j, rw):
    job = j["jobs"][0]
    d = job[rw]
    runtime_s = job["job_runtime"] / 1000.0
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s
    return {
        "iops": d["iops"],
        "ios": d["total_ios"],
        "cpu_per_io_us": cpu_s / d["total_ios"] * 1e6 if d["total_ios"] else float("nan"),
        "lat_p50_ms": d["lat_ns"]["percentile"]["50.000000"] / 1e6 if "percentile" in d["lat_ns"] else float("nan"),
        "lat_p99_ms": d["lat_ns"]["percentile"]["99.000000"] / 1e6 if "percentile" in d["lat_ns"] else float("nan"),
        "lat_mean_ms": d["lat_ns"]["mean"] / 1e6,
    }


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-io"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--out")
    ap.add_argument("--cases", default="qd32,qd1,logwrite,durability",
                    help="comma-separated subset of qd32,qd1,logwrite,durability")
    a = ap.parse_args()
    for tool in ("fio",):
        if not shutil.which(tool):
            sys.exit("fio is not installed: apt-get install fio")
    if not os.path.exists(PLUMB):
        sys.exit("build plumb first: cargo build --release -j2")
    os.makedirs(a.dir, exist_ok=True)
    data = os.path.join(a.dir, "peer.dat")
    log = []
    secs = str(a.seconds)
    results = []

    cases = set(a.cases.split(","))
    try:
        # One 2 GiB file of random data for both tools: plumb creates and keeps it.
        if cases & {"qd32", "qd1", "logwrite"} and not os.path.exists(data):
            sh([PLUMB, "io", "run", "--ioengine", "null", "--duration", "1s", "--warmup", "0", "--size", "2G",
                "--keep", data], log)

        def rr(qd):
            p_iops, p_cpu, p_p50, f_iops, f_cpu, f_p50 = [], [], [], [], [], []
            for _ in range(a.reps):
                j = plumb_json(["io", "run", "--bs", "4K", "--pattern", "random", "--qd", str(qd), "--durability",
                                "direct", "--duration", f"{secs}s", "--warmup", "2s", data], log)
                t = total_row(j)
                p_iops.append(t["iops"])
                p_cpu.append(j["process_cpu"]["cpu_per_io_s"] * 1e6)
                p_p50.append(pct_row(j, "50th")["total_s"] * 1e3)
                f = fio_job(fio_json(["--name=rr", f"--filename={data}", "--ioengine=io_uring", "--direct=1",
                                      "--rw=randread", "--bs=4k", f"--iodepth={qd}", f"--runtime={secs}",
                                      "--ramp_time=2", "--time_based", "--lat_percentiles=1",
                                      "--norandommap", "--randrepeat=0"], log), "read")
                f_iops.append(f["iops"])
                f_cpu.append(f["cpu_per_io_us"])
                f_p50.append(f["lat_p50_ms"])
            return p_iops, p_cpu, p_p50, f_iops, f_cpu, f_p50

        if "qd32" in cases:
            p_iops, p_cpu, _, f_iops, f_cpu, _ = rr(32)
            results.append(("4K randread QD32: IOPS", med(p_iops), med(f_iops), "plumb/fio", ">= 1.00"))
            results.append(("4K randread QD32: CPU µs per I/O", med(p_cpu), med(f_cpu), "plumb/fio", "<= 0.90"))
        if "qd1" in cases:
            _, _, p_p50, _, _, f_p50 = rr(1)
            results.append(("4K randread QD1: p50 latency (ms)", med(p_p50), med(f_p50), "plumb/fio", "0.95–1.05"))

        p_iops, p_p99, f_iops, f_p99 = [], [], [], []
        for _ in range(a.reps if "logwrite" in cases else 0):
            j = plumb_json(["io", "run", "--preset", "log-write", "--duration", f"{secs}s", "--warmup", "2s", data],
                           log)
            p_iops.append(total_row(j)["iops"])
            p_p99.append(pct_row(j, "99th")["total_s"] * 1e3)
            f = fio_job(fio_json(["--name=lw", f"--filename={data}", "--ioengine=io_uring", "--direct=1",
                                  "--sync=dsync", "--rw=write", "--bs=60k", "--iodepth=1", f"--runtime={secs}",
                                  "--ramp_time=2", "--time_based", "--lat_percentiles=1"], log), "write")
            f_iops.append(f["iops"])
            f_p99.append(f["lat_p99_ms"])
        if "logwrite" in cases:
            results.append(("log-write (60K seq, QD1, O_DIRECT|O_DSYNC): IOPS", med(p_iops), med(f_iops), "plumb/fio", "0.95–1.05"))
            results.append(("log-write: p99 latency (ms)", med(p_p99), med(f_p99), "plumb/fio", "0.95–1.05"))
    finally:
        if os.path.exists(data):
            os.remove(data)

    if "durability" not in cases:
        pass
    elif os.path.exists(PG_TEST_FSYNC):
        p_mean, g_mean = [], []
        for _ in range(a.reps):
            j = plumb_json(["io", "durability", a.dir, "--bs", "8K", "--duration", "5s"], log)
            row = next(r for r in j["rows"] if r["mode"] == "fdatasync")
            p_mean.append(row["mean_s"] * 1e6)
            out = sh([PG_TEST_FSYNC, "-s", "5", "-f", os.path.join(a.dir, "pg_test_fsync.out")], log)
            # The first fdatasync line is the "one 8kB write" section.
            m = re.search(r"^\s*fdatasync\s+([\d.]+) ops/sec\s+(\d+) usecs/op", out, re.M)
            g_mean.append(float(m.group(2)))
        results.append(("durability 8K fdatasync: mean µs", med(p_mean), med(g_mean), "plumb/pg_test_fsync", "0.90–1.10"))
    else:
        print(f"skipped the pg_test_fsync comparison: {PG_TEST_FSYNC} not found")

    lines = ["| case | plumb | peer | ratio | goal |", "|---|---|---|---|---|"]
    for name, p, f, what, goal in results:
        lines.append(f"| {name} | {p:.3f} | {f:.3f} | {what} = {p / f:.3f} | {goal} |")
    table = "\n".join(lines)
    print(table)

    uname = platform.uname()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
    fio_v = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    plumb_v = subprocess.run([PLUMB, "--version"], capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    out = a.out or os.path.join(ROOT, "bench", "results", f"io-vs-peers-{now:%Y-%m-%d}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# plumb io vs fio and pg_test_fsync, {now:%Y-%m-%d %H:%M} UTC\n\n")
        f.write(f"Machine: {uname.node}, Linux {uname.release}, {os.cpu_count()} CPUs ({cpu}), "
                f"{fio_v}, {plumb_v}. Directory: {a.dir}. Median of {a.reps} runs each, tools alternating, "
                f"{a.seconds} s measured after 2 s warm-up.\n\n")
        f.write(f"Command: `python3 bench/io_vs_peers.py {' '.join(sys.argv[1:])}`\n\n")
        f.write(table + "\n\n")
        f.write("How the figures are taken: IOPS and latency from each tool's JSON; fio latency is total "
                "(submission to completion, `lat_percentiles=1`), as plumb's is; CPU per I/O is user+system "
                "CPU time over the measured window divided by completed I/Os (fio: usr_cpu+sys_cpu of the "
                "job runtime). pg_test_fsync reports only a mean per method.\n\n")
        f.write("<details><summary>Command lines run</summary>\n\n```\n" + "\n".join(log) + "\n```\n</details>\n")
    print(f"recorded in {out}")


if __name__ == "__main__":
    main()
