//! PFC (IEEE 802.1Qbb) headroom and zero loss, as the DSH paper sizes it (§II-A/B): after an
//! ingress queue raises XOFF, the bytes still arriving (one round trip of the link plus the
//! frames in flight at both ends) must fit in the headroom `η = 2(C·D_prop + L_MTU) + 3840 B`
//! (Eq. 1); then a lossless class loses nothing. Run on `deploy/sim/incast-pfc.toml` (8
//! senders × 1 MB at 100 Gbit/s into one receiver through two switches, 1 µs links, 4 MB
//! buffers, PFC on priority 3, host NICs honour PFC) with static (SIH) and dynamic shared
//! (DSH) headroom.

use super::{sim_file, Check, Ctx, Row, Section};
use anyhow::{Context, Result};
use dataplane::fabric::{Fabric, FabricOptions};
use dataplane::Topology;
use mmu::config::HeadroomMode;
use std::fmt::Write;

/// One incast run: (max absorbed-after-XOFF / η over lossless PGs, XOFF frames sent, packets
/// lost end to end + lossless MMU drops, every flow complete).
fn incast(mode: HeadroomMode, log: &mut String) -> Result<(f64, u64, u64, bool)> {
    let mut t = Topology::load(sim_file("incast-pfc.toml"))?;
    for s in &mut t.switches {
        s.buffer.as_mut().context("buffer")?.headroom_mode = mode;
    }
    let mut f = Fabric::new(&t, &FabricOptions::default())?;
    f.run();
    let (mut worst, mut xoff, mut drops) = (0.0f64, 0u64, 0u64);
    for name in ["s1", "s2"] {
        let sw = f.switch(name).context(name)?;
        let st = sw.buffer().mmu().context("mmu")?.stats();
        for pg in st.pgs.iter().filter(|g| g.lossless) {
            let eta = f64::from(st.ports[pg.port].eta_cells);
            worst = worst.max(f64::from(pg.absorbed_peak) / eta);
        }
        drops += st.counters.drops.lossless();
        let pfc = sw
            .scheme_stats(f.now())
            .and_then(|s| s.pfc)
            .context("pfc")?;
        xoff += (0..sw.shared.spec.ports.len())
            .map(|p| pfc.total(p, dataplane::scheme::pfc::PfcCount::XoffSent))
            .sum::<u64>();
    }
    let flows = &f.flows().flows;
    let lost = flows.iter().map(|r| r.lost()).sum::<u64>() + drops;
    let done = flows.iter().all(|r| r.completed_ps.is_some());
    let _ = writeln!(
        log,
        "{mode:?}: absorbed/η max {worst:.3}, XOFF frames {xoff}, lost+dropped {lost}, \
         complete {done}"
    );
    Ok((worst, xoff, lost, done))
}

pub fn run(_ctx: &Ctx<'_>) -> Result<Section> {
    let mut log = String::new();
    let mut rows = Vec::new();
    for mode in [HeadroomMode::Sih, HeadroomMode::Dsh] {
        let (worst, xoff, lost, done) = incast(mode, &mut log)?;
        rows.push(
            Row::new(
                "DSH §II-B Eq. (1)",
                &format!("{mode:?}: most bytes absorbed after one XOFF / η"),
                "η covers what arrives after XOFF",
                worst,
                "x",
            )
            .check(Check::AtMost(1.0)),
        );
        rows.push(Row::holds(
            "802.1Qbb / DSH §II-A",
            &format!("{mode:?}: PFC engaged (XOFF sent), zero loss, every flow completes"),
            "lossless class loses nothing",
            xoff > 0 && lost == 0 && done,
        ));
    }
    Ok(Section {
        title: "PFC (headroom and zero loss)".into(),
        setup: "8:1 incast through two switches (`deploy/sim/incast-pfc.toml`): 100 Gbit/s, \
                1 µs links, 4 MB buffers, PFC on priority 3, NICs honour PFC; once with SIH \
                and once with DSH headroom. Not scaled; `--quick` runs the same."
            .into(),
        rows,
        log,
        ..Section::default()
    })
}
