//! AF_XDP ports over xsk-rs, all sharing one UMEM so that a frame received on one port is
//! transmitted on another without a copy in user space.
//!
//! A port may read several RX queues (`queues_rx`, issue 23 item 4): one socket per queue,
//! with the XDP program redirecting by `rx_queue_index`, so a NIC's RSS spreads flows over
//! sockets and thus over workers. Zero-copy binds are tried when asked (`xdp_bind`), and the
//! UMEM may live in huge pages; both fall back with the reason reported ([`OpenReport`]).
//!
//! Each interface gets its own socket with its own fill and completion rings (the kernel
//! requires that for a UMEM shared across devices); libxdp's program loading is inhibited and
//! our own redirect program ([`super::bpf`]) is attached with `BPF_LINK_CREATE`. On veth,
//! sockets run in copy mode, where the kernel places each frame 256 B (XDP_PACKET_HEADROOM)
//! into its 2 KiB chunk, leaving 1792 B for the frame.

use super::bpf::{XdpAttachment, XdpMode};
use super::PortIo;
use crate::config::XdpBind;
use crate::frame::{FrameId, FrameMem};
use crate::stats::XdpSnapshot;
use std::ffi::CString;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig, XdpFlags,
};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

/// Chunk size of the shared UMEM.
pub const CHUNK: u32 = 2048;
/// Ring sizes (RX, TX, fill, completion).
pub const RING: u32 = 2048;
const SOL_XDP: libc::c_int = 283;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Errors opening AF_XDP ports.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("interface `{0}` does not exist")]
    NoInterface(String),
    #[error("creating UMEM of {frames} frames: {msg}")]
    Umem { frames: u32, msg: String },
    #[error("binding AF_XDP socket on `{iface}`: {msg}")]
    Bind { iface: String, msg: String },
    #[error("attaching XDP program to `{iface}`: {err}")]
    Attach { iface: String, err: io::Error },
}

/// The interface index of `name`, if it exists.
pub fn ifindex(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; the function only
    // reads it.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// The shared UMEM: xsk-rs's region plus the descriptor of every chunk. Cloned per worker;
/// each clone keeps its own free list, and ownership of a chunk travels with its `FrameId`.
pub struct UmemMem {
    umem: Umem,
    descs: Arc<Vec<FrameDesc>>,
    free: Vec<FrameId>,
    room: usize,
}

// SAFETY: the UMEM region is shared memory; the frame-ownership protocol (a chunk is touched
// only by whoever holds its FrameId, and the kernel only between fill/tx and rx/completion)
// rules out concurrent access to the same chunk from two threads.
unsafe impl Send for UmemMem {}

impl UmemMem {
    /// Another handle on the same memory with an empty free list (for another worker).
    pub fn handle(&self) -> UmemMem {
        UmemMem {
            umem: self.umem.clone(),
            descs: self.descs.clone(),
            free: Vec::new(),
            room: self.room,
        }
    }

    /// Total chunks in the UMEM.
    pub fn frames(&self) -> usize {
        self.descs.len()
    }

    /// Free chunks held by this handle.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Moves up to `n` free chunks out of this handle.
    pub fn take_free(&mut self, n: usize) -> Vec<FrameId> {
        let k = self.free.len().saturating_sub(n);
        self.free.split_off(k)
    }

    /// This handle's free list itself, for a port to refill from its tail in place
    /// (`PortIo::refill`). `take_free(usize::MAX)` then `give_free` around each refill copied
    /// the whole list (up to tens of KB) and allocated, twice per port per worker round: a
    /// quarter of a loaded worker's time under a 1 Gbit/s UDP flood.
    pub fn free_list(&mut self) -> &mut Vec<FrameId> {
        &mut self.free
    }

    /// Adds chunks to this handle's free list.
    pub fn give_free(&mut self, f: impl IntoIterator<Item = FrameId>) {
        self.free.extend(f);
    }

    fn desc(&self, f: FrameId) -> FrameDesc {
        self.descs[f.0 as usize]
    }

    fn id_of(addr: usize) -> FrameId {
        FrameId((addr / CHUNK as usize) as u32)
    }
}

impl FrameMem for UmemMem {
    #[inline]
    fn data(&self, f: FrameId) -> &[u8] {
        let mut d = self.desc(f);
        // SAFETY: `d` is this UMEM's descriptor of chunk `f`, and whoever calls holds `f`, so
        // neither the kernel nor another thread writes the chunk meanwhile. The cursor only
        // sets the length of our local copy of the descriptor (clamped to the data room).
        unsafe {
            self.umem.data_mut(&mut d).cursor().set_pos(self.room);
            self.umem.data(&d).contents()
        }
    }

    #[inline]
    fn with_mut<R>(&mut self, f: FrameId, g: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut d = self.desc(f);
        // SAFETY: as in `data`; `&mut self` makes this the only access through this handle,
        // and chunk `f` is owned by the caller.
        let mut dm = unsafe { self.umem.data_mut(&mut d) };
        dm.cursor().set_pos(self.room);
        g(dm.contents_mut())
    }

    #[inline]
    fn alloc(&mut self) -> Option<FrameId> {
        self.free.pop()
    }

    #[inline]
    fn free(&mut self, f: FrameId) {
        self.free.push(f);
    }

    fn room(&self) -> usize {
        self.room
    }
}

/// Looks up one interface's index again and again: `if_nametoindex` opens and closes a socket
/// per call, which was a sixth of an idle worker's time; this keeps the socket and the request.
struct IfProbe {
    name: String,
    /// A datagram socket for `SIOCGIFINDEX`; `None` if it could not be made (then
    /// `if_nametoindex`).
    sock: Option<std::os::fd::OwnedFd>,
}

impl IfProbe {
    fn new(name: &str) -> IfProbe {
        // SAFETY: plain socket(2) call; a non-negative result is a fresh descriptor that
        // nothing else owns, so wrapping it in an OwnedFd is sound.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        let sock = (fd >= 0).then(|| {
            // SAFETY: see above: `fd` is open and owned by no one else.
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
        });
        IfProbe {
            name: name.to_string(),
            sock,
        }
    }

    /// The interface's index now, if it exists.
    fn index(&self) -> Option<u32> {
        let Some(sock) = &self.sock else {
            return ifindex(&self.name);
        };
        let bytes = self.name.as_bytes();
        if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return None;
        }
        // SAFETY: ifreq is plain old data; all zeroes is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, &b) in req.ifr_name.iter_mut().zip(bytes) {
            *d = b as libc::c_char;
        }
        // SAFETY: `req` is a live, NUL-terminated ifreq the kernel fills for SIOCGIFINDEX;
        // the socket is open for the call.
        let r = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(sock),
                libc::SIOCGIFINDEX,
                &mut req,
            )
        };
        if r != 0 {
            return None;
        }
        // SAFETY: on success the kernel wrote `ifru_ifindex`, the union member SIOCGIFINDEX
        // fills.
        Some(unsafe { req.ifr_ifru.ifru_ifindex } as u32)
    }
}

/// One AF_XDP socket: an interface's RX queue (and a TX ring on it).
pub struct XskPort {
    pub iface: String,
    pub ifindex: u32,
    /// The RX queue this socket reads.
    pub queue: u32,
    /// Bound with `XDP_ZEROCOPY`.
    pub zerocopy: bool,
    tx: TxQueue,
    rx: RxQueue,
    fq: FillQueue,
    cq: CompQueue,
    umem: Umem,
    descs: Arc<Vec<FrameDesc>>,
    buf: Vec<FrameDesc>,
    /// Frames given to the kernel for RX not yet received back.
    pub in_fill: usize,
    /// Frames given to the kernel for TX not yet completed.
    pub in_tx: usize,
    pub mode: XdpMode,
    /// Shared by the sockets of one interface; the program detaches with the last.
    _xdp: Arc<XdpAttachment>,
    last_check: Instant,
    probe: IfProbe,
    alive: bool,
    /// The tag the XDP program writes after each stamp, when it stamps.
    stamp_tag: Option<u64>,
    /// Arrival times (CLOCK_MONOTONIC ns, 0 = unstamped) of the last `rx_burst`'s frames.
    stamps: Vec<u64>,
}

// SAFETY: the rings are used only by the thread that owns this port; the UMEM handle is shared
// under the frame-ownership protocol described on `UmemMem`.
unsafe impl Send for XskPort {}

/// A bound socket's TX and RX rings, and its fill/completion rings for a new interface.
type Bound = (TxQueue, RxQueue, Option<(FillQueue, CompQueue)>);

fn bind_retry(cfg: SocketConfig, umem: &Umem, iface: &str, queue: u32) -> Result<Bound, XskError> {
    let name: Interface = iface
        .parse()
        .map_err(|_| XskError::NoInterface(iface.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        // SAFETY: libxdp program loading is inhibited (our own program is attached instead),
        // which is what xsk-rs requires for sockets on a shared UMEM; each (iface, queue) pair
        // is bound once.
        match unsafe { Socket::new(cfg, umem, &name, queue) } {
            Ok(s) => return Ok(s),
            Err(e) => {
                let busy = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<io::Error>())
                    .is_some_and(|io| io.raw_os_error() == Some(libc::EBUSY));
                // A socket closed on this interface moments ago holds it for ~30 ms.
                if busy && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                return Err(XskError::Bind {
                    iface: iface.to_string(),
                    msg: match std::error::Error::source(&e) {
                        Some(why) => format!("queue {queue}: {e}: {why}"),
                        None => format!("queue {queue}: {e}"),
                    },
                });
            }
        }
    }
}

/// A UMEM of `frames` chunks and a memory handle holding all of them; huge pages if `huge`.
fn new_umem(frames: u32, huge: bool) -> Result<(Umem, Arc<Vec<FrameDesc>>, UmemMem), XskError> {
    let umem_err = |msg: String| XskError::Umem { frames, msg };
    let ucfg = UmemConfig::builder()
        .frame_size(FrameSize::new(CHUNK).map_err(|e| umem_err(e.to_string()))?)
        .fill_queue_size(QueueSize::new(RING).map_err(|e| umem_err(e.to_string()))?)
        .comp_queue_size(QueueSize::new(RING).map_err(|e| umem_err(e.to_string()))?)
        .build()
        .map_err(|e| umem_err(e.to_string()))?;
    let count = NonZeroU32::new(frames).ok_or_else(|| umem_err("zero frames".into()))?;
    let (umem, descs) = Umem::new(ucfg, count, huge).map_err(|e| {
        let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
        umem_err(format!("{e}{why}"))
    })?;
    let room = (CHUNK - 256) as usize;
    let descs = Arc::new(descs);
    let mem = UmemMem {
        umem: umem.clone(),
        descs: descs.clone(),
        free: (0..frames).rev().map(FrameId).collect(),
        room,
    };
    Ok((umem, descs, mem))
}

impl UmemMem {
    /// A UMEM of `frames` chunks bound to no port: the production frame memory for pipes run
    /// without sockets (the multi-worker hand-off tests). Needs the rights AF_XDP needs.
    pub fn anonymous(frames: u32) -> Result<UmemMem, XskError> {
        new_umem(frames, false).map(|(_, _, mem)| mem)
    }
}

/// Opens one AF_XDP port per interface on a shared UMEM of `frames` chunks (RX queue 0, copy
/// mode). Returns the ports and the memory handle holding every chunk not already in a fill
/// ring.
pub fn open_ports(
    ifaces: &[String],
    frames: u32,
    mode: Option<XdpMode>,
) -> Result<(Vec<XskPort>, UmemMem), XskError> {
    let want: Vec<PortOpen> = ifaces
        .iter()
        .map(|i| PortOpen {
            iface: i.clone(),
            queues: 1,
            bind: XdpBind::Copy,
            stamp: false,
        })
        .collect();
    let (ports, mem, _) = open_queues(&want, frames, mode, false)?;
    Ok((ports.into_iter().flatten().collect(), mem))
}

/// What to open on one interface (issue 23 item 4).
#[derive(Debug, Clone)]
pub struct PortOpen {
    pub iface: String,
    /// RX queues 0..queues, one socket each.
    pub queues: u32,
    pub bind: XdpBind,
    /// Stamp every frame's arrival in the kernel (`bpf::redirect_program`), for the
    /// reaction-time histogram.
    pub stamp: bool,
}

/// How the shared UMEM and its sockets came up, and why not as asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Chunks in the UMEM.
    pub frames: u32,
    /// Every socket is bound zero-copy (one UMEM: all are, or none).
    pub zerocopy: bool,
    /// Why zero-copy was asked (`auto`) but not used.
    pub zerocopy_fallback: Option<String>,
    /// The UMEM lives in huge pages.
    pub hugepages: bool,
    /// Why huge pages were asked but not used.
    pub hugepage_fallback: Option<String>,
}

/// RX queues `iface` has (sysfs `queues/rx-*`), if readable.
pub fn rx_queue_count(iface: &str) -> Option<u32> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{iface}/queues")).ok()?;
    let n = dir
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    u32::try_from(n).ok()
}

/// Opens `ports[i].queues` AF_XDP sockets on each interface, all on one UMEM of `frames`
/// chunks (huge pages if `hugepages` and some are reserved, else normal pages). Returns per
/// port its sockets in queue order, the memory handle holding every chunk not in a fill ring,
/// and how it came up.
///
/// Sockets sharing a UMEM inherit its first socket's zero-copy mode (the kernel binds the
/// others with the UMEM's flags, `xp_assign_dev_shared`), so zero-copy is all or nothing: it
/// is tried only if no port asks for copy, and when a bind fails, every socket is reopened in
/// copy mode on a fresh UMEM (unless a port insists on `zerocopy`).
pub fn open_queues(
    ports: &[PortOpen],
    frames: u32,
    mode: Option<XdpMode>,
    hugepages: bool,
) -> Result<(Vec<Vec<XskPort>>, UmemMem, OpenReport), XskError> {
    for p in ports {
        ifindex(&p.iface).ok_or_else(|| XskError::NoInterface(p.iface.clone()))?;
        if let Some(have) = rx_queue_count(&p.iface) {
            if p.queues > have {
                return Err(XskError::Bind {
                    iface: p.iface.clone(),
                    msg: format!(
                        "queues_rx = {} but the device has {have} RX queues (ethtool -L, or \
                         numrxqueues for veth)",
                        p.queues
                    ),
                });
            }
        }
    }
    let copy = ports.iter().find(|p| p.bind == XdpBind::Copy);
    let forced = ports.iter().find(|p| p.bind == XdpBind::Zerocopy);
    if let (Some(c), Some(z)) = (copy, forced) {
        return Err(XskError::Bind {
            iface: z.iface.clone(),
            msg: format!(
                "xdp_bind = \"zerocopy\", but port `{}` binds in copy mode, and one UMEM \
                 shared by every port cannot be both",
                c.iface
            ),
        });
    }
    let mut report = OpenReport::default();
    // A 2 MiB huge page holds 1024 chunks: round up, so the mapping ends on a page boundary
    // (munmap of a hugetlb mapping needs that).
    let frames = if hugepages {
        frames.div_ceil(1024).saturating_mul(1024)
    } else {
        frames
    };
    report.frames = frames;
    let mut huge = hugepages;
    // Huge pages of a UMEM dropped after a failed zero-copy attempt come back only when the
    // kernel's deferred release of its sockets has run (`xdp_umem_release_deferred`): the
    // second mapping waits for them instead of falling back at once (seen here: 60 pages
    // reserved, 53 needed, ENOMEM on the immediate retry).
    let mut had_huge = false;
    let mut umem = || -> Result<(Umem, Arc<Vec<FrameDesc>>, UmemMem), XskError> {
        let deadline = Instant::now() + Duration::from_secs(2);
        while huge {
            match new_umem(frames, true) {
                Ok(u) => {
                    had_huge = true;
                    return Ok(u);
                }
                Err(_) if had_huge && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    report.hugepage_fallback = Some(format!(
                        "{e} (reserve huge pages: sysctl vm.nr_hugepages=N, N ≥ {})",
                        frames.div_ceil(1024)
                    ));
                    huge = false;
                }
            }
        }
        new_umem(frames, false)
    };
    if copy.is_none() && !ports.is_empty() {
        let u = umem()?;
        match open_on(ports, u, mode, true) {
            Ok((socks, mem)) => {
                report.zerocopy = true;
                report.hugepages = huge;
                return Ok((socks, mem, report));
            }
            Err(e) if forced.is_some() => return Err(e),
            Err(e) => report.zerocopy_fallback = Some(e.to_string()),
        }
    }
    let u = umem()?;
    let (socks, mem) = open_on(ports, u, mode, false)?;
    report.hugepages = huge;
    Ok((socks, mem, report))
}

/// Binds every port's sockets on the UMEM `u`, zero-copy or copy.
fn open_on(
    ports: &[PortOpen],
    (umem, descs, mut mem): (Umem, Arc<Vec<FrameDesc>>, UmemMem),
    mode: Option<XdpMode>,
    zerocopy: bool,
) -> Result<(Vec<Vec<XskPort>>, UmemMem), XskError> {
    let mut all = Vec::new();
    for want in ports {
        let iface = &want.iface;
        let idx = ifindex(iface).ok_or_else(|| XskError::NoInterface(iface.clone()))?;
        let bind_err = |msg: String| XskError::Bind {
            iface: iface.clone(),
            msg,
        };
        let flags = if zerocopy {
            BindFlags::XDP_ZEROCOPY
        } else {
            BindFlags::XDP_COPY
        };
        let scfg = SocketConfig::builder()
            .rx_queue_size(QueueSize::new(RING).map_err(|e| bind_err(e.to_string()))?)
            .tx_queue_size(QueueSize::new(RING).map_err(|e| bind_err(e.to_string()))?)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .xdp_flags(XdpFlags::empty())
            .bind_flags(flags | BindFlags::XDP_USE_NEED_WAKEUP)
            .build();
        // One program and XSKMAP per interface: it redirects each frame to the socket of the
        // RX queue it arrived on (`bpf::redirect_program`).
        // A random tag per attachment (std's per-process hash keys are random).
        let stamp_tag = want.stamp.then(|| {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(idx);
            h.finish() | 1
        });
        let xdp = Arc::new(
            XdpAttachment::attach(idx, super::bpf::MAX_RX_QUEUES, mode, stamp_tag).map_err(
                |err| XskError::Attach {
                    iface: iface.clone(),
                    err,
                },
            )?,
        );
        let mut socks = Vec::new();
        for queue in 0..want.queues.max(1) {
            let (tx, rx, rings) = bind_retry(scfg, &umem, iface, queue)?;
            let (fq, cq) = rings.ok_or_else(|| {
                bind_err(format!(
                    "no fill/completion ring for new queue {queue} (bound twice?)"
                ))
            })?;
            let fd = rx.fd().as_raw_fd();
            let budget: u32 = RING;
            // SAFETY: setsockopt reads `budget` (a live u32 of the given size) and nothing
            // else. Older kernels reject the option; the 32-frame default then applies.
            unsafe {
                libc::setsockopt(
                    fd,
                    SOL_XDP,
                    XDP_MAX_TX_SKB_BUDGET,
                    &budget as *const u32 as *const libc::c_void,
                    4,
                );
            }
            xdp.register(queue, fd).map_err(|err| XskError::Attach {
                iface: iface.clone(),
                err,
            })?;
            let mut p = XskPort {
                iface: iface.clone(),
                ifindex: idx,
                queue,
                zerocopy,
                tx,
                rx,
                fq,
                cq,
                umem: umem.clone(),
                descs: descs.clone(),
                buf: vec![FrameDesc::default(); RING as usize],
                in_fill: 0,
                in_tx: 0,
                mode: xdp.mode,
                _xdp: xdp.clone(),
                last_check: Instant::now(),
                probe: IfProbe::new(iface),
                alive: true,
                stamp_tag,
                stamps: Vec::new(),
            };
            let mut free = std::mem::take(&mut mem.free);
            p.refill(&mut free);
            mem.free = free;
            socks.push(p);
        }
        all.push(socks);
    }
    Ok((all, mem))
}

impl XskPort {
    /// Chunks the kernel holds for this socket: in the fill ring (or its RX ring, not yet
    /// read) and in the TX ring not yet completed. With the switch's free chunks this adds
    /// up to a constant at idle: the UMEM leak check.
    pub fn in_rings(&self) -> usize {
        self.in_fill + self.in_tx
    }
}

impl PortIo for XskPort {
    fn rx_burst(&mut self, out: &mut Vec<(FrameId, u32)>, max: usize) -> usize {
        let n = max.min(self.buf.len());
        // SAFETY: descriptors come from this port's RX ring on the shared UMEM; the frames
        // they name are handed to the caller, who now owns them.
        let got = unsafe { self.rx.consume(&mut self.buf[..n]) };
        let Some(tag) = self.stamp_tag else {
            for d in &self.buf[..got] {
                out.push((UmemMem::id_of(d.addr()), d.lengths().data() as u32));
            }
            self.in_fill -= got;
            return got;
        };
        self.stamps.clear();
        const T: usize = super::bpf::STAMP_TRAILER;
        for d in &self.buf[..got] {
            let len = d.lengths().data();
            // SAFETY: `d` came from this port's RX ring, so the kernel has finished writing
            // its `len` bytes and the chunk is ours now.
            let data = unsafe { self.umem.data(d) };
            let b = data.contents();
            let trailer = (len >= T).then(|| &b[len - T..len]);
            let stamp = match trailer {
                Some(t) if t[8..] == tag.to_ne_bytes() => {
                    u64::from_ne_bytes(t[..8].try_into().expect("8 bytes"))
                }
                _ => 0,
            };
            let len = if stamp != 0 { len - T } else { len };
            self.stamps.push(stamp);
            out.push((UmemMem::id_of(d.addr()), len as u32));
        }
        self.in_fill -= got;
        got
    }

    fn rx_stamps(&self) -> &[u64] {
        &self.stamps
    }

    fn tx_burst(&mut self, frames: &[(FrameId, u32)]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let n = frames
            .len()
            .min(self.tx.nb_free(frames.len() as u32) as usize);
        for (slot, &(f, len)) in self.buf.iter_mut().zip(&frames[..n]) {
            let mut d = self.descs[f.0 as usize];
            // SAFETY: the caller owns chunk `f`; setting the cursor only records the length
            // in our copy of its descriptor.
            unsafe { self.umem.data_mut(&mut d).cursor().set_pos(len as usize) };
            *slot = d;
        }
        // SAFETY: every descriptor names a chunk of this UMEM owned by the caller, which gives
        // it to the kernel until it comes back on the completion ring.
        let sent = unsafe { self.tx.produce(&self.buf[..n]) };
        self.in_tx += sent;
        if sent > 0 && self.tx.needs_wakeup() {
            if let Err(e) = self.tx.wakeup() {
                if matches!(e.raw_os_error(), Some(libc::ENETDOWN) | Some(libc::ENXIO)) {
                    self.alive = false;
                }
            }
        }
        sent
    }

    fn completions(&mut self, out: &mut Vec<FrameId>) {
        if self.in_tx == 0 {
            return;
        }
        // SAFETY: completed descriptors name chunks the kernel has finished with.
        let n = unsafe { self.cq.consume(&mut self.buf) };
        out.extend(self.buf[..n].iter().map(|d| UmemMem::id_of(d.addr())));
        self.in_tx -= n;
    }

    fn refill(&mut self, free: &mut Vec<FrameId>) {
        let want = (RING as usize).saturating_sub(self.in_fill).min(free.len());
        if want < 16 && self.in_fill > 0 {
            return;
        }
        let k = free.len() - want;
        for (slot, f) in self.buf.iter_mut().zip(&free[k..]) {
            *slot = self.descs[f.0 as usize];
        }
        // SAFETY: the chunks are free (owned by the caller) and are handed to the kernel,
        // which returns them on the RX ring.
        let n = unsafe { self.fq.produce(&self.buf[..want]) };
        free.truncate(free.len() - n);
        self.in_fill += n;
        if self.fq.needs_wakeup() {
            let _ = self.fq.wakeup(self.rx.fd_mut(), 0);
        }
    }

    fn ring_stats(&mut self) -> Option<XdpSnapshot> {
        let s = self.rx.fd().xdp_statistics().ok()?;
        Some(XdpSnapshot {
            rx_dropped: s.rx_dropped(),
            rx_invalid_descs: s.rx_invalid_descs(),
            rx_ring_full: s.rx_ring_full(),
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs(),
            tx_invalid_descs: s.tx_invalid_descs(),
            tx_ring_empty_descs: s.tx_ring_empty_descs(),
        })
    }

    fn poll_fd(&self) -> Option<i32> {
        Some(self.rx.fd().as_raw_fd())
    }

    fn alive(&mut self) -> bool {
        if self.alive && self.last_check.elapsed() > Duration::from_millis(100) {
            self.last_check = Instant::now();
            self.alive = self.probe.index() == Some(self.ifindex);
        }
        self.alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept-socket lookup agrees with `if_nametoindex`, and a missing or invalid name
    /// has no index.
    #[test]
    fn if_probe_finds_what_if_nametoindex_finds() {
        let lo = IfProbe::new("lo");
        assert!(lo.sock.is_some());
        assert_eq!(lo.index(), ifindex("lo"));
        assert!(lo.index().is_some());
        assert_eq!(lo.index(), lo.index(), "the socket is reused");
        assert_eq!(IfProbe::new("xoff-no-such0").index(), None);
        assert_eq!(IfProbe::new("a-name-longer-than-ifnamsiz").index(), None);
    }
}
