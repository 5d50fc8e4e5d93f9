//! A minimal XDP loader with raw `bpf()` system calls: an XSKMAP and a 6-instruction program
//! that redirects every frame to the AF_XDP socket of its RX queue (falling back to the kernel
//! stack when there is none), attached with `BPF_LINK_CREATE` so the kernel detaches it when
//! the last file descriptor of the link closes, including when the process is killed.
//!
//! No clang, no libbpf: the program is assembled here, and no object file is shipped.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

/// Entries of the XSKMAP: the most RX queues one port reads (`queues_rx`).
pub const MAX_RX_QUEUES: u32 = 64;

/// XDP attach mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// Driver (native) mode.
    Native,
    /// Generic (skb) mode.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => 4,  // XDP_FLAGS_DRV_MODE
            XdpMode::Generic => 2, // XDP_FLAGS_SKB_MODE
        }
    }
}

/// `union bpf_attr` is at most a few hundred bytes; 128 covers every command used here.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Self {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<RawFd> {
    // SAFETY: `attr` is a live, zero-initialised, 8-aligned buffer larger than every
    // `bpf_attr` variant used here, and its size is passed, so the kernel reads and writes
    // only within it. Pointers stored inside it (keys, instructions, log) are kept alive by
    // the callers for the duration of the call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as u32) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as RawFd)
    }
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf() call and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// One 8-byte eBPF instruction.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0x0f);
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_XDP_ADJUST_TAIL: i32 = 65;
const BPF_FUNC_XDP_GET_BUFF_LEN: i32 = 188;

/// Bytes the stamping program appends to a frame: the arrival time (CLOCK_MONOTONIC ns,
/// `bpf_ktime_get_ns`) and the attachment's 64-bit tag, both in native byte order.
pub const STAMP_TRAILER: usize = 16;

/// The redirect program, as bytes, for an XSKMAP with file descriptor `map_fd`. With `stamp`
/// = `Some(tag)` it first appends [`STAMP_TRAILER`] bytes to the frame, its arrival time and
/// `tag` (`bpf_xdp_adjust_tail`, so the frame stays where copy mode puts it, 256 B into its
/// chunk; metadata in front would move it): the RX-ring wait is part of a switch's reaction
/// time, and only the kernel sees a frame arrive. A frame without tailroom goes unstamped,
/// which the missing tag tells; a random tag per attachment keeps a frame that happens to end
/// in it from being mistaken for a stamped one.
pub fn redirect_program(map_fd: RawFd, stamp: Option<u64>) -> Vec<u8> {
    let mut p = Vec::new();
    if let Some(tag) = stamp {
        let t = tag.to_ne_bytes();
        let (lo, hi) = (
            i32::from_ne_bytes([t[0], t[1], t[2], t[3]]),
            i32::from_ne_bytes([t[4], t[5], t[6], t[7]]),
        );
        p.extend([
            insn(0xbf, 6, 1, 0, 0),                         // r6 = ctx
            insn(0xb7, 2, 0, 0, STAMP_TRAILER as i32),      // r2 = 16
            insn(0x85, 0, 0, 0, BPF_FUNC_XDP_ADJUST_TAIL),  // r0 = bpf_xdp_adjust_tail(r1, r2)
            insn(0x55, 0, 0, 17, 0),                        // if r0 != 0 goto redirect
            insn(0xbf, 1, 6, 0, 0),                         // r1 = ctx
            insn(0x85, 0, 0, 0, BPF_FUNC_XDP_GET_BUFF_LEN), // r0 = frame length (scalar)
            insn(0xbf, 7, 0, 0, 0),                         // r7 = r0
            insn(0x85, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),     // r0 = now (ns)
            insn(0xbf, 8, 0, 0, 0),                         // r8 = r0
            insn(0x61, 2, 6, 0, 0),                         // r2 = ctx->data
            insn(0x61, 3, 6, 4, 0),                         // r3 = ctx->data_end
            insn(0x07, 7, 0, 0, -(STAMP_TRAILER as i32)),   // r7 -= 16
            insn(0x57, 7, 0, 0, 0x3fff),                    // r7 &= 0x3fff (bounded offset)
            insn(0x0f, 2, 7, 0, 0),                         // r2 += r7 (trailer)
            insn(0xbf, 4, 2, 0, 0),                         // r4 = r2
            insn(0x07, 4, 0, 0, STAMP_TRAILER as i32),      // r4 += 16
            insn(0x2d, 4, 3, 4, 0),                         // if r4 > r3 goto redirect
            insn(0x7b, 2, 8, 0, 0),                         // *(u64 *)(r2 + 0) = r8
            insn(0x18, 1, 0, 0, lo),                        // r1 = tag (ld_imm64, 1/2)
            insn(0, 0, 0, 0, hi),                           //          (ld_imm64, 2/2)
            insn(0x7b, 2, 1, 8, 0),                         // *(u64 *)(r2 + 8) = r1
            insn(0xbf, 1, 6, 0, 0),                         // redirect: r1 = ctx
        ]);
    }
    p.extend([
        insn(0x61, 2, 1, 16, 0),                     // r2 = ctx->rx_queue_index
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = &xskmap (ld_imm64, 1/2)
        insn(0, 0, 0, 0, 0),                         //               (ld_imm64, 2/2)
        insn(0xb7, 3, 0, 0, XDP_PASS),               // r3 = XDP_PASS (action if no socket)
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),  // r0 = bpf_redirect_map(r1, r2, r3)
        insn(0x95, 0, 0, 0, 0),                      // return r0
    ]);
    p.concat()
}

/// An XDP program attached to one interface, redirecting to the sockets in its XSKMAP.
/// Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpAttachment {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    pub mode: XdpMode,
}

impl XdpAttachment {
    /// Loads the program and attaches it to `ifindex`, natively if the driver allows, else
    /// in generic mode (or only in `force` mode if given).
    pub fn attach(
        ifindex: u32,
        queues: u32,
        force: Option<XdpMode>,
        stamp: Option<u64>,
    ) -> io::Result<Self> {
        let map = owned(bpf(
            BPF_MAP_CREATE,
            Attr::new()
                .u32(0, BPF_MAP_TYPE_XSKMAP)
                .u32(4, 4)
                .u32(8, 4)
                .u32(12, queues.max(1)),
        )?);
        let prog = load_xdp(&redirect_program(map.as_raw_fd(), stamp), b"xoff_rx\0")?;
        let modes: &[XdpMode] = match force {
            Some(m) => &[m][..],
            None => &[XdpMode::Native, XdpMode::Generic][..],
        };
        let mut last = None;
        for &mode in modes {
            match link_xdp(&prog, ifindex, mode) {
                Ok(link) => {
                    return Ok(XdpAttachment {
                        map,
                        _prog: prog,
                        _link: link,
                        mode,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no XDP mode to try")))
    }

    /// Points RX queue `queue`'s redirect at the AF_XDP socket `xsk_fd`.
    pub fn register(&self, queue: u32, xsk_fd: RawFd) -> io::Result<()> {
        let key = queue;
        let val = xsk_fd as u32;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &val as *const u32 as u64)
            .u64(24, 0);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }
}

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const XDP_DROP: i32 = 1;

/// The counting sink program: `counter[0] += 1; return XDP_DROP;`.
pub fn count_drop_program(map_fd: RawFd) -> Vec<u8> {
    [
        insn(0x62, 10, 0, -4, 0),                    // *(u32 *)(r10 - 4) = 0   (key)
        insn(0xbf, 2, 10, 0, 0),                     // r2 = r10
        insn(0x07, 2, 0, 0, -4),                     // r2 += -4
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = &counter (ld_imm64, 1/2)
        insn(0, 0, 0, 0, 0),                         //               (ld_imm64, 2/2)
        insn(0x85, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM), // r0 = bpf_map_lookup_elem(r1, r2)
        insn(0x15, 0, 0, 2, 0),                      // if r0 == 0 goto +2
        insn(0xb7, 1, 0, 0, 1),                      // r1 = 1
        insn(0xdb, 0, 1, 0, 0),                      // lock *(u64 *)(r0 + 0) += r1
        insn(0xb7, 0, 0, 0, XDP_DROP),               // r0 = XDP_DROP
        insn(0x95, 0, 0, 0, 0),                      // return r0
    ]
    .concat()
}

fn load_xdp(prog_bytes: &[u8], name: &[u8; 8]) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, (prog_bytes.len() / 8) as u32)
        .u64(8, prog_bytes.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .u32(68, BPF_XDP);
    a.0[48..56].copy_from_slice(name);
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(0);
            let msg = String::from_utf8_lossy(&log[..end]).to_string();
            Err(io::Error::new(
                e.kind(),
                format!("loading XDP program: {e}; verifier: {msg}"),
            ))
        }
    }
}

fn link_xdp(prog: &OwnedFd, ifindex: u32, mode: XdpMode) -> io::Result<OwnedFd> {
    let mut l = Attr::new();
    l.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, mode.flags());
    bpf(BPF_LINK_CREATE, &mut l).map(owned)
}

/// A sink that counts and drops every frame arriving on an interface, in the kernel: the
/// cheapest possible receiver, so a benchmark measures the device under test, not the sink.
#[derive(Debug)]
pub struct XdpCounter {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    pub mode: XdpMode,
}

impl XdpCounter {
    pub fn attach(ifindex: u32) -> io::Result<Self> {
        let map = owned(bpf(
            BPF_MAP_CREATE,
            Attr::new()
                .u32(0, BPF_MAP_TYPE_ARRAY)
                .u32(4, 4)
                .u32(8, 8)
                .u32(12, 1),
        )?);
        let prog = load_xdp(&count_drop_program(map.as_raw_fd()), b"xoff_cnt")?;
        let mut last = None;
        for mode in [XdpMode::Native, XdpMode::Generic] {
            match link_xdp(&prog, ifindex, mode) {
                Ok(link) => {
                    return Ok(XdpCounter {
                        map,
                        _prog: prog,
                        _link: link,
                        mode,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no XDP mode")))
    }

    /// Frames counted so far.
    pub fn count(&self) -> io::Result<u64> {
        let key: u32 = 0;
        let mut val: u64 = 0;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &mut val as *mut u64 as u64);
        bpf(BPF_MAP_LOOKUP_ELEM, &mut a)?;
        Ok(val)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_is_six_instructions_with_map_fd() {
        let p = redirect_program(7, None);
        assert_eq!(p.len(), 6 * 8);
        assert_eq!(p[8], 0x18);
        assert_eq!(p[9], 0x11); // src = pseudo map fd, dst = r1
        assert_eq!(i32::from_ne_bytes([p[12], p[13], p[14], p[15]]), 7);
        assert_eq!(p[40], 0x95);
    }

    /// The stamping program's two exits from the stamp path land on the redirect's first
    /// instruction (`r1 = ctx`), and it writes the tag it was given.
    #[test]
    fn stamping_program_jumps_to_the_redirect_and_carries_its_tag() {
        let p = redirect_program(7, Some(0x1122_3344_5566_7788));
        let insns: Vec<&[u8]> = p.chunks(8).collect();
        assert_eq!(insns.len(), 22 + 6);
        let redirect = 21;
        assert_eq!((insns[redirect][0], insns[redirect][1]), (0xbf, 0x61)); // r1 = r6
        for (i, ins) in insns.iter().enumerate() {
            if matches!(ins[0], 0x55 | 0x2d) {
                let off = i16::from_ne_bytes([ins[2], ins[3]]) as isize;
                assert_eq!(i as isize + 1 + off, redirect as isize, "jump at {i}");
            }
        }
        let lo = u32::from_ne_bytes(insns[18][4..8].try_into().unwrap());
        let hi = u32::from_ne_bytes(insns[19][4..8].try_into().unwrap());
        assert_eq!((u64::from(hi) << 32) | u64::from(lo), 0x1122_3344_5566_7788);
        assert_eq!(&p[redirect * 8 + 8..], &redirect_program(7, None)[..]);
    }
}
