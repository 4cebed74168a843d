//! A process's memory figures, shared by `plumb mem` and `plumb os`.

use serde::Serialize;

/// A process's memory figures, from /proc/PID/status and smaps_rollup: the one set `plumb mem`
/// and `plumb os` show (flattened into their JSON, so each keeps its fields' names).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemFigures {
    pub vm_size_bytes: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub vm_data_bytes: Option<u64>,
    /// Private memory in swap only (the kernel's VmSwap leaves swapped shared memory out).
    pub vm_swap_bytes: Option<u64>,
    /// All memory in swap, shared included (smaps_rollup Swap).
    pub smaps_swap_bytes: Option<u64>,
    pub smaps_swap_pss_bytes: Option<u64>,
}

impl MemFigures {
    pub fn of(
        st: Option<&plumb_sys::process::Status>,
        sm: Option<&plumb_sys::process::SmapsRollup>,
    ) -> MemFigures {
        MemFigures {
            vm_size_bytes: st.and_then(|s| s.vm_size_bytes),
            vm_rss_bytes: st.and_then(|s| s.vm_rss_bytes),
            rss_anon_bytes: st.and_then(|s| s.rss_anon_bytes),
            rss_file_bytes: st.and_then(|s| s.rss_file_bytes),
            rss_shmem_bytes: st.and_then(|s| s.rss_shmem_bytes),
            vm_data_bytes: st.and_then(|s| s.vm_data_bytes),
            vm_swap_bytes: st.and_then(|s| s.vm_swap_bytes),
            smaps_swap_bytes: sm.and_then(|s| s.swap_bytes),
            smaps_swap_pss_bytes: sm.and_then(|s| s.swap_pss_bytes),
        }
    }
}
