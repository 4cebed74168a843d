#!/usr/bin/env python3
"""Two plumb builds recording the same PostgreSQL tree in turns: is a change in the recorder's
cost the code's or the host's? Starts a private PostgreSQL with NEW, runs pgbench -R 100 on it,
and runs `plumb record --interval 1s|100ms --pid POSTMASTER --engine URL` for SECONDS with OLD
and NEW alternately, two rounds; prints each run's CPU per wall time (wait4), file size and
peak RSS. Usage (as root): bench/record_two_builds.py OLD_PLUMB NEW_PLUMB [SECONDS]
Build an older commit with `git worktree add DIR COMMIT` and `CARGO_TARGET_DIR=... cargo build
--release` in it. A benchmark: it asserts nothing.
"""
import json, os, subprocess, sys, time, tempfile
if len(sys.argv) < 3:
    sys.exit(__doc__)
OLD, NEW = sys.argv[1], sys.argv[2]
secs = int(sys.argv[3]) if len(sys.argv) > 3 else 60
tmp=tempfile.mkdtemp(prefix="cmp-", dir="/var/tmp"); os.chmod(tmp,0o755)
pg=os.path.join(tmp,"pg")
e=json.loads(subprocess.run([NEW,"engine","start","--dir",pg,"--json"],check=True,capture_output=True,text=True).stdout)
pm,port,url=e["instance"]["pid"],e["instance"]["port"],e["url"]
conn=["-h",f"{pg}/sock","-p",str(port),"-U","plumb","postgres"]
b="/usr/lib/postgresql/15/bin"
subprocess.run([f"{b}/pgbench","-i","-q","-s","5"]+conn,check=True,capture_output=True)
load=subprocess.Popen([f"{b}/pgbench","-n","-c","4","-R","100","-T","3000"]+conn,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
try:
  for rnd in range(2):
    for name,exe in (("old",OLD),("new",NEW)):
      for iv in ("1s","100ms"):
        out=os.path.join(tmp,f"{name}-{rnd}-{iv}.plumb")
        t0=time.time()
        p=subprocess.Popen([exe,"record","--interval",iv,"--duration",f"{secs}s","--out",out,"--pid",str(pm),"--engine",url],stderr=subprocess.DEVNULL)
        _,st,ru=os.wait4(p.pid,0)
        w=time.time()-t0
        print(f"{name} {iv} round {rnd}: {(ru.ru_utime+ru.ru_stime)/w*100:.3f}% of a core, {os.path.getsize(out)} bytes, maxrss {ru.ru_maxrss/1024:.1f} MiB",flush=True)
finally:
  load.kill(); subprocess.run([NEW,"engine","stop","--dir",pg,"--remove"],capture_output=True)
