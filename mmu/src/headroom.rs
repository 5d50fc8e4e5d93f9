//! Headroom sizing (DSH §II-C Eq. 1, §III-A Eq. 3, §IV-B Eq. 4) plus Xoff's software
//! response term, and the per-port headroom table the binary prints at start.
//!
//! Eq. (1): `η = 2(C·D_prop + L_MTU) + 3840 B` covers, from the moment the downstream decides to
//! pause: waiting behind an MTU, pause propagation, the 3840 B processing cap of 802.1Qbb, the
//! upstream finishing an MTU, and the last packet's propagation. A software switch notices a
//! crossing and obeys a pause only after a poll/batch period, so Xoff adds `response_ps × C`.
//!
//! Eq. (1) counts bytes on the wire, but the buffer is allocated in cells: a 60 B frame
//! (84 B of wire time at line rate) takes a whole 256 B cell, 3.2× its wire share. Headroom
//! filled with small frames (ACKs, CNPs, RDMA reads) therefore overflows a byte-sized budget.
//! [`eta_cells`] scales every term that is line-rate time by the worst cell occupancy of the
//! frames that may arrive, as SONiC's headroom calculation does with its
//! `LOSSLESS_TRAFFIC_PATTERN.small_packet_percentage` (`buffer_headroom_mellanox.lua`:
//! `cell_occupancy = (100 − p + p × worst_case_factor) / 100`, default `p = 100`).

use serde::Serialize;

use crate::config::HeadroomMode;

/// 802.1Qbb cap on the time to process a PAUSE frame, expressed in bytes at line rate.
pub const PFC_PROCESSING_BYTES: u64 = 3840;

const PS_PER_S: u128 = 1_000_000_000_000;

/// `C·D` in bytes (rounded up), for a rate in bit/s and a time in picoseconds.
pub fn bytes_in_flight(rate_bps: u64, time_ps: u64) -> u64 {
    let bits = u128::from(rate_bps) * u128::from(time_ps);
    u64::try_from(bits.div_ceil(8 * PS_PER_S)).unwrap_or(u64::MAX)
}

/// DSH Eq. (1): `η = 2(C·D_prop + L_MTU) + 3840 B`.
pub fn eta_eq1(rate_bps: u64, delay_ps: u64, mtu: u32) -> u64 {
    2 * (bytes_in_flight(rate_bps, delay_ps) + u64::from(mtu)) + PFC_PROCESSING_BYTES
}

/// Software response term: bytes the link delivers during `response_ps`.
pub fn response_bytes(rate_bps: u64, response_ps: u64) -> u64 {
    bytes_in_flight(rate_bps, response_ps)
}

/// Smallest frame the headroom budget assumes: the 802.3 minimum of 64 B without its FCS,
/// the length frames reach Xoff's MMU with.
pub const MIN_FRAME_BYTES: u32 = 60;

/// Wire bytes of a frame beyond its length: preamble + SFD + IFG, as the dataplane's shaper
/// charges them (FCS is not carried on veth, so it is not counted either).
pub const WIRE_OVERHEAD_BYTES: u32 = 20;

/// Cell occupancy of one frame of `len` bytes as a fraction `(buffer bytes, wire bytes)`.
fn occupancy(len: u32, cell: u32) -> (u64, u64) {
    let cells = u64::from(len.div_ceil(cell));
    (
        cells * u64::from(cell),
        u64::from(len + WIRE_OVERHEAD_BYTES),
    )
}

/// The largest buffer-bytes-per-wire-byte ratio over frame lengths
/// `MIN_FRAME_BYTES..=mtu`, as a fraction. Within a run of lengths that take the same number
/// of cells the ratio falls with length, so only the first length of each run is a candidate.
pub fn worst_occupancy(cell: u32, mtu: u32) -> (u64, u64) {
    let lo = MIN_FRAME_BYTES.min(mtu).max(1);
    let mut worst = occupancy(lo, cell);
    let mut len = lo.div_ceil(cell) * cell + 1;
    while len <= mtu {
        let o = occupancy(len, cell);
        if u128::from(o.0) * u128::from(worst.1) > u128::from(worst.0) * u128::from(o.1) {
            worst = o;
        }
        len += cell;
    }
    worst
}

/// `η` in cells for `eta_bytes` of line-rate arrivals of which `one_frame` bytes are a single
/// frame (Eq. 1's upstream finishing its MTU; 0 for HPCC's `3·C·D`), when
/// `small_packet_percentage` % of the rest may be the frames with the worst cell occupancy
/// ([`worst_occupancy`]) and the remainder MTU-sized frames. Never below the byte count: with
/// cells smaller than a frame's wire overhead a frame takes fewer buffer bytes than wire bytes,
/// and Eq. (1) stays the floor. `small_packet_percentage = 0` is Eq. (1) in cells as the paper
/// sizes it, `ceil(η / cell)`.
pub fn eta_cells(
    eta_bytes: u64,
    one_frame: u32,
    mtu: u32,
    cell: u32,
    small_packet_percentage: u8,
) -> u64 {
    let cell64 = u64::from(cell);
    if small_packet_percentage == 0 {
        return eta_bytes.div_ceil(cell64);
    }
    let one = u64::from(one_frame).min(eta_bytes);
    let stream = u128::from(eta_bytes - one);
    let p = u128::from(small_packet_percentage.min(100));
    let (wn, wd) = worst_occupancy(cell, mtu);
    let (mn, md) = occupancy(mtu, cell);
    let (wn, wd, mn, md) = (
        u128::from(wn),
        u128::from(wd),
        u128::from(mn),
        u128::from(md),
    );
    // stream × ((100 − p)·mn/md + p·wn/wd) / 100, rounded up, at least the stream's bytes.
    let num = stream * ((100 - p) * mn * wd + p * wn * md);
    let den = 100 * md * wd;
    let buffered = num.div_ceil(den).max(stream);
    one.div_ceil(cell64)
        + u64::try_from(buffered.div_ceil(u128::from(cell))).unwrap_or(u64::MAX / 2)
}

/// HPCC `third.cc`: `headroom = rate * delay / 8 / 1e9 * 3` (delay in ns, integer maths).
pub fn eta_hpcc(rate_bps: u64, delay_ps: u64) -> u64 {
    let bytes = u128::from(rate_bps) * u128::from(delay_ps) / (8 * PS_PER_S);
    u64::try_from(bytes).unwrap_or(u64::MAX / 4) * 3
}

/// DSH Eq. (3): SIH's total headroom `h = N_p × N_q × η`.
pub fn sih_total(n_p: u64, n_q: u64, eta: u64) -> u64 {
    n_p * n_q * eta
}

/// DSH Eq. (4): DSH's insurance headroom `B_i = N_p × η`.
pub fn dsh_insurance_total(n_p: u64, eta: u64) -> u64 {
    n_p * eta
}

/// One row of the headroom table (one ingress port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadroomRow {
    /// Ingress port.
    pub port: usize,
    /// Link rate `C`, bit/s.
    pub rate_bps: u64,
    /// Propagation delay `D_prop`, ps.
    pub delay_ps: u64,
    /// `L_MTU`, bytes.
    pub mtu: u32,
    /// The scheme's formula: Eq. (1) for SIH/DSH, `3·C·D` for HPCC, bytes.
    pub eta_formula_bytes: u64,
    /// Software response term `response_ps × C`, bytes.
    pub response_bytes: u64,
    /// `η` used by the MMU: formula + response, bytes.
    pub eta_bytes: u64,
    /// `η` in cells.
    pub eta_cells: u32,
    /// Headroom reserved for this port: per PG × lossless PGs (SIH), insurance (DSH),
    /// `η` once (HPCC), in cells (includes the MTU crossing slack per reservation when
    /// `headroom_mtu_slack` is on, see [`crate::ingress`]).
    pub reserved_cells: u64,
    /// Same in bytes.
    pub reserved_bytes: u64,
    /// Scheme.
    pub mode: HeadroomMode,
}

/// Renders the table for a human (the `xoff run` banner).
pub fn format_headroom_table(rows: &[HeadroomRow]) -> String {
    let mut s = String::from(
        "port       rate    delay(ns)   mtu  eta_formula(B)  response(B)    eta(B)  eta(cells)  reserved(B)  mode\n",
    );
    for r in rows {
        s.push_str(&format!(
            "{:>4} {:>7.1}G {:>12.1} {:>5} {:>15} {:>12} {:>9} {:>11} {:>12}  {:?}\n",
            r.port,
            r.rate_bps as f64 / 1e9,
            r.delay_ps as f64 / 1e3,
            r.mtu,
            r.eta_formula_bytes,
            r.response_bytes,
            r.eta_bytes,
            r.eta_cells,
            r.reserved_bytes,
            r.mode
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1024.0 * 1024.0;

    /// DSH §V-A: 100 Gbit/s, 2 µs, 1500 B MTU gives η = 56 840 B.
    #[test]
    fn eta_eq1_matches_dsh_microbenchmark() {
        assert_eq!(eta_eq1(100_000_000_000, 2_000_000, 1500), 56_840);
        assert_eq!(response_bytes(100_000_000_000, 0), 0);
    }

    /// DSH §V-A: "The total headroom size for SIH is 56840B × 32 × 7 = 12MB" (MiB, rounded).
    #[test]
    fn sih_total_is_12mb_in_dsh_microbenchmark() {
        let h = sih_total(32, 7, eta_eq1(100_000_000_000, 2_000_000, 1500));
        assert_eq!(h, 12_732_160);
        assert!((h as f64 / MIB - 12.14).abs() < 0.01);
        // DSH reserves only N_p × η of insurance (Eq. 4).
        assert_eq!(dsh_insurance_total(32, 56_840), 1_818_880);
    }

    /// DSH §III-A: Trident2, 12 MiB, 32 × 40 GbE, 8 queues, 1.5 µs, 1500 B MTU → ~5.33 MB of
    /// headroom = 44.4 % of memory. η = 2(7500 + 1500) + 3840 = 21 840 B; the paper's "MB" are MiB.
    #[test]
    fn trident2_headroom_is_5_33_mib() {
        let eta = eta_eq1(40_000_000_000, 1_500_000, 1500);
        assert_eq!(eta, 21_840);
        let h = sih_total(32, 8, eta);
        assert_eq!(h, 5_591_040);
        assert!((h as f64 / MIB - 5.33).abs() < 0.005);
        assert!((h as f64 / (12.0 * MIB) - 0.444).abs() < 0.001);
    }

    /// A 60 B frame is 80 B of wire time and one 256 B cell: 3.2×, the worst of 60..=1500 B
    /// (257 B frames take two cells for 277 B of wire time, 1.85×).
    #[test]
    fn worst_cell_occupancy_is_the_smallest_frame() {
        assert_eq!(worst_occupancy(256, 1500), (256, 80));
        assert_eq!(worst_occupancy(64, 1500), (128, 85));
        // Byte cells: the buffer holds a frame's bytes, never its overhead.
        assert_eq!(worst_occupancy(1, 1500), (1500, 1520));
    }

    #[test]
    fn eta_in_cells_covers_a_headroom_of_small_frames() {
        let eta = eta_eq1(100_000_000_000, 1_000_000, 1500); // 31 840 B
        assert_eq!(eta, 31_840);
        // p = 0: Eq. (1) in cells as the paper sizes it.
        assert_eq!(eta_cells(eta, 1500, 1500, 256, 0), 125);
        // p = 100: one MTU frame (6 cells) + 30 340 B of 60 B frames at 256/80 each.
        let c = eta_cells(eta, 1500, 1500, 256, 100);
        assert_eq!(c, 6 + (30_340u64 * 256).div_ceil(80).div_ceil(256));
        // 30 340 B of line-rate time is 379.25 frames of 60 B: 380 cells hold them.
        assert_eq!(c, 6 + 380);
        // p = 50 is halfway between, in buffer bytes.
        let half = eta_cells(eta, 1500, 1500, 256, 50);
        assert!(half > 125 && half < c, "{half}");
        // Byte cells: never below Eq. (1).
        assert_eq!(eta_cells(eta, 1500, 1500, 1, 100), eta);
    }

    #[test]
    fn response_term_and_hpcc_headroom() {
        // 10 µs at 100 Gbit/s = 125 000 B.
        assert_eq!(response_bytes(100_000_000_000, 10_000_000), 125_000);
        // HPCC third.cc: 100 Gbit/s, 1 µs → 12 500 B × 3.
        assert_eq!(eta_hpcc(100_000_000_000, 1_000_000), 37_500);
        // Rounds up, never down: a single bit in flight needs a byte.
        assert_eq!(bytes_in_flight(1, 1), 1);
    }
}
