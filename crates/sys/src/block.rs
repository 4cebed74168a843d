//! Block devices: /proc/diskstats, /sys/block/DEV/queue, and the stack of devices under a mount
//! (device-mapper and md through partitions down to whole disks).

use crate::mount::{normalize, MountEntry};
use crate::{io_err, parse_err, DevNum, Result, Root};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One /proc/diskstats line. Sector counts are converted to bytes (the kernel always counts
/// 512-byte sectors here); times are milliseconds as the kernel keeps them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DiskStats {
    pub dev: DevNum,
    pub name: String,
    pub reads: u64,
    pub reads_merged: u64,
    pub read_bytes: u64,
    pub read_time_ms: u64,
    pub writes: u64,
    pub writes_merged: u64,
    pub write_bytes: u64,
    pub write_time_ms: u64,
    pub in_flight: u64,
    pub busy_time_ms: u64,
    pub weighted_time_ms: u64,
    /// Kernel 4.18+.
    pub discards: Option<u64>,
    pub discard_bytes: Option<u64>,
    /// Kernel 5.5+.
    pub flushes: Option<u64>,
    pub flush_time_ms: Option<u64>,
}

pub fn read_diskstats(root: &Root) -> Result<Vec<DiskStats>> {
    let text = root.read("/proc/diskstats")?;
    parse_diskstats(&root.path("/proc/diskstats"), &text)
}

pub(crate) fn parse_diskstats(path: &Path, text: &str) -> Result<Vec<DiskStats>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 14 {
            return Err(parse_err(
                path,
                i + 1,
                "`major minor name` and at least 11 counters",
                line,
            ));
        }
        let n = |j: usize| -> Result<u64> {
            f[j].parse()
                .map_err(|_| parse_err(path, i + 1, "numeric diskstats counters", line))
        };
        let opt = |j: usize| -> Result<Option<u64>> {
            if j < f.len() {
                n(j).map(Some)
            } else {
                Ok(None)
            }
        };
        out.push(DiskStats {
            dev: DevNum {
                major: n(0)? as u32,
                minor: n(1)? as u32,
            },
            name: f[2].to_string(),
            reads: n(3)?,
            reads_merged: n(4)?,
            read_bytes: n(5)?.saturating_mul(512),
            read_time_ms: n(6)?,
            writes: n(7)?,
            writes_merged: n(8)?,
            write_bytes: n(9)?.saturating_mul(512),
            write_time_ms: n(10)?,
            in_flight: n(11)?,
            busy_time_ms: n(12)?,
            weighted_time_ms: n(13)?,
            discards: opt(14)?,
            discard_bytes: opt(16)?.map(|s| s.saturating_mul(512)),
            flushes: opt(18)?,
            flush_time_ms: opt(19)?,
        });
    }
    Ok(out)
}

/// What /sys/block/DEV/queue says about how writes reach the device.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueInfo {
    /// `write back` (volatile cache: durability needs FLUSH or FUA) or `write through`.
    pub write_cache: Option<String>,
    /// The device accepts FUA writes, so O_DSYNC direct writes need no separate flush.
    pub fua: Option<bool>,
    pub rotational: Option<bool>,
    /// The active scheduler (the bracketed one).
    pub scheduler: Option<String>,
    pub schedulers_available: Vec<String>,
    pub logical_block_size_bytes: Option<u64>,
    pub physical_block_size_bytes: Option<u64>,
    pub nr_requests: Option<u64>,
    pub read_ahead_bytes: Option<u64>,
    pub max_sectors_bytes: Option<u64>,
    /// The device can be mapped directly (DAX): persistent memory, whose file systems can
    /// bypass the page cache (`queue/dax`).
    pub dax: Option<bool>,
}

pub(crate) fn parse_scheduler(s: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let mut all = Vec::new();
    for w in s.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            active = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    // Devices with a single choice print it without brackets (`none`).
    if active.is_none() && all.len() == 1 {
        active = all.first().cloned();
    }
    (active, all)
}

fn read_queue(dir: &Path) -> Result<Option<QueueInfo>> {
    let q = dir.join("queue");
    if !q.is_dir() {
        return Ok(None);
    }
    let text = |name: &str| -> Result<Option<String>> {
        let p = q.join(name);
        match std::fs::read_to_string(&p) {
            Ok(t) => Ok(Some(t.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&p, e)),
        }
    };
    let num = |name: &str| -> Result<Option<u64>> {
        match text(name)? {
            None => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| parse_err(&q.join(name), 1, "a number", &t)),
        }
    };
    let flag = |name: &str| -> Result<Option<bool>> { Ok(num(name)?.map(|v| v != 0)) };
    let (scheduler, schedulers_available) = match text("scheduler")? {
        Some(t) => parse_scheduler(&t),
        None => (None, Vec::new()),
    };
    Ok(Some(QueueInfo {
        write_cache: text("write_cache")?,
        fua: flag("fua")?,
        rotational: flag("rotational")?,
        scheduler,
        schedulers_available,
        logical_block_size_bytes: num("logical_block_size")?,
        physical_block_size_bytes: num("physical_block_size")?,
        nr_requests: num("nr_requests")?,
        read_ahead_bytes: num("read_ahead_kb")?.map(|k| k * 1024),
        max_sectors_bytes: num("max_sectors_kb")?.map(|k| k * 1024),
        dax: flag("dax")?,
    }))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Disk,
    Partition,
    DeviceMapper,
    Md,
    Loop,
    /// Persistent memory (NVDIMM) exposed by libnvdimm as `pmemN`: byte-addressable, no
    /// volatile device cache to flush.
    Pmem,
    Other,
}

/// One layer of the stack under a filesystem.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockDevice {
    pub name: String,
    pub dev: Option<DevNum>,
    pub kind: DeviceKind,
    /// The device-mapper name (`vg-data`) or md level.
    pub detail: Option<String>,
    pub size_bytes: Option<u64>,
    pub model: Option<String>,
    /// The partition's whole disk, or the devices a dm/md device is built on.
    pub lower: Vec<String>,
    /// Queue settings; partitions share their disk's and have none of their own.
    pub queue: Option<QueueInfo>,
}

/// The devices under a mount, top first, and the whole disks at the bottom.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceStack {
    pub top: String,
    pub layers: Vec<BlockDevice>,
    /// Physical (bottom) disks, in the order found.
    pub disks: Vec<String>,
}

impl DeviceStack {
    pub fn layer(&self, name: &str) -> Option<&BlockDevice> {
        self.layers.iter().find(|l| l.name == name)
    }
}

/// Resolve a sysfs symlink inside the root: relative targets stay within the root.
fn resolve_link(root: &Root, abs: &str) -> Result<Option<PathBuf>> {
    let p = root.path(abs);
    match std::fs::read_link(&p) {
        Ok(target) => {
            let joined = if target.is_absolute() {
                root.path(&target)
            } else {
                p.parent().unwrap_or(Path::new("/")).join(target)
            };
            Ok(Some(normalize(&joined)))
        }
        // A captured tree may hold a plain directory instead of the link.
        Err(_) if p.is_dir() => Ok(Some(p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&p, e)),
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Find a block device's name from its device number.
pub(crate) fn name_for_dev(root: &Root, dev: DevNum) -> Result<Option<String>> {
    Ok(resolve_link(root, &format!("/sys/dev/block/{dev}"))?
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())))
}

/// Find a device-mapper device (`dm-3`) by its name (`vg-data`).
pub(crate) fn dm_by_name(root: &Root, dm_name: &str) -> Option<String> {
    let dir = root.path("/sys/block");
    let rd = std::fs::read_dir(dir).ok()?;
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("dm-") && read_trim(&e.path().join("dm/name")).as_deref() == Some(dm_name)
        {
            return Some(n);
        }
    }
    None
}

/// The block device a mount entry sits on, if any: by device number, else by its source.
pub(crate) fn device_for_mount(root: &Root, m: &MountEntry) -> Result<Option<String>> {
    if m.dev.major != 0 {
        if let Some(n) = name_for_dev(root, m.dev)? {
            return Ok(Some(n));
        }
    }
    // btrfs and some others report an anonymous 0:N device; fall back to the source.
    if let Some(rest) = m.source.strip_prefix("/dev/mapper/") {
        return Ok(dm_by_name(root, rest));
    }
    if let Some(rest) = m.source.strip_prefix("/dev/") {
        if root.path(format!("/sys/class/block/{rest}")).exists() {
            return Ok(Some(rest.to_string()));
        }
    }
    Ok(None)
}

/// Walk from a device down to its whole disks.
pub(crate) fn resolve_stack(root: &Root, top: &str) -> Result<DeviceStack> {
    let mut stack = DeviceStack {
        top: top.to_string(),
        layers: Vec::new(),
        disks: Vec::new(),
    };
    let mut todo = vec![top.to_string()];
    // A corrupt tree could loop; a real stack is never this deep.
    let mut guard = 0;
    while let Some(name) = todo.pop() {
        guard += 1;
        if guard > 64 || stack.layer(&name).is_some() {
            continue;
        }
        let Some(dir) = resolve_link(root, &format!("/sys/class/block/{name}"))? else {
            return Err(crate::Error::Invalid {
                path: root.display_path(&root.path(format!("/sys/class/block/{name}"))),
                message: format!("block device {name} is not in sysfs"),
            });
        };
        let is_partition = dir.join("partition").exists();
        let dev = read_trim(&dir.join("dev")).and_then(|s| DevNum::parse(&s));
        let size_bytes = read_trim(&dir.join("size"))
            .and_then(|s| s.parse::<u64>().ok())
            .map(|s| s * 512);
        let mut layer = BlockDevice {
            name: name.clone(),
            dev,
            kind: DeviceKind::Other,
            detail: None,
            size_bytes,
            model: None,
            lower: Vec::new(),
            queue: None,
        };
        if is_partition {
            layer.kind = DeviceKind::Partition;
            if let Some(parent) = dir.parent().and_then(|p| p.file_name()) {
                layer.lower.push(parent.to_string_lossy().into_owned());
            }
        } else {
            layer.queue = read_queue(&dir)?;
            let mut slaves: Vec<String> = std::fs::read_dir(dir.join("slaves"))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            slaves.sort();
            if let Some(dm) = read_trim(&dir.join("dm/name")) {
                layer.kind = DeviceKind::DeviceMapper;
                layer.detail = Some(dm);
            } else if let Some(level) = read_trim(&dir.join("md/level")) {
                layer.kind = DeviceKind::Md;
                layer.detail = Some(level);
            } else if name.starts_with("loop") {
                layer.kind = DeviceKind::Loop;
                layer.detail = read_trim(&dir.join("loop/backing_file"));
            } else if name.starts_with("pmem") {
                layer.kind = DeviceKind::Pmem;
                layer.detail = layer
                    .queue
                    .as_ref()
                    .and_then(|q| q.dax)
                    .map(|d| if d { "DAX-capable" } else { "no DAX" }.to_string());
            } else if slaves.is_empty() {
                layer.kind = DeviceKind::Disk;
            }
            layer.model = read_trim(&dir.join("device/model"));
            layer.lower = slaves;
            if layer.lower.is_empty() {
                stack.disks.push(name.clone());
            }
        }
        // Depth-first, keeping the listed order.
        for l in layer.lower.iter().rev() {
            todo.push(l.clone());
        }
        stack.layers.push(layer);
    }
    Ok(stack)
}

/// The block devices that are disks (not loop, ram or zram devices), by name, sorted.
/// The block device holding `path` (its mount's device: a partition, a dm or loop device),
/// by name as in /proc/diskstats; None when it is not on a block device or cannot be read.
pub fn device_under(root: &Root, path: &Path) -> Option<String> {
    let mounts = crate::mount::read_mountinfo(root, None).ok()?;
    let canon = std::fs::canonicalize(path).ok()?;
    let m = crate::mount::mount_for_path(&mounts, &canon)?;
    device_for_mount(root, m).ok().flatten()
}

pub fn whole_disks(root: &Root) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root.path("/sys/block"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    !n.starts_with("loop") && !n.starts_with("ram") && !n.starts_with("zram")
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A block device's name from its `MAJ:MIN` (`/sys/dev/block/MAJ:MIN/uevent`, `DEVNAME=`).
pub fn name_of_devnum(root: &Root, majmin: &str) -> Option<String> {
    let t = root.read(format!("/sys/dev/block/{majmin}/uevent")).ok()?;
    t.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{link, put};

    /// A fake sysfs with: sda (sda1, sda2), a dm-0 `vg-data` over sda2 and nvme0n1p1,
    /// and md0 over sdb and sdc.
    pub(crate) fn fake_sysfs(root: &Path) {
        let disk =
            |path: &str, name: &str, dev: &str, wc: &str, fua: &str, rot: &str, sched: &str| {
                put(root, &format!("{path}/dev"), &format!("{dev}\n"));
                put(root, &format!("{path}/size"), "2097152\n");
                put(
                    root,
                    &format!("{path}/queue/write_cache"),
                    &format!("{wc}\n"),
                );
                put(root, &format!("{path}/queue/fua"), &format!("{fua}\n"));
                put(
                    root,
                    &format!("{path}/queue/rotational"),
                    &format!("{rot}\n"),
                );
                put(
                    root,
                    &format!("{path}/queue/scheduler"),
                    &format!("{sched}\n"),
                );
                put(root, &format!("{path}/queue/logical_block_size"), "512\n");
                put(root, &format!("{path}/queue/physical_block_size"), "4096\n");
                put(root, &format!("{path}/queue/nr_requests"), "64\n");
                put(root, &format!("{path}/queue/read_ahead_kb"), "128\n");
                std::fs::create_dir_all(
                    root.join(format!("{}/slaves", path.trim_start_matches('/'))),
                )
                .unwrap();
                link(
                    root,
                    &format!("/sys/class/block/{name}"),
                    &format!("../../{}", path.trim_start_matches("/sys/")),
                );
                link(
                    root,
                    &format!("/sys/block/{name}"),
                    &format!("../{}", path.trim_start_matches("/sys/")),
                );
                link(
                    root,
                    &format!("/sys/dev/block/{dev}"),
                    &format!("../../{}", path.trim_start_matches("/sys/")),
                );
            };
        let part = |path: &str, name: &str, dev: &str, n: &str| {
            put(root, &format!("{path}/dev"), &format!("{dev}\n"));
            put(root, &format!("{path}/partition"), &format!("{n}\n"));
            put(root, &format!("{path}/size"), "1024\n");
            link(
                root,
                &format!("/sys/class/block/{name}"),
                &format!("../../{}", path.trim_start_matches("/sys/")),
            );
            link(
                root,
                &format!("/sys/dev/block/{dev}"),
                &format!("../../{}", path.trim_start_matches("/sys/")),
            );
        };
        let sda = "/sys/devices/pci0000:00/0000:00:10.0/host0/target0:0:0/0:0:0:0/block/sda";
        disk(
            sda,
            "sda",
            "8:0",
            "write back",
            "1",
            "1",
            "mq-deadline [bfq] none",
        );
        put(root, &format!("{sda}/device/model"), "ST4000NM0035\n");
        part(&format!("{sda}/sda1"), "sda1", "8:1", "1");
        part(&format!("{sda}/sda2"), "sda2", "8:2", "2");
        let nvme = "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
        disk(
            nvme,
            "nvme0n1",
            "259:0",
            "write through",
            "0",
            "0",
            "[none] mq-deadline",
        );
        part(&format!("{nvme}/nvme0n1p1"), "nvme0n1p1", "259:1", "1");
        let dm = "/sys/devices/virtual/block/dm-0";
        disk(dm, "dm-0", "253:0", "write back", "1", "0", "none");
        put(root, &format!("{dm}/dm/name"), "vg-data\n");
        link(
            root,
            &format!("{dm}/slaves/sda2"),
            "../../../../pci0000:00/0000:00:10.0/host0/target0:0:0/0:0:0:0/block/sda/sda2",
        );
        link(
            root,
            &format!("{dm}/slaves/nvme0n1p1"),
            "../../../../pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/nvme0n1p1",
        );
        let sdb = "/sys/devices/pci0000:00/0000:00:11.0/block/sdb";
        let sdc = "/sys/devices/pci0000:00/0000:00:12.0/block/sdc";
        disk(
            sdb,
            "sdb",
            "8:16",
            "write back",
            "0",
            "1",
            "[mq-deadline] none",
        );
        disk(
            sdc,
            "sdc",
            "8:32",
            "write back",
            "0",
            "1",
            "[mq-deadline] none",
        );
        // Persistent memory from libnvdimm's region0 (namespace0.0), DAX-capable.
        let pmem = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0012:00/ndbus0/region0/namespace0.0/block/pmem0";
        disk(pmem, "pmem0", "259:4", "write through", "0", "0", "none");
        put(root, &format!("{pmem}/queue/dax"), "1\n");
        let md = "/sys/devices/virtual/block/md0";
        disk(md, "md0", "9:0", "write back", "0", "1", "none");
        put(root, &format!("{md}/md/level"), "raid1\n");
        link(
            root,
            &format!("{md}/slaves/sdb"),
            "../../../../pci0000:00/0000:00:11.0/block/sdb",
        );
        link(
            root,
            &format!("{md}/slaves/sdc"),
            "../../../../pci0000:00/0000:00:12.0/block/sdc",
        );
    }

    #[test]
    fn diskstats_full_and_old_formats() {
        let t = " 254       0 vda 6245 3506 1717154 7010 918 8159 730976 3999 0 2864 11271 3172 49 39216 261 18 1\n   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n";
        let d = parse_diskstats(Path::new("/proc/diskstats"), t).unwrap();
        assert_eq!(d[0].read_bytes, 1717154 * 512);
        assert_eq!(d[0].flushes, Some(18));
        assert_eq!(d[0].discards, Some(3172));
        assert_eq!(d[1].flushes, None);
        assert_eq!(d[1].weighted_time_ms, 11);
        let e = parse_diskstats(Path::new("/proc/diskstats"), "8 0 sda 1 2 3\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/diskstats:1:"), "{e}");
        assert!(parse_diskstats(
            Path::new("/proc/diskstats"),
            "8 0 sda 1 2 3 4 5 6 7 8 9 10 x\n"
        )
        .is_err());
    }

    #[test]
    fn scheduler_brackets() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq").0.as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(parse_scheduler("none").0.as_deref(), Some("none"));
        assert_eq!(parse_scheduler("none kyber").0, None);
    }

    #[test]
    fn persistent_memory_is_named_with_its_dax() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let root = Root::new(d.path());
        let s = resolve_stack(&root, "pmem0").unwrap();
        assert_eq!(s.layers[0].kind, DeviceKind::Pmem);
        assert_eq!(s.layers[0].detail.as_deref(), Some("DAX-capable"));
        assert_eq!(s.layers[0].queue.as_ref().unwrap().dax, Some(true));
        assert_eq!(s.disks, ["pmem0"]);
        // Other disks say nothing about DAX when sysfs does not.
        let s = resolve_stack(&root, "sdb").unwrap();
        assert_eq!(s.layers[0].queue.as_ref().unwrap().dax, None);
    }

    #[test]
    fn partition_resolves_to_its_disk_with_queue() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let root = Root::new(d.path());
        assert_eq!(
            name_for_dev(&root, DevNum { major: 8, minor: 1 })
                .unwrap()
                .as_deref(),
            Some("sda1")
        );
        let s = resolve_stack(&root, "sda1").unwrap();
        assert_eq!(s.disks, vec!["sda"]);
        assert_eq!(s.layers[0].kind, DeviceKind::Partition);
        assert!(s.layers[0].queue.is_none());
        let q = s.layer("sda").unwrap().queue.as_ref().unwrap();
        assert_eq!(q.write_cache.as_deref(), Some("write back"));
        assert_eq!(q.fua, Some(true));
        assert_eq!(q.rotational, Some(true));
        assert_eq!(q.scheduler.as_deref(), Some("bfq"));
        assert_eq!(q.physical_block_size_bytes, Some(4096));
        assert_eq!(
            s.layer("sda").unwrap().model.as_deref(),
            Some("ST4000NM0035")
        );
    }

    #[test]
    fn device_mapper_over_two_partitions_reaches_both_disks() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let root = Root::new(d.path());
        assert_eq!(dm_by_name(&root, "vg-data").as_deref(), Some("dm-0"));
        let s = resolve_stack(&root, "dm-0").unwrap();
        assert_eq!(s.layers[0].kind, DeviceKind::DeviceMapper);
        assert_eq!(s.layers[0].detail.as_deref(), Some("vg-data"));
        assert_eq!(s.layers[0].lower, vec!["nvme0n1p1", "sda2"]);
        assert_eq!(s.disks, vec!["nvme0n1", "sda"]);
        let nvme = s.layer("nvme0n1").unwrap().queue.as_ref().unwrap();
        assert_eq!(nvme.write_cache.as_deref(), Some("write through"));
        assert_eq!(nvme.fua, Some(false));
    }

    #[test]
    fn md_raid_and_mount_lookup_by_source() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let root = Root::new(d.path());
        let s = resolve_stack(&root, "md0").unwrap();
        assert_eq!(s.layers[0].kind, DeviceKind::Md);
        assert_eq!(s.layers[0].detail.as_deref(), Some("raid1"));
        assert_eq!(s.disks, vec!["sdb", "sdc"]);

        let m = |dev: &str, src: &str| MountEntry {
            mount_id: 1,
            parent_id: 0,
            dev: DevNum::parse(dev).unwrap(),
            root: "/".into(),
            mount_point: "/".into(),
            mount_options: vec![],
            fs_type: "btrfs".into(),
            source: src.into(),
            super_options: vec![],
        };
        assert_eq!(
            device_for_mount(&root, &m("0:45", "/dev/mapper/vg-data"))
                .unwrap()
                .as_deref(),
            Some("dm-0")
        );
        assert_eq!(
            device_for_mount(&root, &m("0:45", "/dev/sda1"))
                .unwrap()
                .as_deref(),
            Some("sda1")
        );
        assert_eq!(
            device_for_mount(&root, &m("0:45", "overlay")).unwrap(),
            None
        );
        assert_eq!(
            device_for_mount(&root, &m("9:0", "/dev/md0"))
                .unwrap()
                .as_deref(),
            Some("md0")
        );
        assert!(resolve_stack(&root, "sdz").is_err());
    }

    #[test]
    fn garbage_queue_value_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        put(
            d.path(),
            "/sys/devices/pci0000:00/0000:00:11.0/block/sdb/queue/nr_requests",
            "lots\n",
        );
        let e = resolve_stack(&Root::new(d.path()), "sdb").unwrap_err();
        assert!(e.to_string().contains("queue/nr_requests:1"), "{e}");
    }
}

/// The I/O of some disks, read on each call: I/O per second and bytes per second since the
/// last call (None on the first, or when /proc/diskstats cannot be read).
pub struct DiskRate {
    root: Root,
    /// Device names as /proc/diskstats has them (vda, nvme0n1).
    devs: Vec<String>,
    last: Option<(std::time::Instant, u64, u64)>,
}

impl DiskRate {
    pub fn new(root: Root, devs: Vec<String>) -> DiskRate {
        DiskRate {
            root,
            devs,
            last: None,
        }
    }

    /// (I/O per second, bytes per second) since the last call.
    pub fn next(&mut self) -> Option<(f64, f64)> {
        if self.devs.is_empty() {
            return None;
        }
        let stats = read_diskstats(&self.root).ok()?;
        let (mut ios, mut bytes) = (0u64, 0u64);
        for d in stats.iter().filter(|d| self.devs.contains(&d.name)) {
            ios += d.reads + d.writes;
            bytes += d.read_bytes + d.write_bytes;
        }
        let now = std::time::Instant::now();
        let out = self.last.map(|(t, i, b)| {
            let s = now.duration_since(t).as_secs_f64().max(1e-3);
            (
                ios.saturating_sub(i) as f64 / s,
                bytes.saturating_sub(b) as f64 / s,
            )
        });
        self.last = Some((now, ios, bytes));
        out
    }
}
