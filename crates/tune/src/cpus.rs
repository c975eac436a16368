//! CPU lists (`0-3,8`) and CPU masks (`ff,00000001`) as the kernel prints them.

/// Parses a kernel CPU list such as `0-3,8,10-11`; `None` if malformed.
pub fn parse_list(s: &str) -> Option<Vec<u32>> {
    let mut v = corecap_linux::affinity::parse_cpu_list(s)?;
    v.sort_unstable();
    v.dedup();
    Some(v)
}

/// Formats CPUs as a kernel CPU list, with ranges: `[0,1,2,5]` → `0-2,5`.
pub fn format_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out.push_str(&v[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", v[i], v[j]));
        }
        i = j + 1;
    }
    out
}

/// Parses a hexadecimal CPU mask in 32-bit groups (`00000000,0000000f`); `None` if malformed.
pub fn parse_mask(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    let groups: Vec<&str> = s.trim().split(',').collect();
    for (g, word) in groups.iter().rev().enumerate() {
        let w = u32::from_str_radix(word, 16).ok()?;
        for bit in 0..32 {
            if w & (1 << bit) != 0 {
                cpus.push(g as u32 * 32 + bit);
            }
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_list_round_trip() {
        assert_eq!(parse_list("8,0-2,5").unwrap(), vec![0, 1, 2, 5, 8]);
        assert_eq!(format_list(&[0, 1, 2, 5, 8, 9]), "0-2,5,8-9");
        assert_eq!(format_list(&[]), "");
        assert!(parse_list("3-1").is_none());
    }

    #[test]
    fn test_mask() {
        assert_eq!(parse_mask("00000000,0000000f").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_mask("1,00000000").unwrap(), vec![32]);
        assert_eq!(parse_mask("0").unwrap(), Vec::<u32>::new());
        assert!(parse_mask("zz").is_none());
    }
}
