//! Shared memory for the AFC command ring: the file a switch exposes so that a controller in
//! another process can pause and resume queues without the control socket.
//!
//! Only the mapping lives here (it is `unsafe`); the ring protocol and the byte layout are
//! [`flowctl::afc::ShmRing`]. The switch creates the file ([`AfcShm`]); a Rust controller
//! opens it with [`AfcProducer`], which claims a lane with an open-file-description lock so
//! that it can share the ring with Python or C writers and with its own other threads.
//!
//! Beside the ring file the switch keeps its doorbell, a FIFO `NAME.afc.bell` (see "Doorbell"
//! in `flowctl::afc`): an idle worker sleeps on it, and [`AfcProducer`] rings it when the
//! ring's header says the switch sleeps.
//!
//! The mapping is only ever read and written through atomics, so concurrent writes from other
//! processes are well-defined data races the protocol tolerates. A process that shrinks the
//! file under a mapping makes the next access fault (SIGBUS); the file is mode 0600 and owned by
//! the switch's user, so only that user can.

use flowctl::afc::{Afc, AfcCmd, AfcError, ShmLayout, ShmRing, SHM_HEADER_BYTES};
use nix::fcntl::{self, FcntlArg, OFlag};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::mman::{self, MapFlags, ProtFlags};
use nix::sys::stat::{self, Mode};
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Errors creating or opening a command ring file.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    #[error("{path}: {source}")]
    Sys { path: PathBuf, source: nix::Error },
    #[error("{path}: {source}")]
    Ring { path: PathBuf, source: AfcError },
    #[error("{0}: every lane is held by another writer")]
    NoLane(PathBuf),
}

/// A shared read-write mapping of a whole file, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<c_void>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory that is only accessed through atomics (see
// `header`/`lanes`), so handing it to or sharing it with other threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only gives out `&[Atomic*]`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared, read-write. `len` must be at least the ring header.
    fn new(fd: impl AsFd, len: usize) -> nix::Result<Mapping> {
        if len < SHM_HEADER_BYTES || !len.is_multiple_of(4) {
            return Err(nix::Error::EINVAL);
        }
        let n = NonZeroUsize::new(len).ok_or(nix::Error::EINVAL)?;
        // SAFETY: a fresh mapping chosen by the kernel (no address hint), so it aliases no Rust
        // object; the fd is a regular file at least `len` bytes long (checked by callers).
        let ptr = unsafe {
            mman::mmap(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )?
        };
        Ok(Mapping { ptr, len })
    }

    /// The header as `u64`s.
    fn header(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned and at least `SHM_HEADER_BYTES` long (checked in
        // `new`), lives as long as `&self`, and `AtomicU64` has the size and alignment of
        // `u64`; every access goes through the atomics.
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr() as *const AtomicU64, SHM_HEADER_BYTES / 8)
        }
    }

    /// Everything after the header as `u32`s.
    fn lanes(&self) -> &[AtomicU32] {
        // SAFETY: the bytes from `SHM_HEADER_BYTES` (a multiple of 4) to `len` (a multiple of 4,
        // checked in `new`) lie inside the live mapping; `AtomicU32` has the layout of `u32`.
        unsafe {
            std::slice::from_raw_parts(
                (self.ptr.as_ptr() as *const u8).add(SHM_HEADER_BYTES) as *const AtomicU32,
                (self.len - SHM_HEADER_BYTES) / 4,
            )
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no slice of the mapping
        // outlives `&self`.
        let _ = unsafe { mman::munmap(self.ptr, self.len) };
    }
}

/// The switch's end: a ring file it created and drains into its AFC unit.
#[derive(Debug)]
pub struct AfcShm {
    map: Mapping,
    layout: ShmLayout,
    path: PathBuf,
    /// Picoseconds one credit unit pauses, per port.
    credit_ps: Box<[u64]>,
    /// Lane the next drain starts at (only the draining worker touches it).
    cursor: AtomicU32,
    /// The doorbell FIFO, opened read-write so that it never reports a hang-up.
    bell: OwnedFd,
    /// Readable when anyone opens the ring file: a writer about to attach.
    opens: Inotify,
    /// Until when (`now` picoseconds) an idle worker keeps the `poll_us` wake-up after the
    /// file was last opened, though no lane is locked yet.
    opened_until: AtomicU64,
    fd: OwnedFd,
}

/// The doorbell FIFO of the ring at `ring`: `NAME.afc.bell`.
pub fn bell_path(ring: &Path) -> PathBuf {
    let mut p = ring.as_os_str().to_owned();
    p.push(".bell");
    PathBuf::from(p)
}

impl AfcShm {
    /// Longest an idle adaptive worker sleeps while a ring is attached: the bound on how long
    /// a command written to an idle switch waits when its producer does not ring the doorbell
    /// (a busy worker looks every loop round; a rung doorbell wakes a sleeping one at once).
    /// 10 ms, the worker's own idle wake-up: at 1 ms an idle switch took 4 % of a core.
    /// Only while a writer may be attached ([`idle_poll_at`](Self::idle_poll_at)).
    pub const IDLE_POLL_PS: u64 = 10_000_000_000;

    /// How long after the ring file was opened an idle worker polls it though no lane is
    /// locked: a writer opens the file, then locks its lane.
    pub const OPEN_GRACE_PS: u64 = 1_000_000_000_000;

    /// Words applied per worker loop round at most, so that a flood of commands cannot starve
    /// forwarding.
    pub const BURST: usize = 256;

    /// Creates the ring file at `path` (replacing any stale one), mode 0600, and maps it.
    /// `credit_ps[p]` is how long one credit unit pauses a queue of port `p`.
    pub fn create(path: &Path, layout: ShmLayout, credit_ps: Vec<u64>) -> Result<AfcShm, ShmError> {
        let sys = |source| ShmError::Sys {
            path: path.to_path_buf(),
            source,
        };
        // A producer still mapping the old file keeps its inode and never sees this one.
        match nix::unistd::unlink(path) {
            Ok(()) | Err(nix::Error::ENOENT) => {}
            Err(e) => return Err(sys(e)),
        }
        let fd = fcntl::open(
            path,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(sys)?;
        nix::unistd::ftruncate(&fd, layout.bytes() as i64).map_err(sys)?;
        let map = Mapping::new(&fd, layout.bytes()).map_err(sys)?;
        let poll_us = Self::IDLE_POLL_PS / 1_000_000;
        ShmRing::init(map.header(), map.lanes(), layout, poll_us).map_err(|source| {
            ShmError::Ring {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let bell_at = bell_path(path);
        match nix::unistd::unlink(&bell_at) {
            Ok(()) | Err(nix::Error::ENOENT) => {}
            Err(e) => return Err(sys(e)),
        }
        nix::unistd::mkfifo(&bell_at, Mode::from_bits_truncate(0o600)).map_err(sys)?;
        let bell = fcntl::open(
            &bell_at,
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(sys)?;
        // Watched after our own open, so only other openers wake the worker.
        let opens = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).map_err(sys)?;
        opens.add_watch(path, AddWatchFlags::IN_OPEN).map_err(sys)?;
        Ok(AfcShm {
            map,
            layout,
            path: path.to_path_buf(),
            credit_ps: credit_ps.into(),
            cursor: AtomicU32::new(0),
            bell,
            opens,
            opened_until: AtomicU64::new(0),
            fd,
        })
    }

    /// Readable once someone opened the ring file since the last
    /// [`idle_poll_at`](Self::idle_poll_at): an idle worker sleeps on it too.
    pub fn opens_fd(&self) -> RawFd {
        self.opens.as_fd().as_raw_fd()
    }

    /// When an idle worker sleeping at `now` must look at the ring even if nobody rings the
    /// doorbell: `now + poll_us` while a writer may be attached (a lane is locked, or the file
    /// was opened within [`OPEN_GRACE_PS`](Self::OPEN_GRACE_PS)); `None` when no writer is,
    /// so the ring costs an idle switch no wake-ups (an opener wakes it through
    /// [`opens_fd`](Self::opens_fd)). Each wake-up costs this VM's idle worker ~100 µs.
    pub fn idle_poll_at(&self, now: u64) -> Option<u64> {
        if matches!(self.opens.read_events(), Ok(ev) if !ev.is_empty()) {
            self.opened_until
                .store(now.saturating_add(Self::OPEN_GRACE_PS), Ordering::Relaxed);
        }
        let attached =
            now < self.opened_until.load(Ordering::Relaxed) || self.lane_locked().unwrap_or(true);
        attached.then(|| now.saturating_add(Self::IDLE_POLL_PS))
    }

    /// Whether another open file description (a writer, from any process) holds a lock on
    /// a lane's byte; the switch itself never locks the file.
    fn lane_locked(&self) -> nix::Result<bool> {
        let mut probe = libc::flock {
            l_type: libc::F_WRLCK as i16,
            l_whence: libc::SEEK_SET as i16,
            l_start: 0,
            l_len: i64::from(self.layout.lanes()),
            l_pid: 0,
        };
        fcntl::fcntl(&self.fd, FcntlArg::F_OFD_GETLK(&mut probe))?;
        Ok(probe.l_type != libc::F_UNLCK as i16)
    }

    /// The doorbell's descriptor, readable once a producer rang it.
    pub fn bell_fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }

    /// Before an idle worker sleeps: asks producers to ring; false if words already wait
    /// (do not sleep).
    pub fn arm(&self) -> bool {
        self.ring().arm_doorbell()
    }

    /// After the worker woke: producers need not ring, and the rings so far are consumed.
    pub fn disarm(&self) {
        self.ring().disarm_doorbell();
        let mut buf = [0u8; 64];
        while matches!(nix::unistd::read(&self.bell, &mut buf), Ok(n) if n > 0) {}
    }

    /// The ring.
    pub fn ring(&self) -> ShmRing<'_> {
        ShmRing::new(self.map.header(), self.map.lanes(), self.layout)
            .expect("mapping sized for its own layout")
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Applies up to [`BURST`](Self::BURST) waiting words to `afc` at time `now`; returns how
    /// many were taken. Words for unknown ports or queues are refused and counted by `afc`.
    pub fn poll(&self, afc: &Afc, now: u64) -> usize {
        let mut cur = self.cursor.load(Ordering::Relaxed);
        let n = self.ring().drain(&mut cur, Self::BURST, |w| {
            let Ok(cmd) = AfcCmd::decode(w) else {
                afc.count_refused();
                return false;
            };
            let unit = self
                .credit_ps
                .get(usize::from(cmd.port()))
                .copied()
                .unwrap_or(0);
            afc.apply(cmd, now, unit).is_ok()
        });
        self.cursor.store(cur, Ordering::Relaxed);
        n
    }
}

/// A controller's end: one lane of a switch's ring, held until dropped.
#[derive(Debug)]
pub struct AfcProducer {
    map: Mapping,
    layout: ShmLayout,
    lane: u32,
    /// The switch's doorbell, if it has one (write end, non-blocking).
    bell: Option<OwnedFd>,
    /// Holds the lane's lock: an open-file-description lock belongs to this descriptor, so
    /// two producers in one process still get different lanes.
    _fd: OwnedFd,
}

impl AfcProducer {
    /// Opens the ring at `path` and claims the first free lane.
    pub fn open(path: &Path) -> Result<AfcProducer, ShmError> {
        let sys = |source| ShmError::Sys {
            path: path.to_path_buf(),
            source,
        };
        let fd = fcntl::open(path, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty()).map_err(sys)?;
        let len = usize::try_from(stat::fstat(&fd).map_err(sys)?.st_size)
            .map_err(|_| sys(nix::Error::EINVAL))?;
        let map = Mapping::new(&fd, len).map_err(sys)?;
        let layout = ShmRing::attach(map.header(), map.lanes())
            .map_err(|source| ShmError::Ring {
                path: path.to_path_buf(),
                source,
            })?
            .layout();
        for lane in 0..layout.lanes() {
            let lock = libc::flock {
                l_type: libc::F_WRLCK as i16,
                l_whence: libc::SEEK_SET as i16,
                l_start: i64::from(lane),
                l_len: 1,
                l_pid: 0,
            };
            match fcntl::fcntl(&fd, FcntlArg::F_OFD_SETLK(&lock)) {
                Ok(_) => {
                    let bell = fcntl::open(
                        &bell_path(path),
                        OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                    .ok();
                    return Ok(AfcProducer {
                        map,
                        layout,
                        lane,
                        bell,
                        _fd: fd,
                    });
                }
                Err(nix::Error::EAGAIN | nix::Error::EACCES) => continue,
                Err(e) => return Err(sys(e)),
            }
        }
        Err(ShmError::NoLane(path.to_path_buf()))
    }

    /// The ring.
    pub fn ring(&self) -> ShmRing<'_> {
        ShmRing::new(self.map.header(), self.map.lanes(), self.layout)
            .expect("mapping checked against its layout at open")
    }

    /// The lane this producer holds.
    pub fn lane(&self) -> u32 {
        self.lane
    }

    /// Writes one command; a full lane refuses it at once (counted in the ring's header).
    /// Rings the doorbell if the switch sleeps.
    pub fn push(&self, cmd: AfcCmd) -> Result<(), AfcError> {
        self.push_word(cmd.encode())
    }

    /// Writes one raw word; a full lane refuses it at once.
    pub fn push_word(&self, word: u32) -> Result<(), AfcError> {
        let ring = self.ring();
        ring.producer(self.lane).push_word(word)?;
        if ring.wants_doorbell() {
            self.ring_bell();
        }
        Ok(())
    }

    /// Wakes a sleeping switch (a full FIFO already holds a wake-up: ignored).
    pub fn ring_bell(&self) {
        if let Some(b) = &self.bell {
            let _ = nix::unistd::write(b, &[1u8]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("xoff-shm-{tag}-{}.afc", std::process::id()))
    }

    #[test]
    fn file_ring_between_producers_and_switch() {
        let path = tmp("ring");
        let layout = ShmLayout::new(2, 4).unwrap();
        let sw = AfcShm::create(&path, layout, vec![1_000, 2_000]).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), layout.bytes() as u64);
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        // Two producers in one process get the two lanes; a third finds none.
        let a = AfcProducer::open(&path).unwrap();
        let b = AfcProducer::open(&path).unwrap();
        assert_ne!(a.lane(), b.lane());
        assert!(matches!(AfcProducer::open(&path), Err(ShmError::NoLane(_))));
        let afc = Afc::new([8, 8]);
        a.push(AfcCmd::pause(1, 3, 10).unwrap()).unwrap();
        b.push(AfcCmd::pause(0, 2, 0).unwrap()).unwrap();
        b.push(AfcCmd::pause(5, 0, 0).unwrap()).unwrap(); // no port 5
        assert_eq!(sw.poll(&afc, 100), 3);
        // Credit 10 on port 1 at 2 000 ps per unit.
        assert!(afc.port(1).is_paused(3, 100 + 19_999));
        assert!(!afc.port(1).is_paused(3, 100 + 20_000));
        assert!(afc.port(0).is_paused(2, u64::MAX - 1));
        assert_eq!((afc.applied(), afc.refused()), (2, 1));
        assert_eq!((sw.ring().applied(), sw.ring().refused()), (2, 1));
        // A full lane refuses without waiting; the switch sees the count.
        for _ in 0..4 {
            a.push(AfcCmd::resume(0, 2).unwrap()).unwrap();
        }
        assert_eq!(
            a.push(AfcCmd::resume(0, 2).unwrap()),
            Err(AfcError::RingFull)
        );
        assert_eq!(sw.ring().full(), 1);
        assert_eq!(sw.poll(&afc, 200), 4);
        assert!(!afc.port(0).is_paused(2, 201));
        // Dropping a producer frees its lane.
        drop(a);
        let c = AfcProducer::open(&path).unwrap();
        c.push(AfcCmd::pause(0, 1, 0).unwrap()).unwrap();
        assert_eq!(sw.poll(&afc, 300), 1);
        assert!(afc.port(0).is_paused(1, 301));
        // A new switch replaces the file; old producers keep writing into the old one.
        drop(sw);
        let sw2 = AfcShm::create(&path, layout, vec![1; 2]).unwrap();
        c.push(AfcCmd::pause(0, 0, 0).unwrap()).unwrap();
        assert_eq!(sw2.poll(&afc, 400), 0);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(bell_path(&path)).unwrap();
    }

    /// Whether `fd` is readable right now.
    fn readable(fd: RawFd) -> bool {
        let mut p = [libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: `p` is live for the call and its length is passed.
        unsafe { libc::poll(p.as_mut_ptr(), 1, 0) == 1 }
    }

    #[test]
    fn a_sleeping_switch_is_woken_by_the_doorbell_and_an_awake_one_is_not_rung() {
        let path = tmp("bell");
        let layout = ShmLayout::new(1, 4).unwrap();
        let sw = AfcShm::create(&path, layout, vec![1_000]).unwrap();
        let meta = std::fs::metadata(bell_path(&path)).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        let p = AfcProducer::open(&path).unwrap();
        let afc = Afc::new([8]);
        // Awake: a push does not ring.
        p.push(AfcCmd::pause(0, 1, 0).unwrap()).unwrap();
        assert!(!readable(sw.bell_fd()));
        // A word waits: the worker must not sleep.
        assert!(!sw.arm());
        assert_eq!(sw.poll(&afc, 10), 1);
        // Armed on idle lanes: the next push rings, and waking clears it.
        assert!(sw.arm());
        assert!(!readable(sw.bell_fd()));
        p.push(AfcCmd::resume(0, 1).unwrap()).unwrap();
        assert!(readable(sw.bell_fd()));
        sw.disarm();
        assert!(!readable(sw.bell_fd()));
        assert_eq!(sw.poll(&afc, 20), 1);
        assert!(!afc.port(0).is_paused(1, 21));
        drop(sw);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(bell_path(&path)).unwrap();
    }

    /// The `poll_us` wake-up is kept only while a writer may be attached: none after
    /// creation; an opener wakes the sleeper and starts the grace; a locked lane keeps it
    /// after the grace; the last writer gone, none again.
    #[test]
    fn an_idle_switch_polls_the_ring_only_while_a_writer_may_be_attached() {
        let path = tmp("idle");
        let sw = AfcShm::create(&path, ShmLayout::new(2, 4).unwrap(), vec![1_000; 2]).unwrap();
        let (poll, grace) = (AfcShm::IDLE_POLL_PS, AfcShm::OPEN_GRACE_PS);
        assert!(!readable(sw.opens_fd()));
        assert_eq!(sw.idle_poll_at(0), None);
        let p = AfcProducer::open(&path).unwrap();
        assert!(readable(sw.opens_fd()));
        assert_eq!(sw.idle_poll_at(5), Some(5 + poll));
        assert!(!readable(sw.opens_fd()), "the open is consumed");
        // Past the grace, the producer's lane lock keeps the wake-up.
        assert_eq!(sw.idle_poll_at(5 + grace), Some(5 + grace + poll));
        drop(p);
        assert_eq!(sw.idle_poll_at(5 + grace), None);
        // A writer holding its lane with a POSIX lock (Python's `lockf`) counts too.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        assert_eq!(sw.idle_poll_at(10 * grace), Some(10 * grace + poll));
        assert_eq!(sw.idle_poll_at(12 * grace), None, "opened, never locked");
        let lock = libc::flock {
            l_type: libc::F_WRLCK as i16,
            l_whence: libc::SEEK_SET as i16,
            l_start: 1,
            l_len: 1,
            l_pid: 0,
        };
        // SAFETY: `lock` is live for the call; F_SETLK only reads it.
        assert_eq!(
            unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &lock) },
            0
        );
        assert_eq!(sw.idle_poll_at(12 * grace), Some(12 * grace + poll));
        drop(f);
        assert_eq!(sw.idle_poll_at(12 * grace), None);
        drop(sw);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(bell_path(&path)).unwrap();
    }

    #[test]
    fn open_rejects_a_file_that_is_not_a_ring() {
        let path = tmp("junk");
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        assert!(matches!(
            AfcProducer::open(&path),
            Err(ShmError::Ring { .. })
        ));
        std::fs::write(&path, b"XAFC").unwrap();
        assert!(matches!(
            AfcProducer::open(&path),
            Err(ShmError::Sys { .. })
        ));
        std::fs::remove_file(&path).unwrap();
    }
}
