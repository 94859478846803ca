//! Sizes in configuration files: a number of bytes, or text such as "4MiB", "64 KiB", "1GiB",
//! "2TiB" (binary units; "MB" is read as MiB, as storage tools usually mean it).

use serde::Deserialize;

/// A size as a configuration file gives it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ByteSize {
    Bytes(u64),
    Text(String),
}

impl ByteSize {
    /// The size in bytes, or a message naming the text that is not a size.
    pub fn bytes(&self) -> Result<u64, String> {
        let text = match self {
            Self::Bytes(n) => return Ok(*n),
            Self::Text(t) => t.trim(),
        };
        let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" | "kb" => 1 << 10,
            "m" | "mib" | "mb" => 1 << 20,
            "g" | "gib" | "gb" => 1 << 30,
            "t" | "tib" | "tb" => 1 << 40,
            _ => return Err(format!("{text:?} is not a size: write bytes or a number with KiB, MiB, GiB or TiB")),
        };
        let number = number.parse::<u64>().map_err(|_| format!("{text:?} is not a size"))?;
        number.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))
    }
}
