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

/// `x` rounded, if it fits a `u64`. A float-to-int cast saturates, so without this check
/// `hrtt = "8888888888888500us"` (found by the topology fuzzer) read as `u64::MAX` ps
/// instead of being refused.
fn in_range(x: f64, s: &str) -> Result<u64, String> {
    let r = x.round();
    // 2^64 is exact as an f64; every smaller non-negative rounded value converts exactly
    // or to the nearest representable u64.
    if r >= 18_446_744_073_709_551_616.0 {
        Err(format!("`{s}` is out of range"))
    } else {
        Ok(r as u64)
    }
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
    in_range(v * mult, s)
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
    in_range(v * mult, s)
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
    in_range(v * mult, s)
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
                    Raw::F(f) if f >= 0.0 => in_range(f, &f.to_string())
                        .map($name)
                        .map_err(de::Error::custom),
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
        // Beyond u64 picoseconds (213 days) is refused, not saturated.
        assert!(parse_time("8888888888888500us").is_err());
        assert!(parse_size("20000000000GB").is_err());
        assert!(parse_rate("1e20").is_err());
        assert!(parse_time("20000000s").is_err());
        assert_eq!(parse_time("18000000s").unwrap(), 18_000_000 * PS_PER_S);
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
