//! A zram swap device for plumb's memory pressure: found or hot-added, sized, made swap, and
//! taken down again when dropped.

use std::path::PathBuf;

/// A zram swap device set up for the run; swapoff and reset on drop.
pub struct Zram {
    /// `zram0`, `zram1`...
    pub name: String,
    hot_added: Option<u32>,
    swapped_on: bool,
    /// Its line in plumb's ledger, crossed off once it is taken down.
    ledger: crate::ledger::Entry,
}

impl Drop for Zram {
    fn drop(&mut self) {
        let dev = format!("/dev/{}", self.name);
        if self.swapped_on {
            if let Ok(c) = std::ffi::CString::new(dev.clone()) {
                // SAFETY: valid path.
                unsafe {
                    libc::swapoff(c.as_ptr());
                }
            }
        }
        let _ = std::fs::write(format!("/sys/block/{}/reset", self.name), "1");
        if let Some(id) = self.hot_added {
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", id.to_string());
        }
        self.ledger.done();
    }
}

/// swapon(2): use the priority in the low bits (linux/swap.h).
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;

impl Zram {
    /// A zram device of `size` bytes as swap (root): an unused one, else one hot-added;
    /// swapped off, reset (and hot-removed if added) when dropped.
    pub fn setup(size: u64) -> Result<Zram, crate::KernelError> {
        setup_zram(size)
    }
}

fn setup_zram(size: u64) -> Result<Zram, crate::KernelError> {
    if !crate::os::is_root() {
        return Err("--swap zram: setting up swap needs root".into());
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    // An unused zram device (disksize 0, not swap), else a new one.
    let mut found = None;
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("zram"))
            .collect();
        names.sort();
        for n in names {
            let ds =
                std::fs::read_to_string(format!("/sys/block/{n}/disksize")).unwrap_or_default();
            if ds.trim() == "0" && !swaps.contains(&format!("/dev/{n} ")) {
                found = Some((n, None));
                break;
            }
        }
    }
    if found.is_none() {
        if let Ok(id) = std::fs::read_to_string("/sys/class/zram-control/hot_add") {
            if let Ok(id) = id.trim().parse::<u32>() {
                found = Some((format!("zram{id}"), Some(id)));
            }
        }
    }
    let Some((name, hot)) = found else {
        return Err(
            "--swap zram: no free zram device (is the zram module loaded? modprobe zram)".into(),
        );
    };
    let mut z = Zram {
        name: name.clone(),
        hot_added: hot,
        swapped_on: false,
        // Before it becomes swap: a plumb killed from here on leaves it to the next.
        ledger: crate::ledger::note(crate::ledger::Item::Zram {
            name: name.clone(),
            hot_added: hot,
        }),
    };
    let sys = PathBuf::from(format!("/sys/block/{name}"));
    // lz4 where offered: fast, and random data does not compress whatever the algorithm.
    let _ = std::fs::write(sys.join("comp_algorithm"), "lz4");
    std::fs::write(sys.join("disksize"), size.to_string())
        .map_err(|e| format!("--swap zram: {}: {e}", sys.join("disksize").display()))?;
    let dev = format!("/dev/{name}");
    let out = std::process::Command::new("mkswap")
        .arg(&dev)
        .output()
        .map_err(|e| {
            crate::KernelError::io(format!("--swap zram: cannot run mkswap (util-linux)"), e)
        })?;
    if !out.status.success() {
        return Err(format!(
            "--swap zram: mkswap {dev} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let c = std::ffi::CString::new(dev.clone()).map_err(|e| e.to_string())?;
    // SAFETY: valid path; priority flag as swapon(2) documents.
    let r = unsafe { libc::swapon(c.as_ptr(), SWAP_FLAG_PREFER | 100) };
    if r != 0 {
        return Err(format!(
            "--swap zram: swapon {dev}: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    z.swapped_on = true;
    Ok(z)
}
