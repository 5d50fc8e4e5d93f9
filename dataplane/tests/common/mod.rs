//! What the virtual-time congestion-control tests share (`cc.rs` drives the host stacks
//! directly, `sim_cc.rs` through `xoff sim`'s `[[flow]] cc`): the same measurements and the
//! same bounds (issue 19), so the two stay comparable figure for figure.

// Each test binary uses what it needs of this module.
#![allow(dead_code)]

/// Throughput of each flow, Gbit/s, from the bytes it had delivered at `from` (`a`) and at
/// `to` (`b`), both ps.
pub fn gbps(a: &[u64], b: &[u64], from: u64, to: u64) -> Vec<f64> {
    let secs = (to - from) as f64 / 1e12;
    a.iter()
        .zip(b)
        .map(|(x, y)| (y - x) as f64 * 8.0 / secs / 1e9)
        .collect()
}

/// A probe series' value at time `t` (its last sample at or before `t`; 0 before the first).
pub fn value_at(series: &[(u64, u64)], t: u64) -> u64 {
    series
        .iter()
        .rev()
        .find(|&&(x, _)| x <= t)
        .map_or(0, |&(_, v)| v)
}

/// Mean and max of a probe series' samples from `from` to `to` (ps, both included).
pub fn mean_max(series: Vec<(u64, u64)>, from: u64, to: u64) -> (f64, u64) {
    let v: Vec<u64> = series
        .into_iter()
        .filter(|&(t, _)| (from..=to).contains(&t))
        .map(|(_, v)| v)
        .collect();
    (
        v.iter().sum::<u64>() as f64 / v.len().max(1) as f64,
        v.iter().copied().max().unwrap_or(0),
    )
}

/// Each flow within 10 % of the fair share of what the flows carry together, and together
/// more than 80 % of the 100 Gbit/s bottleneck.
pub fn assert_fair(name: &str, gbps: &[f64]) {
    let total: f64 = gbps.iter().sum();
    for g in gbps {
        assert!(
            (g - total / 2.0).abs() <= 0.1 * total / 2.0,
            "{name}: {gbps:?} not within 10 % of the fair share"
        );
    }
    assert!(total > 80.0, "{name}: link underused: {total:.1} Gbit/s");
}
