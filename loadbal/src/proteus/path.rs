//! The path table of an edge switch and the path states of Table II (§III-A.1).
//!
//! One [`PathTable`] holds the equal-cost paths from this edge to one destination edge, each
//! with the id the topology model gave it (§IV-C: "a unique path ID"), the local egress port it
//! leaves on, its base one-way delay, and the last `t_pd` and `u_link` the destination edge fed
//! back. Table II classifies a path from those two signals:
//!
//! | delay vs `RTT_low` | `u_link` | state |
//! |---|---|---|
//! | low | < 1 or = 1 | non-congested |
//! | ≥ `RTT_low` | < 1 | undetermined (PFC pausing with queueing) |
//! | ≥ `RTT_low` | = 1 | congested |
//!
//! A path's one-way delay is `t_pd` + `local`: `t_pd` is what the destination edge measured
//! from the moment a packet left this edge (its send time is stamped at departure), and
//! `local` is the queuing delay ahead on the path's first port here now (bytes queued at line
//! rate), which this switch knows exactly and at once. The paper measures the whole delay at
//! the destination; splitting off the first hop makes that part fresh instead of a trip old,
//! and lets Algorithm 1's order rule compare the delay a flow's previous packet still had in
//! front of it when it left (`t_pd` of its path) with the delay a packet taking another path
//! has in front of it now (`delay` of that path, queue here included).
//!
//! `RTT_low` is "20–40 % larger than the one-way base RTT" (§III-A.1, after Hermes); we use the
//! middle of that range, 1.3 × the path's base one-way delay ([`Params::rtt_low_permille`]).
//! "= 1" is read as `u_link ≥ 0.95` ([`Params::u_full_permille`]): a rate measured over one
//! period of a few microseconds is never exactly the line rate (framing, the period's edges).

/// A leaf-to-leaf path id: 12 bits on the wire (§IV-A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PathId(pub u16);

impl PathId {
    /// "No path": an unused alternative slot in the shim.
    pub const NONE: PathId = PathId(0xFFF);
    /// Largest valid id.
    pub const MAX: u16 = 0xFFE;

    pub fn is_none(self) -> bool {
        self == Self::NONE
    }
}

/// Proteus's thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `RTT_low` as a multiple of a path's base one-way delay, per mille (1300 = 1.3×).
    pub rtt_low_permille: u32,
    /// `u_link` at or above this (per mille) counts as a full link, Table II's "= 1".
    pub u_full_permille: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            rtt_low_permille: 1300,
            u_full_permille: 950,
        }
    }
}

/// Table II.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathState {
    NonCongested = 0,
    Undetermined = 1,
    Congested = 2,
}

/// One path of a [`PathTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathEntry {
    pub id: PathId,
    /// Local egress port (the first hop of the path).
    pub port: u16,
    /// Base one-way delay (propagation and serialisation, no queueing), ps.
    pub base_ps: u64,
    /// Last measured one-way delay `t_pd` from this edge's egress to the destination edge, ps.
    pub t_pd_ps: u64,
    /// Queuing delay ahead on `port` here now (bytes queued at line rate), ps.
    pub local_ps: u64,
    /// Bytes this edge sent on `port` in about the last measurement period (every
    /// destination's): the first hop's load, SelectPath's tie-break ([`Self::rank`]).
    pub sent_bytes: u64,
    /// Last measured utilisation `u_link`, per mille.
    pub u_permille: u32,
    /// `p_active`: false from a local reroute off this path (Algorithm 2) until PFC resumes.
    pub active: bool,
    /// Every packet this edge sent on the path before this time (ps) has arrived at the
    /// destination edge: the arrival frontier it fed back ([`PathTable::confirm`]); 0 until
    /// the first.
    pub arrived_ps: u64,
}

impl PathEntry {
    /// A path with no measurement yet: base delay, idle, active (non-congested).
    pub fn new(id: PathId, port: u16, base_ps: u64) -> Self {
        PathEntry {
            id,
            port,
            base_ps,
            t_pd_ps: base_ps,
            local_ps: 0,
            sent_bytes: 0,
            u_permille: 0,
            active: true,
            arrived_ps: 0,
        }
    }

    /// `RTT_low` of this path, ps.
    pub fn rtt_low_ps(&self, p: &Params) -> u64 {
        self.base_ps * u64::from(p.rtt_low_permille) / 1000
    }

    /// The path's one-way delay for a packet routed here now: `t_pd` + `local`, ps.
    #[inline]
    pub fn delay_ps(&self) -> u64 {
        self.t_pd_ps.saturating_add(self.local_ps)
    }

    /// Table II.
    pub fn state(&self, p: &Params) -> PathState {
        if self.delay_ps() < self.rtt_low_ps(p) {
            PathState::NonCongested
        } else if self.u_permille < p.u_full_permille {
            PathState::Undetermined
        } else {
            PathState::Congested
        }
    }

    /// SelectPath's order as one integer, smaller first: non-congested by delay, then
    /// undetermined by `u_link` descending ("likely resumed transmission quickly"), then
    /// congested by delay; ties to the path whose first hop this edge loaded least lately
    /// (`sent_bytes`), then to the lower `tie` (a rotation of the table index, so choices are
    /// reproducible).
    ///
    /// The first-hop tie-break is ours (the paper leaves ties open). Every path reads its
    /// base delay until the first feedback, and a first hop carrying a line-rate flow has no
    /// queue, so without it flows that start together were placed by the salt alone: two
    /// of them on one uplink while another stayed idle (`deploy/sim/proteus-leafspine.toml`,
    /// issue 18). Neither can leave it afterwards: its own packets are always queued there
    /// ([`super::Prev::Queued`]), and the order rule only admits moves by less than the packet
    /// gap, far below the queue's delay.
    #[inline]
    pub(crate) fn rank(&self, p: &Params, tie: usize) -> u128 {
        const METRIC: u64 = (1 << 56) - 1;
        const SENT: u64 = (1 << 52) - 1;
        let (class, metric) = match self.state(p) {
            PathState::NonCongested => (0u128, self.delay_ps().min(METRIC)),
            PathState::Undetermined => (1, u64::from(1000u32.saturating_sub(self.u_permille))),
            PathState::Congested => (2, self.delay_ps().min(METRIC)),
        };
        class << 120
            | u128::from(metric) << 64
            | u128::from(self.sent_bytes.min(SENT)) << 12
            | (tie as u128 & 0xFFF)
    }
}

/// The paths from this edge switch to one destination edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTable {
    pub params: Params,
    pub paths: Vec<PathEntry>,
}

/// Up to 4 table indices in SelectPath order: the choice and 3 alternatives (§III-B.2).
pub type Ranked = ([usize; 4], usize);

impl PathTable {
    pub fn new(params: Params, paths: Vec<PathEntry>) -> Self {
        PathTable { params, paths }
    }

    /// Index of the path with id `id`.
    pub fn index_of(&self, id: PathId) -> Option<usize> {
        self.paths.iter().position(|p| p.id == id)
    }

    /// A measurement fed back by the destination edge.
    pub fn feedback(&mut self, id: PathId, t_pd_ps: u64, u_permille: u32) -> bool {
        match self.index_of(id) {
            Some(i) => {
                let e = &mut self.paths[i];
                e.t_pd_ps = t_pd_ps;
                e.u_permille = u_permille.min(1000);
                true
            }
            None => false,
        }
    }

    /// The destination edge confirmed that the packet of path `id` sent at `sent_ps` arrived,
    /// and with it (one FIFO per hop) every packet sent on the path before: the frontier moves
    /// to just past it (never back).
    pub fn confirm(&mut self, id: PathId, sent_ps: u64) -> bool {
        match self.index_of(id) {
            Some(i) => {
                let e = &mut self.paths[i];
                e.arrived_ps = e.arrived_ps.max(sent_ps.saturating_add(1));
                true
            }
            None => false,
        }
    }

    /// The queuing delay ahead on `port` here now, ps, and the bytes this edge sent on it
    /// lately: every path leaving on it.
    #[inline]
    pub fn set_local(&mut self, port: u16, local_ps: u64, sent_bytes: u64) {
        for e in self.paths.iter_mut().filter(|e| e.port == port) {
            e.local_ps = local_ps;
            e.sent_bytes = sent_bytes;
        }
    }

    /// Sets `p_active` of every path leaving on `port` (Algorithm 2 kicks a path out; PFC
    /// resuming on the port brings it back).
    pub fn set_port_active(&mut self, port: u16, active: bool) {
        for e in self.paths.iter_mut().filter(|e| e.port == port) {
            e.active = active;
        }
    }

    /// SelectPath (Algorithm 1, lines 14–25) over the active paths `allow` admits, with up to
    /// three runners-up in the same order: the shim's alternatives. Equal paths go to the
    /// lowest table index.
    #[inline]
    pub fn select(&self, allow: impl Fn(usize, &PathEntry) -> bool) -> Ranked {
        self.select_salted(allow, 0)
    }

    /// [`Self::select`] with ties among equal paths broken from table index `salt` on
    /// (cyclically). Algorithm 1 salts with the flow's hash: the paper leaves ties open, and
    /// without a salt every new flow among equal paths (all of them, before any feedback)
    /// would take the same one.
    #[inline]
    pub fn select_salted(&self, allow: impl Fn(usize, &PathEntry) -> bool, salt: usize) -> Ranked {
        let mut best = [(u128::MAX, usize::MAX); 4];
        let mut n = 0;
        let len = self.paths.len().max(1);
        let salt = salt % len;
        for (i, e) in self.paths.iter().enumerate() {
            if !e.active || !allow(i, e) {
                continue;
            }
            let k = e.rank(&self.params, (i + len - salt) % len);
            if n == 4 && k >= best[3].0 {
                continue;
            }
            // Insertion into the sorted top four.
            let mut j = n.min(3);
            best[j] = (k, i);
            while j > 0 && best[j - 1].0 > best[j].0 {
                best.swap(j - 1, j);
                j -= 1;
            }
            n = (n + 1).min(4);
        }
        ([best[0].1, best[1].1, best[2].1, best[3].1], n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;

    fn path(id: u16, t_pd_us: f64, u: u32) -> PathEntry {
        let mut e = PathEntry::new(PathId(id), id, 10 * US);
        e.t_pd_ps = (t_pd_us * US as f64) as u64;
        e.u_permille = u;
        e
    }

    #[test]
    fn table_ii_states() {
        let p = Params::default();
        // Base 10 us: RTT_low = 13 us.
        assert_eq!(path(0, 10.0, 0).rtt_low_ps(&p), 13 * US);
        // Low RTT, under-utilised or full: non-congested (rows 1 and 2).
        assert_eq!(path(0, 12.9, 300).state(&p), PathState::NonCongested);
        assert_eq!(path(0, 12.9, 1000).state(&p), PathState::NonCongested);
        // RTT at RTT_low and above with u < 1: PFC pausing (row 3).
        assert_eq!(path(0, 13.0, 300).state(&p), PathState::Undetermined);
        assert_eq!(path(0, 40.0, 949).state(&p), PathState::Undetermined);
        // High RTT, full link: congested (row 4).
        assert_eq!(path(0, 40.0, 950).state(&p), PathState::Congested);
        assert_eq!(path(0, 13.0, 1000).state(&p), PathState::Congested);
    }

    #[test]
    fn select_path_priority_order() {
        let t = PathTable::new(
            Params::default(),
            vec![
                path(0, 30.0, 1000), // congested, 30 us
                path(1, 20.0, 400),  // undetermined, u 0.4
                path(2, 25.0, 800),  // undetermined, u 0.8
                path(3, 12.0, 1000), // non-congested, 12 us
                path(4, 11.0, 200),  // non-congested, 11 us
                path(5, 20.0, 990),  // congested, 20 us
            ],
        );
        // Non-congested by min delay, then undetermined by max utilisation, then congested
        // by min delay: 4, 3 | 2, 1 | 5, 0.
        assert_eq!(t.select(|_, _| true), ([4, 3, 2, 1], 4));
        // Without the non-congested ones: undetermined max-u first (line 20), not min delay.
        assert_eq!(t.select(|i, _| i != 3 && i != 4), ([2, 1, 5, 0], 4));
        // Only congested: min delay (line 23).
        assert_eq!(t.select(|i, _| i == 0 || i == 5).0[..2], [5, 0]);
        assert_eq!(t.select(|_, _| false).1, 0);
    }

    #[test]
    fn salt_rotates_ties_only() {
        let t = PathTable::new(
            Params::default(),
            vec![
                path(0, 10.0, 0),
                path(1, 10.0, 0),
                path(2, 10.0, 0),
                path(3, 9.0, 0),
            ],
        );
        // 3 is strictly best whatever the salt; the equal 0, 1, 2 follow from the salt on.
        assert_eq!(t.select_salted(|_, _| true, 0).0, [3, 0, 1, 2]);
        assert_eq!(t.select_salted(|_, _| true, 1).0, [3, 1, 2, 0]);
        assert_eq!(t.select_salted(|_, _| true, 6).0, [3, 2, 0, 1]);
        assert_eq!(t.select_salted(|i, _| i != 3, 3).0, [0, 1, 2, usize::MAX]);
    }

    #[test]
    fn inactive_paths_are_not_selected_until_resumed() {
        let mut t = PathTable::new(Params::default(), vec![path(0, 10.0, 0), path(1, 11.0, 0)]);
        assert_eq!(t.select(|_, _| true), ([0, 1, usize::MAX, usize::MAX], 2));
        t.set_port_active(0, false);
        assert_eq!(t.select(|_, _| true).0[0], 1);
        assert_eq!(t.select(|_, _| true).1, 1);
        t.set_port_active(0, true);
        assert_eq!(t.select(|_, _| true).0[0], 0);
    }

    #[test]
    fn feedback_updates_the_named_path() {
        let mut t = PathTable::new(Params::default(), vec![path(7, 10.0, 0)]);
        assert!(t.feedback(PathId(7), 50 * US, 2000));
        assert_eq!(t.paths[0].t_pd_ps, 50 * US);
        assert_eq!(t.paths[0].u_permille, 1000, "clamped to 1");
        assert_eq!(t.paths[0].state(&t.params), PathState::Congested);
        assert!(!t.feedback(PathId(8), 1, 1));
    }
}
