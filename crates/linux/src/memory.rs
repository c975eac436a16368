//! Memory the kernel can still give: rings are checked against it before they are asked
//! for, since a ring larger than free memory sets off the global OOM killer.

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn available() -> Option<u64> {
    parse_meminfo(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable:",
    )
}

/// The value of `key` (a line `Key:   N kB`) in bytes.
fn parse_meminfo(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_parse() {
        let t = "MemTotal:       24000000 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(super::parse_meminfo(t, "MemAvailable:"), Some(2 << 20));
        assert_eq!(super::parse_meminfo(t, "Nope:"), None);
        assert!(super::available().is_some_and(|b| b > 0));
    }
}
