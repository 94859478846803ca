//! Parsing sizes (`4KiB`, `64MiB`, `1k`) and durations (`10s`, `500ms`) from the command line.

use std::time::Duration;

/// Parses a byte size: a number with an optional unit (B, K/KB/KiB, M/MB/MiB, G/GB/GiB).
/// Both decimal-looking and binary units mean powers of 1024, as benchmark tools use them.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected a number with an optional unit like 4KiB or 64MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => {
            return Err(format!("invalid size unit {other:?} in {s:?}: use B, KiB, MiB or GiB"));
        }
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("size {s:?} is too large"))
}

/// Parses a duration such as `10s`, `500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?}: {e} (try 10s or 500ms)"))
}

/// Formats a byte size compactly: 4KiB, 64MiB, 1000B.
pub fn format_size(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1k").unwrap(), 1024);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("MiB").is_err());
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(64 << 20), "64MiB");
        assert_eq!(format_size(1000), "1000B");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("ten").is_err());
    }
}
