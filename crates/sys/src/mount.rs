//! /proc/self/mountinfo and which mount a path lives on.

use crate::{parse_err, unescape_octal, DevNum, Result, Root};
use serde::Serialize;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountEntry {
    pub mount_id: u64,
    pub parent_id: u64,
    pub dev: DevNum,
    /// The directory of the filesystem that is mounted here (not `/` for bind mounts and for
    /// cgroup mounts inside a container).
    pub root: String,
    pub mount_point: String,
    /// Per-mount options (`rw,relatime`).
    pub mount_options: Vec<String>,
    pub fs_type: String,
    pub source: String,
    /// Filesystem options (`rw,discard,errors=remount-ro`).
    pub super_options: Vec<String>,
}

impl MountEntry {
    /// Mount and superblock options together, de-duplicated, in kernel order.
    pub fn all_options(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for o in self.mount_options.iter().chain(self.super_options.iter()) {
            if !out.contains(o) {
                out.push(o.clone());
            }
        }
        out
    }
}

/// Read the mount table. With `pid` it is that process's mount namespace, else plumb's own.
pub fn read_mountinfo(root: &Root, pid: Option<u32>) -> Result<Vec<MountEntry>> {
    let abs = match pid {
        Some(p) => format!("/proc/{p}/mountinfo"),
        None => "/proc/self/mountinfo".to_string(),
    };
    let text = root.read(&abs)?;
    parse_mountinfo(&root.path(&abs), &text)
}

pub(crate) fn parse_mountinfo(path: &Path, text: &str) -> Result<Vec<MountEntry>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(' ').collect();
        let bad = |what| parse_err(path, i + 1, what, line);
        let sep = f
            .iter()
            .position(|x| *x == "-")
            .ok_or_else(|| bad("a ` - ` separator before the filesystem type"))?;
        if sep < 6 || f.len() < sep + 3 {
            return Err(bad(
                "`id parent maj:min root mountpoint options ... - fstype source superopts`",
            ));
        }
        out.push(MountEntry {
            mount_id: f[0].parse().map_err(|_| bad("a numeric mount id"))?,
            parent_id: f[1].parse().map_err(|_| bad("a numeric parent id"))?,
            dev: DevNum::parse(f[2]).ok_or_else(|| bad("`major:minor`"))?,
            root: unescape_octal(f[3]),
            mount_point: unescape_octal(f[4]),
            mount_options: f[5].split(',').map(str::to_string).collect(),
            fs_type: f[sep + 1].to_string(),
            source: unescape_octal(f[sep + 2]),
            super_options: f
                .get(sep + 3)
                .map(|s| s.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
        });
    }
    if out.is_empty() {
        return Err(crate::Error::Invalid {
            path: path.to_path_buf(),
            message: "no mounts listed".into(),
        });
    }
    Ok(out)
}

/// Remove `.` and resolve `..` lexically. Used on paths already canonicalised by the caller,
/// and on sysfs symlink targets joined to their directory.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The mount a (canonical, absolute) path lives on: the longest mount point that contains it;
/// among equal mount points the last one listed, which is the one on top.
pub(crate) fn mount_for_path<'a>(mounts: &'a [MountEntry], path: &Path) -> Option<&'a MountEntry> {
    let path = normalize(path);
    let mut best: Option<&MountEntry> = None;
    for m in mounts {
        let mp = Path::new(&m.mount_point);
        if path.starts_with(mp) {
            let better = match best {
                None => true,
                Some(b) => {
                    mp.components().count() >= Path::new(&b.mount_point).components().count()
                }
            };
            if better {
                best = Some(m);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: &str = "22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
40 27 8:2 / /var/lib/postgresql rw,noatime shared:5 master:2 - xfs /dev/sda2 rw,attr2,inode64
41 40 253:1 /pgwal /var/lib/postgresql/15/main/pg_wal rw,noatime - ext4 /dev/mapper/vg-wal rw,data=ordered
42 27 0:50 / /mnt/my\\040disk rw - tmpfs tmpfs rw
43 40 8:3 / /var/lib/postgresql rw,noatime - ext4 /dev/sda3 rw
";

    #[test]
    fn parses_optional_fields_and_escapes() {
        let m = parse_mountinfo(Path::new("/proc/self/mountinfo"), MI).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[2].fs_type, "xfs");
        assert_eq!(m[2].source, "/dev/sda2");
        assert_eq!(m[2].dev, DevNum { major: 8, minor: 2 });
        assert_eq!(m[3].root, "/pgwal");
        assert_eq!(m[4].mount_point, "/mnt/my disk");
        assert_eq!(
            m[1].all_options(),
            vec!["rw", "relatime", "discard", "resv_strict"]
        );
    }

    #[test]
    fn longest_prefix_and_overmounts() {
        let m = parse_mountinfo(Path::new("/proc/self/mountinfo"), MI).unwrap();
        let f = |p: &str| mount_for_path(&m, Path::new(p)).unwrap().source.clone();
        assert_eq!(f("/"), "/dev/vda");
        assert_eq!(f("/var/lib/postgresql-old"), "/dev/vda");
        // /var/lib/postgresql is mounted twice; the later mount (sda3) hides the earlier one.
        assert_eq!(f("/var/lib/postgresql/15/main/base"), "/dev/sda3");
        assert_eq!(
            f("/var/lib/postgresql/15/main/pg_wal/0001"),
            "/dev/mapper/vg-wal"
        );
        assert_eq!(f("/mnt/my disk/x"), "tmpfs");
    }

    #[test]
    fn malformed_mountinfo_names_the_line() {
        let e = parse_mountinfo(
            Path::new("/proc/self/mountinfo"),
            "27 1 254:0 / / rw - ext4 /dev/vda rw\n28 1 8:1 /\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/proc/self/mountinfo:2:"), "{e}");
        let e = parse_mountinfo(
            Path::new("/proc/self/mountinfo"),
            "27 1 x / / rw - ext4 /dev/vda rw\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("major:minor"), "{e}");
    }

    #[test]
    fn normalize_resolves_dotdot() {
        assert_eq!(
            normalize(Path::new("/sys/dev/block/../../devices/pci/block/sda/sda2")),
            PathBuf::from("/sys/devices/pci/block/sda/sda2")
        );
    }
}
