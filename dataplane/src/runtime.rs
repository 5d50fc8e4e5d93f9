//! Real-time execution of a switch on AF_XDP ports: run-to-completion workers, each owning a
//! subset of the ports (RX, egress queues, TX), exchanging frames for each other's ports
//! through lock-free rings.
//!
//! With several workers each is a "pipe" with its own slice of the MMU's buffer (the buffer is
//! divided evenly), as multi-pipe switch ASICs partition theirs.

use crate::clock::{Clock, MonoClock};
use crate::config::SwitchSpec;
use crate::frame::{FrameId, FrameMem};
use crate::nicstats::{sum_xdp, NicCounters, PortNic, QueueCounters, WorkerCounters};
use crate::port::bpf::XdpMode;
use crate::port::sys::{wait_readable, EventFd};
use crate::port::xsk::{self, UmemMem, XskError, XskPort};
use crate::port::PortIo;
use crate::stats::DropReason;
use crate::switch::{Handoff, Outputs, Switch, SwitchShared, REALTIME_MAX_LAG_PS};
use crossbeam_queue::ArrayQueue;
use ringbuf::traits::{Consumer as _, Observer as _, Producer as _, Split as _};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// How much earlier than the shaper's next deadline an adaptive worker asks to wake.
const WAKE_EARLY_PS: u64 = 30_000_000;

/// How often a worker publishes its statistics and reads the kernel's counters (100 ms);
/// also how long an idle adaptive worker without an AFC ring sleeps at most.
const HOUSEKEEPING_PS: u64 = 100_000_000_000;

/// How long an adaptive worker spins without work before it sleeps.
const IDLE_SPIN_PS: u64 = 20_000_000;

/// How workers wait when there is nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollMode {
    /// Spin: lowest latency, one core per worker at 100%.
    Busy,
    /// Spin briefly, then sleep in `ppoll()` until a frame arrives or the shaper is due.
    Adaptive,
}

/// Options of `xoff run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub workers: usize,
    pub poll: PollMode,
    /// RX burst size.
    pub batch: usize,
    pub xdp_mode: Option<XdpMode>,
    /// UMEM chunks; computed from the buffer and rings when `None`.
    pub umem_frames: Option<u32>,
    /// Shared-memory AFC command ring for external controllers, drained by worker 0.
    pub afc: Option<Arc<crate::port::shm::AfcShm>>,
    /// Stamp frames in the kernel and histogram the reaction time (`crate::reaction`).
    pub reaction: bool,
    /// The queues between workers ([`Handoffs`]).
    pub handoff: HandoffRing,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            workers: 1,
            poll: PollMode::Adaptive,
            batch: 64,
            xdp_mode: None,
            umem_frames: None,
            afc: None,
            reaction: false,
            handoff: HandoffRing::default(),
        }
    }
}

/// Errors starting a switch.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Xsk(#[from] XskError),
    #[error("buffer configuration: {0}")]
    Switch(#[from] crate::switch::SwitchError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// UMEM chunks needed for `spec`: every ring full, plus as many packets as the buffer can
/// hold at one 256-byte cell each, plus what the emulated wires hold.
pub fn umem_frames_for(spec: &SwitchSpec) -> u32 {
    // Each RX queue's socket has its own RX and fill rings (issue 23 item 4).
    let sockets: u64 = spec.ports.iter().map(|p| u64::from(p.queues_rx)).sum();
    let rings = sockets * u64::from(xsk::RING) * 2;
    let buffer = match &spec.buffer {
        Some(b) => b.buffer_bytes,
        None => spec
            .ports
            .iter()
            .map(|p| p.queue_limit * p.queues as u64)
            .sum(),
    };
    let wire: u64 = spec
        .ports
        .iter()
        .map(|p| (p.rate_bps / 8).saturating_mul(p.delay_ps) / 1_000_000_000_000 / 64 + 64)
        .sum();
    (rings + (buffer / 256).min(262_144) + wire + 4096).min(1 << 20) as u32
}

/// A running switch.
pub struct Running {
    pub shared: Arc<SwitchShared>,
    /// MMU statistics each worker last published (as the struct: the reader turns them into
    /// JSON, so an idle worker's housekeeping builds no JSON tree nobody asked for).
    pub mmu_stats: Arc<Mutex<Vec<Option<mmu::MmuStats>>>>,
    /// Flow-control statistics each worker last published.
    pub fc_stats: Arc<Mutex<Vec<Option<crate::scheme::SchemeStats>>>>,
    /// Headroom table of worker 0's MMU, for printing at start.
    pub headroom: Option<Vec<mmu::HeadroomRow>>,
    pub started: Instant,
    pub modes: Vec<(String, XdpMode)>,
    /// Sockets, RX queues and workers (issue 23 item 4).
    pub nic: Arc<NicCounters>,
    umem_frames: u64,
    umem_free: Arc<Vec<crate::stats::Counter>>,
    umem_rings: Arc<Vec<crate::stats::Counter>>,
    pool: Arc<ArrayQueue<FrameId>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Running {
    /// Waits for every worker to finish (after the stop flag is set).
    pub fn join(&self) {
        let threads = self
            .threads
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default();
        for t in threads {
            let _ = t.join();
        }
    }

    /// The lossless audit of the switch as it stands (exact once traffic has stopped).
    pub fn audit(&self) -> crate::audit::Audit {
        self.shared.audit(&self.snapshot())
    }

    /// Current counters as JSON-serialisable snapshot.
    pub fn snapshot(&self) -> crate::stats::SwitchSnapshot {
        let merge = |m: &Mutex<Vec<Option<mmu::MmuStats>>>| {
            let v = m.lock().map(|g| g.clone()).unwrap_or_default();
            let per: Vec<serde_json::Value> = v
                .iter()
                .flatten()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            match per.len() {
                0 => None,
                1 => per.into_iter().next(),
                _ => Some(serde_json::Value::Array(per)),
            }
        };
        let mut snap = self
            .shared
            .snapshot(self.started.elapsed().as_secs_f64(), merge(&self.mmu_stats));
        // A running switch watches its links (`crate::ctl::LinkWatch`): report the counts,
        // zeros included.
        for (p, c) in snap.ports.iter_mut().zip(&self.shared.counters) {
            p.port_down = Some(c.link_down.get());
            p.port_up = Some(c.link_up.get());
        }
        snap.umem = Some(crate::stats::UmemSnapshot {
            frames: self.umem_frames,
            free: self.umem_free.iter().map(|c| c.get()).sum::<u64>() + self.pool.len() as u64,
            in_rings: self.umem_rings.iter().map(|c| c.get()).sum(),
        });
        snap.pfc =
            self.fc_stats.lock().ok().and_then(|g| {
                crate::scheme::StatsSet::collect(g.iter().flatten().cloned().collect())
            });
        let names: Vec<String> = self
            .shared
            .spec
            .ports
            .iter()
            .map(|p| p.name.clone())
            .collect();
        snap.nic = Some(self.nic.snapshot(&names));
        snap
    }
}

/// A sysfs counter file's value, read afresh from offset 0.
fn read_counter(f: &std::fs::File) -> Option<u64> {
    let mut buf = [0u8; 32];
    let n = std::os::unix::fs::FileExt::read_at(f, &mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// The `len` bytes of frame `f` (a tap's copy source).
fn frame_bytes<M: FrameMem>(mem: &M, f: FrameId, len: u32) -> &[u8] {
    let d = mem.data(f);
    &d[..(len as usize).min(d.len())]
}

/// Wakes a worker sleeping in `ppoll()` when a hand-off arrives for it.
///
/// The sleeper raises `sleeping`, then looks at its rings; a sender pushes, then looks at
/// `sleeping`. Each side puts a `SeqCst` fence between its store and its load (the
/// store-buffering pattern), so at least one of them sees the other: either the sleeper
/// finds the hand-off, or the sender finds the flag and signals the eventfd.
struct Waker {
    sleeping: AtomicBool,
    wake: EventFd,
}

/// Slots of each hand-off ring.
pub const HANDOFF_RING: usize = 8192;

/// Which queue carries hand-offs between workers (`xoff run --handoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandoffRing {
    /// One `ringbuf` SPSC ring per (sender, receiver) pair of workers.
    #[default]
    Ringbuf,
    /// One `crossbeam` MPMC queue per receiving worker, shared by every sender.
    Crossbeam,
}

impl std::str::FromStr for HandoffRing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ringbuf" => Ok(HandoffRing::Ringbuf),
            "crossbeam" => Ok(HandoffRing::Crossbeam),
            o => Err(format!("{o}: use ringbuf or crossbeam")),
        }
    }
}

/// The sending end of the ring from this worker to one other.
enum Tx {
    /// Owned by this worker alone: `HeapProd` is `Send` but not `Sync`, and pushes through
    /// `&mut`.
    Spsc(HeapProd<Handoff>),
    Mpmc(Arc<ArrayQueue<Handoff>>),
}

impl Tx {
    fn push(&mut self, h: Handoff) -> Result<(), Handoff> {
        match self {
            Tx::Spsc(p) => p.try_push(h),
            Tx::Mpmc(q) => q.push(h),
        }
    }

    fn len(&self) -> usize {
        match self {
            Tx::Spsc(p) => p.occupied_len(),
            Tx::Mpmc(q) => q.len(),
        }
    }
}

/// The receiving ends of the rings into this worker.
enum Rx {
    /// One ring per sending worker, drained in turn from `next`.
    Spsc {
        from: Vec<HeapCons<Handoff>>,
        next: usize,
    },
    Mpmc(Arc<ArrayQueue<Handoff>>),
}

/// One worker's ends of the hand-off rings: the sending end of a ring to every worker and
/// the receiving ends of the rings into it, for packets and control frames bound for the
/// ports another worker owns, and the wakers of every worker.
///
/// With [`HandoffRing::Ringbuf`] (the default) each (sender, receiver) pair has its own SPSC
/// ring of [`HANDOFF_RING`] slots: each end has one owner, so a push or pop is a plain store
/// and load of the ring's indices (the other side's index is re-read only when the ring looks
/// full or empty), with no compare-and-swap and no cache line shared by three workers.
/// [`HandoffRing::Crossbeam`] keeps one MPMC queue of [`HANDOFF_RING`] slots per receiver
/// (every sender pushes into it), for comparison (`xoff bench line-rate`, peers
/// `xoff-2w-*`). Either way `Handoffs` is `Send` and not `Sync`: the worker that holds it
/// is the only one using its ends.
///
/// Counting (issue 21 item 2): a data packet refused by a full ring is a `queue_full` drop of
/// its egress port (a control frame a `control_lost` one); another worker owns that port, so
/// the drop goes to the port's atomic `drops_shared` (`crate::stats`), never to the owner's
/// single-writer counters.
pub struct Handoffs {
    me: usize,
    /// By receiving worker.
    tx: Vec<Tx>,
    rx: Rx,
    wakers: Arc<[Waker]>,
    /// Workers this send gave something, to wake after the pushes.
    sent_to: Vec<bool>,
}

impl Handoffs {
    /// The ends of every worker of `workers`, in worker order, with `capacity` slots per ring.
    pub fn new(workers: usize, capacity: usize, ring: HandoffRing) -> std::io::Result<Vec<Self>> {
        let wakers: Arc<[Waker]> = (0..workers)
            .map(|_| {
                Ok(Waker {
                    sleeping: AtomicBool::new(false),
                    wake: EventFd::new()?,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?
            .into();
        let capacity = capacity.max(1);
        let (tx, rx): (Vec<Vec<Tx>>, Vec<Rx>) = match ring {
            HandoffRing::Ringbuf => {
                // ends[from][to]
                let mut prod: Vec<Vec<Tx>> = (0..workers).map(|_| Vec::new()).collect();
                let mut cons: Vec<Vec<HeapCons<Handoff>>> =
                    (0..workers).map(|_| Vec::new()).collect();
                for p in prod.iter_mut() {
                    for c in cons.iter_mut() {
                        let (tx, rx) = HeapRb::<Handoff>::new(capacity).split();
                        p.push(Tx::Spsc(tx));
                        c.push(rx);
                    }
                }
                let rx = cons
                    .into_iter()
                    .map(|from| Rx::Spsc { from, next: 0 })
                    .collect();
                (prod, rx)
            }
            HandoffRing::Crossbeam => {
                let queues: Vec<Arc<ArrayQueue<Handoff>>> = (0..workers)
                    .map(|_| Arc::new(ArrayQueue::new(capacity)))
                    .collect();
                let tx = (0..workers)
                    .map(|_| queues.iter().map(|q| Tx::Mpmc(q.clone())).collect())
                    .collect();
                (tx, queues.into_iter().map(Rx::Mpmc).collect())
            }
        };
        Ok(tx
            .into_iter()
            .zip(rx)
            .enumerate()
            .map(|(me, (tx, rx))| Handoffs {
                me,
                tx,
                rx,
                wakers: wakers.clone(),
                sent_to: vec![false; workers],
            })
            .collect())
    }

    /// Passes `out.handoff` to the rings of the ports' owners. A full ring drops a data
    /// packet (`queue_full` on its port) or a control frame (`control_lost` on its port; the
    /// scheme refreshes it). Returns the data packets dropped.
    pub fn send<M: FrameMem>(
        &mut self,
        owner: &[u16],
        shared: &SwitchShared,
        ledger: &crate::audit::Ledger,
        mem: &mut M,
        out: &mut Outputs,
    ) -> u64 {
        self.send_counted(owner, shared, ledger, mem, out, &mut 0)
    }

    /// As [`send`](Self::send), also adding the hand-offs the rings took to `delivered`.
    pub fn send_counted<M: FrameMem>(
        &mut self,
        owner: &[u16],
        shared: &SwitchShared,
        ledger: &crate::audit::Ledger,
        mem: &mut M,
        out: &mut Outputs,
        delivered: &mut u64,
    ) -> u64 {
        let mut dropped = 0;
        let before = *delivered;
        for h in out.handoff.drain(..) {
            let dst = usize::from(owner[usize::from(h.port)]);
            if let Err(h) = self.tx[dst].push(h) {
                let c = &shared.counters[usize::from(h.port)];
                if h.ctrl {
                    c.drop_shared(DropReason::ControlLost);
                } else {
                    c.drop_shared(DropReason::QueueFull);
                    ledger.handoff_lost(h.pkt.in_port, h.pkt.prio);
                    dropped += 1;
                }
                mem.free(h.pkt.frame);
            } else {
                *delivered += 1;
                self.sent_to[dst] = true;
            }
        }
        if *delivered > before {
            // One fence for the whole burst (see `Waker`).
            std::sync::atomic::fence(Ordering::SeqCst);
            for (w, sent) in self.sent_to.iter_mut().enumerate() {
                if std::mem::take(sent) && self.wakers[w].sleeping.load(Ordering::Relaxed) {
                    self.wakers[w].wake.signal();
                }
            }
        }
        dropped
    }

    /// Wakes worker `w` if it sleeps (something it acts on changed).
    pub fn kick(&self, w: usize) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.wakers[w].sleeping.load(Ordering::Relaxed) {
            self.wakers[w].wake.signal();
        }
    }

    /// The other workers, each with a ring into this one.
    pub fn peers(&self) -> usize {
        self.wakers.len() - 1
    }

    /// Hand-offs waiting for this worker.
    pub fn pending(&self) -> usize {
        match &self.rx {
            Rx::Spsc { from, .. } => from.iter().map(|c| c.occupied_len()).sum(),
            Rx::Mpmc(q) => q.len(),
        }
    }

    /// Hand-offs in the ring from this worker to worker `w` (with `Crossbeam`, in `w`'s
    /// queue, whoever sent them).
    pub fn in_ring_to(&self, w: usize) -> usize {
        self.tx[w].len()
    }

    /// The next hand-off for this worker.
    pub fn recv(&mut self) -> Option<Handoff> {
        match &mut self.rx {
            Rx::Spsc { from, next } => {
                for _ in 0..from.len() {
                    if let Some(h) = from[*next].try_pop() {
                        return Some(h);
                    }
                    *next = (*next + 1) % from.len();
                }
                None
            }
            Rx::Mpmc(q) => q.pop(),
        }
    }

    /// Announces that this worker is about to sleep. False (and not announced) if a hand-off
    /// is already waiting; else the caller sleeps on [`wake_fd`](Self::wake_fd) and calls
    /// [`woke`](Self::woke) after.
    pub fn sleeping(&self) -> bool {
        let w = &self.wakers[self.me];
        w.sleeping.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.pending() > 0 {
            w.sleeping.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The descriptor that becomes readable when another worker wakes this one.
    pub fn wake_fd(&self) -> i32 {
        self.wakers[self.me].wake.fd()
    }

    /// Ends a sleep [`sleeping`](Self::sleeping) announced.
    pub fn woke(&self) {
        let w = &self.wakers[self.me];
        w.sleeping.store(false, Ordering::Relaxed);
        w.wake.clear();
    }
}

/// One AF_XDP socket a worker holds: RX queue `port.queue` of port `pid`, and the port's TX
/// ring if this worker owns the port's egress (`tx`).
struct Sock {
    pid: u16,
    tx: bool,
    port: XskPort,
    /// Frames waiting for room in the TX ring (`tx` sockets only).
    pending: Vec<(FrameId, u32)>,
}

struct Worker {
    id: usize,
    sw: Switch,
    socks: Vec<Sock>,
    mem: UmemMem,
    boxes: Handoffs,
    owner: Vec<u16>,
    pool: Arc<ArrayQueue<FrameId>>,
    poll: PollMode,
    batch: usize,
    stop: Arc<AtomicBool>,
    mmu_stats: Arc<Mutex<Vec<Option<mmu::MmuStats>>>>,
    fc_stats: Arc<Mutex<Vec<Option<crate::scheme::SchemeStats>>>>,
    afc: Option<Arc<crate::port::shm::AfcShm>>,
    nic: Arc<NicCounters>,
    /// Free chunks this worker holds, published at housekeeping (`Running::umem`).
    umem_free: Arc<Vec<crate::stats::Counter>>,
    /// Chunks this worker's sockets lent the kernel (`XskPort::in_rings`).
    umem_rings: Arc<Vec<crate::stats::Counter>>,
    /// Each port's kernel `tx_dropped` file, and its value when the switch first read it.
    tx_dropped: std::collections::HashMap<u16, (std::fs::File, u64)>,
    /// `response_ps = "auto"` and this worker's MMU not yet re-sized (`crate::calibrate`).
    calibrating: bool,
    /// Kernel arrival stamps of the frames read this loop round, while calibrating.
    calib_stamps: Vec<u64>,
    /// Frames the switch had timed at the last calibration check.
    calib_seen: u64,
    /// When `housekeeping` is next due (`MonoClock` picoseconds).
    house_due: u64,
}

/// The worker holding RX queue `queue` of a port whose egress worker `owner` owns: queue 0
/// stays with the owner (it transmits through that socket), the others go round the workers
/// from there, so RSS spreads a port's flows over every worker.
pub fn queue_worker(owner: usize, queue: u32, workers: usize) -> usize {
    (owner + queue as usize) % workers.max(1)
}

/// Starts the switch `spec` on its interfaces. Workers run until `stop` is set.
///
/// Each port's egress (queues, shaper, TX ring) belongs to one worker; with `queues_rx` > 1
/// its RX queues spread over the workers ([`queue_worker`]). A frame read on any queue runs
/// the ingress pipeline on the worker that read it and reaches the egress owner through the
/// hand-off rings like any frame for another worker's port, so each TX ring has one
/// producer: the owner, through queue 0's socket. The other sockets' TX rings stay unused.
pub fn start(
    spec: SwitchSpec,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<Running, RunError> {
    let nports = spec.ports.len();
    let sockets: usize = spec.ports.iter().map(|p| p.queues_rx as usize).sum();
    // More workers than ports is useful only when RX queues give them something to read.
    let workers = opts.workers.clamp(1, nports.max(sockets).max(1));
    let owner: Vec<u16> = (0..nports).map(|p| (p % workers) as u16).collect();
    let frames = opts.umem_frames.unwrap_or_else(|| umem_frames_for(&spec));
    // `response_ps = "auto"` times frames from their kernel stamps as `--reaction` does.
    let stamp = opts.reaction || spec.response_auto;
    let want: Vec<xsk::PortOpen> = spec
        .ports
        .iter()
        .map(|p| xsk::PortOpen {
            iface: p.iface.clone(),
            queues: p.queues_rx,
            bind: p.xdp_bind,
            stamp,
        })
        .collect();
    let (ports, mut mem, open) = xsk::open_queues(&want, frames, opts.xdp_mode, spec.hugepages)?;
    if let Some(why) = &open.zerocopy_fallback {
        tracing::warn!(switch = %spec.name, "zero-copy bind failed, every port runs in copy mode: {why}");
    }
    if let Some(why) = &open.hugepage_fallback {
        tracing::warn!(switch = %spec.name, "UMEM without huge pages: {why}");
    }
    for w in &want {
        if let Some(have) = xsk::rx_queue_count(&w.iface).filter(|&h| h > w.queues) {
            tracing::warn!(iface = %w.iface, "{have} RX queues but queues_rx = {}: frames RSS puts on the others reach the kernel, not the switch (ethtool -L {} combined {})", w.queues, w.iface, w.queues);
        }
    }
    let modes = ports
        .iter()
        .map(|q| (q[0].iface.clone(), q[0].mode))
        .collect();
    let shared = SwitchShared::new(spec);
    let mut pipes = Vec::new();
    for w in 0..workers {
        pipes.push(Switch::new(
            shared.clone(),
            owner.clone(),
            w as u16,
            REALTIME_MAX_LAG_PS,
        )?);
    }
    let headroom = pipes[0].buffer().mmu().map(|m| m.headroom_table());
    let calibration = match pipes[0].buffer().mmu() {
        Some(m) if shared.spec.response_auto => {
            let start = m.config().response_ps;
            tracing::info!(switch = %shared.spec.name, "response_ps = \"auto\": reserving for {} µs until {} frames have timed this switch's reaction", start / 1_000_000, crate::calibrate::SAMPLES);
            Some(crate::nicstats::Calibration {
                start_response_ps: start,
                workers: (0..workers).map(|_| Default::default()).collect(),
                error: Default::default(),
            })
        }
        _ => None,
    };
    let nic = Arc::new(NicCounters {
        ports: ports
            .iter()
            .zip(&shared.spec.ports)
            .enumerate()
            .map(|(i, (q, p))| PortNic {
                iface: p.iface.clone(),
                attach: match q[0].mode {
                    XdpMode::Native => "native",
                    XdpMode::Generic => "generic",
                },
                requested: p.xdp_bind,
                queues: q
                    .iter()
                    .map(|s| {
                        let w = queue_worker(usize::from(owner[i]), s.queue, workers);
                        (w, QueueCounters::default())
                    })
                    .collect(),
            })
            .collect(),
        workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
        open,
        stamping: stamp,
        calibration,
    });

    let boxes = Handoffs::new(workers, HANDOFF_RING, opts.handoff)?;
    let pool = Arc::new(ArrayQueue::new(frames as usize));
    let mmu_stats = Arc::new(Mutex::new(vec![None; workers]));
    let fc_stats = Arc::new(Mutex::new(vec![None; workers]));
    let umem_free: Arc<Vec<crate::stats::Counter>> =
        Arc::new((0..workers).map(|_| Default::default()).collect());
    let umem_rings: Arc<Vec<crate::stats::Counter>> =
        Arc::new((0..workers).map(|_| Default::default()).collect());
    let mut per: Vec<Vec<Sock>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, qs) in ports.into_iter().enumerate() {
        for port in qs {
            let w = nic.ports[i].queues[port.queue as usize].0;
            per[w].push(Sock {
                pid: i as u16,
                tx: port.queue == 0,
                port,
                pending: Vec::new(),
            });
        }
    }
    // Spread the free chunks evenly over the workers.
    let share = mem.free_count() / workers;
    let mut threads = Vec::new();
    for (w, ((sw, socks), boxes)) in pipes.into_iter().zip(per).zip(boxes).enumerate() {
        let mut wm = mem.handle();
        wm.give_free(if w + 1 == workers {
            mem.take_free(usize::MAX)
        } else {
            mem.take_free(share)
        });
        let mut worker = Worker {
            id: w,
            sw,
            socks,
            mem: wm,
            boxes,
            owner: owner.clone(),
            pool: pool.clone(),
            poll: opts.poll,
            batch: opts.batch.clamp(1, xsk::RING as usize),
            stop: stop.clone(),
            mmu_stats: mmu_stats.clone(),
            fc_stats: fc_stats.clone(),
            afc: opts.afc.clone().filter(|_| w == 0),
            nic: nic.clone(),
            umem_free: umem_free.clone(),
            umem_rings: umem_rings.clone(),
            tx_dropped: Default::default(),
            calibrating: nic.calibration.is_some(),
            calib_stamps: Vec::new(),
            calib_seen: 0,
            house_due: 0,
        };
        threads.push(
            std::thread::Builder::new()
                .name(format!("xoff-w{w}"))
                .spawn(move || worker.run())?,
        );
    }
    Ok(Running {
        shared,
        mmu_stats,
        fc_stats,
        headroom,
        started: Instant::now(),
        modes,
        nic,
        umem_frames: u64::from(frames),
        umem_free,
        umem_rings,
        pool,
        threads: Mutex::new(threads),
    })
}

impl Worker {
    fn run(&mut self) {
        let clock = MonoClock;
        let mut rx = Vec::with_capacity(self.batch);
        let mut comp = Vec::with_capacity(xsk::RING as usize);
        let mut out = Outputs::new();
        // Start of the current run of idle rounds (0: busy).
        let mut idle_since = 0u64;
        let free_hi = self.socks.len() * xsk::RING as usize * 2 + 4096;
        let nic = self.nic.clone();
        let wc = &nic.workers[self.id];
        // Publish statistics before the first frame, so a control request never finds none.
        self.housekeeping();
        self.house_due = clock.now() + HOUSEKEEPING_PS;
        while !self.stop.load(Ordering::Relaxed) {
            let now = clock.now();
            let mut work = 0usize;
            let mut backlog = false;
            for s in self.socks.iter_mut() {
                let port = &mut s.port;
                comp.clear();
                port.completions(&mut comp);
                self.mem.give_free(comp.iter().copied());
                port.refill(self.mem.free_list());
                rx.clear();
                let got = port.rx_burst(&mut rx, self.batch);
                backlog |= got == self.batch;
                work += got;
                if got > 0 {
                    let bytes: u64 = rx.iter().map(|&(_, l)| u64::from(l)).sum();
                    let qc = &nic.ports[usize::from(s.pid)].queues[port.queue as usize].1;
                    qc.rx_pkts.add(got as u64);
                    qc.rx_bytes.add(bytes);
                    wc.rx_pkts.add(got as u64);
                    wc.rx_bytes.add(bytes);
                }
                // A tap on this port sees the burst as received (`crate::tap`).
                if let Some(t) = self.sw.shared.taps.session(usize::from(s.pid)) {
                    let c = &self.sw.shared.counters[usize::from(s.pid)];
                    let mem = &self.mem;
                    let frames = rx.iter().map(|&(f, len)| frame_bytes(mem, f, len));
                    t.on_rx(frames, c.rx_pkts.get(), c.tx_pkts.get());
                }
                let stamps = port.rx_stamps();
                if stamps.is_empty() {
                    for &(f, len) in &rx {
                        self.sw.receive(&mut self.mem, s.pid, f, len, now, &mut out);
                    }
                } else {
                    if self.calibrating {
                        self.calib_stamps.extend_from_slice(stamps);
                    }
                    for (&(f, len), &t) in rx.iter().zip(stamps) {
                        self.sw.rx_stamp_ns = t;
                        self.sw.receive(&mut self.mem, s.pid, f, len, now, &mut out);
                    }
                    self.sw.rx_stamp_ns = 0;
                }
                if got > 0 && !s.tx {
                    // A pause or resume read here changes the shared AFC registers of a port
                    // another worker serves: wake it if it sleeps, so it acts on them now.
                    self.boxes.kick(usize::from(self.owner[usize::from(s.pid)]));
                }
            }
            self.hand_off(&mut out);
            // The hand-off rings are this worker's other receive rings, read in bursts like
            // the sockets: after a stall of this worker they hold the other workers' backlog
            // (up to HANDOFF_RING frames), and taken at once it landed in its queues before the
            // egress could catch up, overflowing them (B in `bfc::two_workers_pause_by_queue_too`
            // lost 10-15 % in a queue that was never paused); a full burst leaves the backlog
            // flag set, so an egress found empty meanwhile is not idle (`set_rx_backlog`).
            let budget = self.batch * self.boxes.peers().max(1);
            let mut took = 0;
            while took < budget {
                let Some(h) = self.boxes.recv() else { break };
                self.sw.accept_handoff(&mut self.mem, h, now, &mut out);
                took += 1;
            }
            wc.handoffs_in.add(took as u64);
            work += took;
            backlog |= took == budget;
            if let Some(a) = &self.afc {
                work += a.poll(&self.sw.shared.afc, now);
            }
            self.sw.set_rx_backlog(backlog);
            let mut dead = Vec::new();
            for (i, s) in self.socks.iter_mut().enumerate() {
                if s.tx {
                    let pend = &mut s.pending;
                    self.sw.service(&mut self.mem, s.pid, now, &mut out);
                    pend.append(&mut out.tx);
                    if !pend.is_empty() && !self.sw.shared.is_up(usize::from(s.pid)) {
                        // Link down: frames due on the wire are dropped and counted, not sent
                        // into an interface that would discard them uncounted.
                        let c = &self.sw.shared.counters[usize::from(s.pid)];
                        self.sw.ledger.wire_dropped(s.pid, pend.len() as u64);
                        for (f, _) in pend.drain(..) {
                            c.drop(DropReason::PortDown);
                            crate::frame::FrameMem::free(&mut self.mem, f);
                        }
                    }
                    if !pend.is_empty() {
                        let k = s.port.tx_burst(pend);
                        let bytes: u64 = pend[..k].iter().map(|&(_, l)| u64::from(l)).sum();
                        let c = &self.sw.shared.counters[usize::from(s.pid)];
                        if let Some(t) = self.sw.shared.taps.session(usize::from(s.pid)) {
                            let mem = &self.mem;
                            let frames = pend[..k].iter().map(|&(f, len)| frame_bytes(mem, f, len));
                            t.on_tx(frames, c.rx_pkts.get(), c.tx_pkts.get());
                        }
                        c.tx_pkts.add(k as u64);
                        c.tx_bytes.add(bytes);
                        wc.tx_pkts.add(k as u64);
                        wc.tx_bytes.add(bytes);
                        if !self.sw.reactions.is_empty() {
                            let on_ring = crate::port::sys::monotonic_ns();
                            let r = &mut self.sw.reactions;
                            for &(f, _) in &pend[..k] {
                                if let Some(i) = r.iter().position(|&(g, _)| g == f) {
                                    wc.reaction.record(on_ring.saturating_sub(r.remove(i).1));
                                }
                            }
                        }
                        pend.drain(..k);
                        work += k;
                    }
                }
                if !s.port.alive() {
                    dead.push(i);
                }
            }
            // Calibration: the frames read this round are handled and what they triggered is
            // on a TX ring now (`crate::calibrate`).
            if !self.calib_stamps.is_empty() {
                let t = crate::port::sys::monotonic_ns();
                if let Some(c) = &nic.calibration {
                    let h = &c.workers[self.id].hist;
                    for st in self.calib_stamps.drain(..) {
                        h.record(t.saturating_sub(st));
                    }
                }
            }
            for i in dead.into_iter().rev() {
                let s = self.socks.remove(i);
                if s.tx {
                    tracing::warn!(iface = %s.port.iface, "interface disappeared; port {} is down, the switch keeps running on the others", s.pid);
                    self.sw.port_down(&mut self.mem, usize::from(s.pid), now);
                }
                for (f, _) in s.pending {
                    crate::frame::FrameMem::free(&mut self.mem, f);
                }
                // Frames in the dead port's rings are lost with it: the kernel frees its
                // rings, and the chunks are simply never seen again.
                drop(s.port);
            }
            // Flow-control timers (PFC refresh, watchdog) and control frames for other pipes.
            if self.sw.next_timer().is_some_and(|t| t <= now) {
                self.sw.on_timer(&mut self.mem, now, &mut out);
            }
            self.hand_off(&mut out);
            // Keep free chunks flowing between workers.
            if self.mem.free_count() > free_hi {
                for f in self.mem.take_free(self.mem.free_count() - free_hi / 2) {
                    let _ = self.pool.push(f);
                }
            } else if self.mem.free_count() < xsk::RING as usize {
                let mut got = Vec::new();
                while got.len() < xsk::RING as usize {
                    match self.pool.pop() {
                        Some(f) => got.push(f),
                        None => break,
                    }
                }
                self.mem.give_free(got);
            }
            // Due within the early margin an idle worker wakes with (`sleep`).
            if now + WAKE_EARLY_PS >= self.house_due {
                self.house_due = now + HOUSEKEEPING_PS;
                self.housekeeping();
            }
            if work > 0 {
                idle_since = 0;
            } else if self.poll == PollMode::Adaptive {
                // Spin for a short while (a burst's next frame is usually microseconds away),
                // then sleep until a frame arrives or the shaper is due. Bounding the spin by
                // time, not rounds, lets a shaped port sleep between its frames.
                let t = clock.now();
                if idle_since == 0 {
                    idle_since = t;
                } else if t - idle_since > IDLE_SPIN_PS {
                    // A wake-up with nothing readable (the idle timer) brings no burst:
                    // look once, then sleep again without spinning.
                    idle_since = if self.sleep(t) { 0 } else { 1 };
                }
            }
        }
    }

    /// Passes packets and control frames for other pipes' ports to their mailboxes.
    fn hand_off(&mut self, out: &mut Outputs) {
        if out.handoff.is_empty() {
            return;
        }
        let mut delivered = 0;
        self.boxes.send_counted(
            &self.owner,
            &self.sw.shared,
            &self.sw.ledger,
            &mut self.mem,
            out,
            &mut delivered,
        );
        self.nic.workers[self.id].handoffs_out.add(delivered);
    }

    /// `response_ps = "auto"`: once enough frames are timed and none came for a
    /// housekeeping round (the calibration burst is over), re-sizes this worker's MMU for
    /// the measured term the first time its buffer is empty.
    fn calibrate(&mut self) {
        if !self.calibrating {
            return;
        }
        let nic = self.nic.clone();
        let Some(c) = &nic.calibration else {
            self.calibrating = false;
            return;
        };
        let Some(m) = crate::calibrate::measured(&c.workers) else {
            return;
        };
        // Only once the burst is over: no frame timed since the last round.
        let last = std::mem::replace(&mut self.calib_seen, m.count);
        if m.count != last {
            return;
        }
        let ps = crate::calibrate::response_ps(&m);
        match self.sw.retune_response(ps) {
            Ok(false) => {}
            Ok(true) => {
                c.workers[self.id].applied_ps.set(ps);
                if let Ok(mut g) = c.error.lock() {
                    *g = None;
                }
                self.calibrating = false;
                self.calib_stamps.clear();
                if self.id == 0 {
                    let table = self.sw.buffer().mmu().map(|m| m.headroom_table());
                    tracing::info!(
                        switch = %self.sw.shared.spec.name,
                        "response_ps = \"auto\": {}; response_ps = 2 × p99.9 = {} µs (was {} µs)\n{}",
                        crate::calibrate::describe(&m),
                        ps / 1_000_000,
                        c.start_response_ps / 1_000_000,
                        table.map(|t| mmu::format_headroom_table(&t)).unwrap_or_default()
                    );
                }
            }
            Err(e) => {
                let why = format!(
                    "{}; response_ps = 2 × p99.9 ({} µs) does not fit: {e}; keeping {} µs",
                    crate::calibrate::describe(&m),
                    ps / 1_000_000,
                    c.start_response_ps / 1_000_000
                );
                tracing::warn!(switch = %self.sw.shared.spec.name, "{why}; measuring again on the next burst");
                if let Ok(mut g) = c.error.lock() {
                    *g = Some(why);
                }
                // A measurement a stall dominated: start over on the next burst.
                c.workers[self.id].hist.reset();
                self.calib_seen = 0;
                self.calib_stamps.clear();
            }
        }
    }

    fn housekeeping(&mut self) {
        self.calibrate();
        for s in &mut self.socks {
            if let Some(x) = s.port.ring_stats() {
                self.nic.ports[usize::from(s.pid)].queues[s.port.queue as usize]
                    .1
                    .set_xdp(&x);
            }
        }
        // The port's owner (holding queue 0) publishes the port's ring statistics: the sum
        // over its queues' sockets, whichever worker holds them.
        for s in self.socks.iter().filter(|s| s.tx) {
            let x = sum_xdp(
                self.nic.ports[usize::from(s.pid)]
                    .queues
                    .iter()
                    .map(|(_, q)| q.xdp()),
            );
            let c = &self.sw.shared.counters[usize::from(s.pid)];
            c.xdp_rx_dropped.set(x.rx_dropped);
            c.xdp_rx_invalid.set(x.rx_invalid_descs);
            c.xdp_rx_ring_full.set(x.rx_ring_full);
            c.xdp_fill_ring_empty.set(x.rx_fill_ring_empty_descs);
            c.xdp_tx_invalid.set(x.tx_invalid_descs);
            c.xdp_tx_ring_empty.set(x.tx_ring_empty_descs);
            // The kernel's own transmit drops on this interface, counted from start.
            // The sysfs file stays open and is re-read from offset 0 (sysfs renders it anew):
            // opening it by path every round was a third of an idle worker's time.
            let entry = match self.tx_dropped.entry(s.pid) {
                std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let path = format!("/sys/class/net/{}/statistics/tx_dropped", s.port.iface);
                    std::fs::File::open(path).ok().and_then(|f| {
                        let v = read_counter(&f)?;
                        Some(e.insert((f, v)))
                    })
                }
            };
            if let Some((f, base)) = entry {
                if let Some(v) = read_counter(f) {
                    c.kernel_tx_dropped.set(v.saturating_sub(*base));
                }
            }
        }
        self.umem_free[self.id].set(self.mem.free_count() as u64);
        let rings: usize = self.socks.iter().map(|s| s.port.in_rings()).sum();
        self.umem_rings[self.id].set(rings as u64);
        let now = MonoClock.now();
        if let Ok(mut g) = self.mmu_stats.lock() {
            g[self.id] = self.sw.buffer().mmu().map(mmu::Mmu::stats);
        }
        if let Ok(mut g) = self.fc_stats.lock() {
            g[self.id] = self.sw.scheme_stats(now);
        }
    }

    /// Sleeps until a frame arrives, another worker hands one over, or the shaper is due.
    /// False when it woke on its idle timer (housekeeping, the AFC ring) with nothing to
    /// read; a wake-up for a deadline of the switch (shaper, flow-control timer) is true, as
    /// the deadline is then met by spinning, not by another coarse sleep.
    fn sleep(&mut self, now: u64) -> bool {
        // An idle switch wakes only to publish its statistics and notice a stop or a
        // vanished interface (as often as `housekeeping` runs), or, while a writer is attached
        // to its AFC ring, to look at it for writers that do not ring its doorbell.
        let mut idle_at = self.house_due;
        if let Some(t) = self.afc.as_ref().and_then(|a| a.idle_poll_at(now)) {
            idle_at = idle_at.min(t);
        }
        let mut wake_at = idle_at;
        for s in self.socks.iter().filter(|s| s.tx) {
            if !s.pending.is_empty() {
                wake_at = now + 20_000_000; // TX ring was full: retry soon
            }
            if let Some(t) = self
                .sw
                .next_wakeup(s.pid, now)
                .into_iter()
                .chain(self.sw.next_timer())
                .min()
            {
                wake_at = wake_at.min(t);
            }
        }
        if wake_at <= now {
            return true;
        }
        if !self.boxes.sleeping() {
            return true;
        }
        // An external controller rings the AFC doorbell while we sleep on it.
        if self.afc.as_ref().is_some_and(|a| !a.arm()) {
            self.boxes.woke();
            return true;
        }
        let mut fds: Vec<i32> = self.socks.iter().filter_map(|s| s.port.poll_fd()).collect();
        fds.push(self.boxes.wake_fd());
        if let Some(a) = &self.afc {
            fds.extend([a.bell_fd(), a.opens_fd()]);
        }
        // Wake a little early: ppoll overshoots by tens of microseconds.
        let woken = wait_readable(
            &fds,
            (wake_at - now).saturating_sub(WAKE_EARLY_PS).max(1_000_000),
        );
        self.boxes.woke();
        if let Some(a) = &self.afc {
            a.disarm();
        }
        woken || wake_at < idle_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Topology;
    use crate::frame::{HeapMem, Pkt};
    use crate::switch::SwitchShared;

    /// A full mailbox: the data packet counts as `queue_full`, the control frame as
    /// `control_lost`, both on the destination port, and both frames are freed.
    #[test]
    fn full_mailbox_counts_data_and_control_on_the_port() {
        for ring in [HandoffRing::Ringbuf, HandoffRing::Crossbeam] {
            full_mailbox_counts(ring);
        }
    }

    fn full_mailbox_counts(ring: HandoffRing) {
        let t = Topology::parse(
            r#"
[[switch]]
name = "s1"
port = [{ name = "p1" }, { name = "p2" }]
"#,
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let shared = SwitchShared::new(t.switch_spec("s1").unwrap());
        let mut boxes = Handoffs::new(2, 1, ring).unwrap();
        let mut mem = HeapMem::new(4, 256);
        let mut out = Outputs::new();
        for ctrl in [false, false, true] {
            let f = mem.alloc().unwrap();
            out.handoff.push(Handoff {
                port: 1,
                pkt: Pkt::new(f, 64, 0, 0),
                ctrl,
            });
        }
        let mut delivered = 0;
        let ledger = crate::audit::Ledger::new(2);
        assert_eq!(
            boxes[0].send_counted(
                &[0, 1],
                &shared,
                &ledger,
                &mut mem,
                &mut out,
                &mut delivered
            ),
            1
        );
        assert_eq!(delivered, 1, "one of three hand-offs fit the ring");
        let c = &shared.counters[1];
        assert_eq!(c.drops_of(DropReason::QueueFull), 1);
        assert_eq!(c.drops_of(DropReason::ControlLost), 1);
        assert_eq!((boxes[1].pending(), boxes[0].pending()), (1, 0));
        assert_eq!(boxes[0].in_ring_to(1), 1);
        assert_eq!(mem.available(), 3, "the two refused frames are freed");
        assert!(boxes[1].recv().is_some_and(|h| !h.ctrl));
        assert!(boxes[1].recv().is_none());
        assert_eq!(boxes[1].pending(), 0);
    }

    fn one_switch(ports: usize) -> Arc<SwitchShared> {
        let names: Vec<String> = (1..=ports)
            .map(|i| format!("{{ name = \"p{i}\" }}"))
            .collect();
        let t = Topology::parse(
            &format!("[[switch]]\nname = \"s1\"\nport = [{}]\n", names.join(", ")),
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        SwitchShared::new(t.switch_spec("s1").unwrap())
    }

    /// Hands one data packet for `port` from `boxes`; true if the ring took it.
    fn hand(boxes: &mut Handoffs, owner: &[u16], shared: &SwitchShared, port: u16) -> bool {
        let mut mem = HeapMem::new(1, 256);
        let mut out = Outputs::new();
        let f = mem.alloc().unwrap();
        out.handoff.push(Handoff {
            port,
            pkt: Pkt::new(f, 64, 0, 0),
            ctrl: false,
        });
        let ledger = crate::audit::Ledger::new(owner.len());
        boxes.send(owner, shared, &ledger, &mut mem, &mut out) == 0
    }

    /// Whether `fd` turns readable within `ms` milliseconds.
    fn readable_within(fd: i32, ms: u64) -> bool {
        wait_readable(&[fd], ms * 1_000_000_000)
    }

    /// A worker that announced its sleep is woken (its eventfd turns readable) by the next
    /// hand-off for it, and only by that: one for another worker leaves it asleep. A worker
    /// with a hand-off waiting does not go to sleep at all.
    #[test]
    fn a_handoff_wakes_its_sleeping_receiver() {
        for ring in [HandoffRing::Ringbuf, HandoffRing::Crossbeam] {
            let shared = one_switch(3);
            let owner = [0u16, 1, 2];
            let mut boxes = Handoffs::new(3, 8, ring).unwrap();
            assert!(boxes[1].sleeping() && boxes[2].sleeping());
            assert!(
                !readable_within(boxes[1].wake_fd(), 20),
                "{ring:?}: woken by nothing"
            );
            assert!(hand(&mut boxes[0], &owner, &shared, 2));
            assert!(
                readable_within(boxes[2].wake_fd(), 5000),
                "{ring:?}: not woken"
            );
            assert!(
                !readable_within(boxes[1].wake_fd(), 20),
                "{ring:?}: the wrong worker woke"
            );
            boxes[2].woke();
            assert!(
                !readable_within(boxes[2].wake_fd(), 20),
                "{ring:?}: woke() clears"
            );
            // Not asleep: no signal (no system call on the hot path).
            assert!(hand(&mut boxes[0], &owner, &shared, 2));
            assert!(
                !readable_within(boxes[2].wake_fd(), 20),
                "{ring:?}: woken awake"
            );
            // A hand-off is waiting: the worker stays up.
            assert!(!boxes[2].sleeping(), "{ring:?}: slept over a hand-off");
            assert!(boxes[2].recv().is_some() && boxes[2].recv().is_some());
            assert!(boxes[2].sleeping(), "{ring:?}: all taken, may sleep");
            boxes[2].woke();
        }
    }

    /// `Ringbuf` gives each (sender, receiver) pair its own ring, `Crossbeam` each receiver
    /// one queue for all senders: with one slot, two senders both get through to worker 2 in
    /// the first, one of them in the second. Worker 2 takes what came, from both rings.
    #[test]
    fn ringbuf_rings_are_per_pair_crossbeam_queues_per_receiver() {
        for (ring, both) in [
            (HandoffRing::Ringbuf, true),
            (HandoffRing::Crossbeam, false),
        ] {
            let shared = one_switch(3);
            let owner = [0u16, 1, 2];
            let mut boxes = Handoffs::new(3, 1, ring).unwrap();
            assert!(hand(&mut boxes[0], &owner, &shared, 2));
            assert_eq!(hand(&mut boxes[1], &owner, &shared, 2), both, "{ring:?}");
            let n = if both { 2 } else { 1 };
            assert_eq!(boxes[2].pending(), n);
            assert_eq!(std::iter::from_fn(|| boxes[2].recv()).count(), n);
            assert_eq!(
                shared.counters[2].drops_of(DropReason::QueueFull),
                2 - n as u64
            );
        }
    }

    /// Queue 0 stays with the port's owner (its TX socket); the others go round the workers,
    /// so every worker reads a share of every multi-queue port.
    #[test]
    fn rx_queues_go_round_the_workers_from_the_owner() {
        let of = |owner, w| {
            (0..4)
                .map(|q| queue_worker(owner, q, w))
                .collect::<Vec<_>>()
        };
        assert_eq!(of(0, 2), vec![0, 1, 0, 1]);
        assert_eq!(of(1, 2), vec![1, 0, 1, 0]);
        assert_eq!(of(2, 3), vec![2, 0, 1, 2]);
        assert_eq!(of(0, 1), vec![0, 0, 0, 0]);
    }
}
