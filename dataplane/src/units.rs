//! Human units in configuration files: rates ("100Mbit", "25Gbps", "1e9"), times ("2us",
//! "1.5ms") and sizes ("16MB", "256KiB"). Internally rates are bit/s, times picoseconds and
//! sizes bytes.

use serde::{de, Deserialize, Deserializer};

/// Picoseconds per second.
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// Per-frame overhead on the wire that the shaper charges: preamble + SFD (8 B) + IFG (12 B).
pub const WIRE_OVERHEAD: u64 = 20;

fn split_num(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let idx = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (n, u) = s.split_at(idx);
    let v: f64 = n.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v, u.trim().to_ascii_lowercase()))
}

/// Parses a rate into bit/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, u) =
        split_num(s).ok_or_else(|| format!("`{s}` is not a rate (e.g. 100Mbit, 10Gbit)"))?;
    let unit = ["bit/s", "bps", "bit", "b"]
        .iter()
        .find_map(|suf| u.strip_suffix(suf))
        .unwrap_or(&u);
    let mult = match unit {
        "" | "b" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => {
            return Err(format!(
                "`{s}`: unknown rate unit `{u}` (use bit, kbit, Mbit, Gbit)"
            ))
        }
    };
    Ok((v * mult).round() as u64)
}

/// Parses a duration into picoseconds.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let (v, u) = split_num(s).ok_or_else(|| format!("`{s}` is not a duration (e.g. 2us, 1ms)"))?;
    let mult = match u.as_str() {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        "" if v == 0.0 => 0.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown time unit `{u}` (use ns, us, ms, s)"
            ))
        }
    };
    Ok((v * mult).round() as u64)
}

/// Parses a size into bytes (KB = 1000, KiB = 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (v, u) = split_num(s).ok_or_else(|| format!("`{s}` is not a size (e.g. 16MB, 256KiB)"))?;
    let mult = match u.as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown size unit `{u}` (use B, KB, KiB, MB, MiB)"
            ))
        }
    };
    Ok((v * mult).round() as u64)
}

/// Serialization time of a frame of `len` bytes (without FCS; FCS is counted in the 20 B of
/// preamble/IFG overhead's stead, as veth frames carry none) at `rate_bps`, in picoseconds.
/// Rate 0 means unshaped.
#[inline]
pub fn ser_ps(len: u64, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    ((len + WIRE_OVERHEAD) * 8 * PS_PER_S).div_ceil(rate_bps)
}

macro_rules! unit_type {
    ($name:ident, $parse:ident, $what:literal) => {
        #[doc = concat!("A ", $what, " read from a string with units or a bare number.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
        pub struct $name(pub u64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum Raw {
                    N(u64),
                    F(f64),
                    S(String),
                }
                match Raw::deserialize(d)? {
                    Raw::N(n) => Ok($name(n)),
                    Raw::F(f) if f >= 0.0 => Ok($name(f.round() as u64)),
                    Raw::F(f) => Err(de::Error::custom(format!("negative {}: {f}", $what))),
                    Raw::S(s) => $parse(&s).map($name).map_err(de::Error::custom),
                }
            }
        }
    };
}

unit_type!(Rate, parse_rate, "rate in bit/s");
unit_type!(Time, parse_time, "duration in picoseconds");
unit_type!(Size, parse_size, "size in bytes");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_rate("100Mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("25Gbps").unwrap(), 25_000_000_000);
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_time("2us").unwrap(), 2_000_000);
        assert_eq!(parse_time("1.5ms").unwrap(), 1_500_000_000);
        assert_eq!(parse_time("0").unwrap(), 0);
        assert!(parse_time("3 parsecs").is_err());
        assert_eq!(parse_size("16MB").unwrap(), 16_000_000);
        assert_eq!(parse_size("256KiB").unwrap(), 262_144);
    }

    #[test]
    fn serialization_time() {
        // 1500 B frame + 20 B overhead at 100 Gbit/s = 121.6 ns.
        assert_eq!(ser_ps(1500, 100_000_000_000), 121_600);
        assert_eq!(ser_ps(64, 10_000_000_000), 67_200);
        assert_eq!(ser_ps(1500, 0), 0);
    }
}
