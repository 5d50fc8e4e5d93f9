//! Safe wrappers for the few system calls the runtime needs besides the AF_XDP rings, kept
//! here so that all of Xoff's `unsafe` lives in the port module.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking eventfd used to wake a sleeping worker.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no pointer arguments; a non-negative result is a new descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the descriptor readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Resets the counter.
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe {
            libc::read(
                self.0.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout_ps` picoseconds pass; false when the
/// time ran out with nothing readable (an error or a signal counts as a wake-up).
pub fn wait_readable(fds: &[RawFd], timeout_ps: u64) -> bool {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: (timeout_ps / 1_000_000_000_000) as libc::time_t,
        tv_nsec: ((timeout_ps % 1_000_000_000_000) / 1000) as libc::c_long,
    };
    // SAFETY: `p` and `ts` are live for the call and the count matches `p`.
    let n = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    n != 0
}

/// Sends `sig` to `pid`; false if there is no such process.
pub fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill() takes no pointers; a wrong pid only yields an error.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether process `pid` exists.
pub fn alive(pid: i32) -> bool {
    signal(pid, 0)
}

/// CLOCK_MONOTONIC in nanoseconds: one timeline for every process on the machine (a sender in
/// one namespace stamps, a receiver in another subtracts).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`, a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Raises the soft limit on open files to the hard limit and returns the new soft limit. A
/// soft limit of 1 024 (a common default) would leave a control socket with a thousand
/// clients, the AF_XDP sockets and the eventfds of a switch without descriptors.
pub fn raise_nofile() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into `lim`, a live rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads only `want`, a live rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
            return Err(io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok(lim.rlim_cur)
}

/// Asks the kernel to back the whole 2 MiB pages inside `mem` with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`), for memory read at random across many megabytes (the fabric's
/// frame slabs), where 4 KiB pages cost a TLB miss per frame. Advice only: it changes how the
/// kernel backs the pages, never their contents; a kernel that refuses it is ignored.
pub fn advise_huge_pages(mem: &mut [u8]) {
    const HUGE: usize = 2 << 20;
    let (base, len) = (mem.as_mut_ptr() as usize, mem.len());
    let start = base.next_multiple_of(HUGE);
    let end = (base + len) & !(HUGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside `mem`, which we borrow mutably; MADV_HUGEPAGE
        // reads or writes no byte of it.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}
