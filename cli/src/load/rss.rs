//! The process's resident memory, read from `/proc/self/status` (Linux); 0 elsewhere.

/// Peak resident set size so far, in bytes (`VmHWM`).
pub(crate) fn peak() -> u64 {
    read("VmHWM:")
}

/// Resident set size now, in bytes (`VmRSS`).
pub(crate) fn current() -> u64 {
    read("VmRSS:")
}

/// Resident set size once the allocator has given back every page it holds free, in
/// bytes: what the process holds for its data, without the pages a burst freed that
/// the allocator keeps for reuse (the command line's allocator keeps them for a while,
/// `main.rs`). Under another allocator the collection frees nothing.
pub(crate) fn held() -> u64 {
    // SAFETY: `mi_collect` takes no pointers; it may run on any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
    current()
}

fn read(field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn peak_is_at_least_current_and_not_zero() {
        let (current, peak) = (super::current(), super::peak());
        assert!(current > 0);
        assert!(peak >= current, "{peak} < {current}");
        assert!(super::held() > 0);
    }
}
