//! The process's resident memory, read from `/proc/self/status` (Linux); 0 elsewhere.

/// Peak resident set size so far, in bytes (`VmHWM`).
pub(crate) fn peak() -> u64 {
    read("VmHWM:")
}

/// Resident set size now, in bytes (`VmRSS`).
pub(crate) fn current() -> u64 {
    read("VmRSS:")
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
    }
}
