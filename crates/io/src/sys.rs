//! Thin wrappers over the syscalls the backends share, and kernel constants the libc
//! crate does not export under their header names.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libc::{c_int, c_void};

use crate::IoError;

/// `TPACKET_V2` from `enum tpacket_versions` in <linux/if_packet.h>: 1.
/// (libc has it only as a variant of a Rust enum.)
pub(crate) const TPACKET_V2: c_int = 1;
/// `TPACKET_V3` from `enum tpacket_versions` in <linux/if_packet.h>: 2.
pub(crate) const TPACKET_V3: c_int = 2;

/// `BPF_PROG_LOAD` from `enum bpf_cmd` in <linux/bpf.h>: 5.
pub(crate) const BPF_PROG_LOAD: c_int = 5;
/// `BPF_LINK_CREATE` from `enum bpf_cmd` in <linux/bpf.h>: 28.
pub(crate) const BPF_LINK_CREATE: c_int = 28;
/// `BPF_PROG_TYPE_XDP` from `enum bpf_prog_type` in <linux/bpf.h>: 6.
pub(crate) const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` from `enum bpf_attach_type` in <linux/bpf.h>: 37.
pub(crate) const BPF_XDP: u32 = 37;
/// `IFLA_XDP_FD` from <linux/if_link.h>: 1.
pub(crate) const IFLA_XDP_FD: u16 = 1;
/// `IFLA_XDP_FLAGS` from <linux/if_link.h>: 3.
pub(crate) const IFLA_XDP_FLAGS: u16 = 3;
/// `XDP_FLAGS_UPDATE_IF_NOEXIST` from <linux/if_link.h>: 1 << 0.
pub(crate) const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;

/// Build a `Syscall` error from errno.
pub(crate) fn syscall_err(call: &'static str, target: &str) -> IoError {
    err_from(call, target, io::Error::last_os_error())
}

/// Build a `Syscall` error from a given OS error.
pub(crate) fn err_from(call: &'static str, target: &str, source: io::Error) -> IoError {
    IoError::Syscall {
        call,
        target: target.to_string(),
        source,
    }
}

/// True when errno says "not permitted".
pub(crate) fn is_perm(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

/// `socket(2)` with `SOCK_CLOEXEC`, owning the result.
pub(crate) fn socket(domain: c_int, ty: c_int, proto: c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments; no memory is passed.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(
    fd: &impl AsRawFd,
    level: c_int,
    name: c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to `size_of::<T>()` readable bytes for the duration of the call;
    // callers pass the C struct or int the option expects.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val as *const T as *const c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setsockopt(2)` with an `int` value.
pub(crate) fn setsockopt_int(
    fd: &OwnedFd,
    level: c_int,
    name: c_int,
    val: c_int,
) -> io::Result<()> {
    setsockopt(fd, level, name, &val)
}

/// `getsockopt(2)` into a plain-data out value.
pub(crate) fn getsockopt<T: Copy>(
    fd: &OwnedFd,
    level: c_int,
    name: c_int,
    out: &mut T,
) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` points to `len` writable bytes; the kernel writes at most `len` bytes
    // and `T` is a C plain-data struct for which any bytes are a valid value.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            out as *mut T as *mut c_void,
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// What is left of a receive's `timeout`, counted from the first call (which sets
/// `deadline`); `None` once it is over. A zero timeout is over at once without reading
/// the clock: a busy-polling data plane calls receive millions of times a second on an
/// empty ring, and a clock read each time was 8 % of its core.
pub(crate) fn wait_left(
    deadline: &mut Option<std::time::Instant>,
    timeout: std::time::Duration,
) -> Option<std::time::Duration> {
    if timeout.is_zero() {
        return None;
    }
    let now = std::time::Instant::now();
    let end = *deadline.get_or_insert(now + timeout);
    (now < end).then(|| end - now)
}

/// Point the first `iov.len()` message headers of one `recvmmsg` call at their buffers:
/// message i receives into `data[i·data_len..][..data_len]` and its control messages
/// into `ctrl[i·ctrl_elems..][..ctrl_elems]` (elements of `T`, so the caller picks the
/// alignment). `msgs` must be as long as `iov`; the headers must not outlive `iov`,
/// `data` and `ctrl`.
pub(crate) fn point_recv_msgs<T>(
    iov: &mut [libc::iovec],
    msgs: &mut [libc::mmsghdr],
    data: &mut [u8],
    data_len: usize,
    ctrl: &mut [T],
    ctrl_elems: usize,
) {
    debug_assert!(msgs.len() >= iov.len());
    debug_assert!(data.len() >= iov.len() * data_len && ctrl.len() >= iov.len() * ctrl_elems);
    let chunks = data
        .chunks_exact_mut(data_len)
        .zip(ctrl.chunks_exact_mut(ctrl_elems));
    for ((v, m), (d, c)) in iov.iter_mut().zip(msgs.iter_mut()).zip(chunks) {
        v.iov_base = d.as_mut_ptr().cast();
        v.iov_len = data_len;
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = c.as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = (ctrl_elems * std::mem::size_of::<T>()) as _;
    }
}

/// The socket's pending error (`SO_ERROR`, which reading clears), if any.
pub(crate) fn take_socket_error(fd: &OwnedFd) -> Option<c_int> {
    let mut err: c_int = 0;
    match getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err) {
        Ok(()) if err != 0 => Some(err),
        _ => None,
    }
}

/// Wait up to `timeout` for `fd` to become readable; true when it is.
pub(crate) fn poll_in(fd: &OwnedFd, timeout: std::time::Duration) -> io::Result<bool> {
    poll_one(fd, libc::POLLIN, timeout).map(|revents| revents != 0)
}

/// Wait up to `timeout` for one of `events` on `fd` (POLLERR and POLLHUP are always
/// reported); returns the events that occurred, 0 on timeout or when a signal
/// interrupted the wait. Uses `ppoll`, whose timeout is in ns: `poll`'s milliseconds,
/// rounded up, made a data-plane worker waiting for a delayer deadline 50 µs away sleep
/// for 1 ms.
pub(crate) fn poll_one(
    fd: &impl AsRawFd,
    events: libc::c_short,
    timeout: std::time::Duration,
) -> io::Result<libc::c_short> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfd` is one valid pollfd and `ts` a valid timespec for the duration of the
    // call; a null signal mask leaves the thread's mask alone.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(if rc > 0 { pfd.revents } else { 0 })
}

/// A shared memory mapping of a socket's ring, unmapped on drop.
pub(crate) struct Mmap {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to another thread
// moves the only handle to it. Concurrent access with the kernel is coordinated through
// the ring status words, not through thread identity.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Map `len` bytes of the ring(s) of packet socket `fd`, from offset 0.
    pub(crate) fn ring(fd: &OwnedFd, len: usize) -> io::Result<Mmap> {
        // SAFETY: asks the kernel for a new shared mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: ptr as *mut u8,
            len,
        })
    }
}

impl Mmap {
    /// Map `len` bytes of a socket's ring at byte offset `offset` (AF_XDP page offsets).
    pub(crate) fn ring_at(fd: &OwnedFd, len: usize, offset: i64) -> io::Result<Mmap> {
        // SAFETY: asks the kernel for a new shared mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: ptr as *mut u8,
            len,
        })
    }

    /// `len` bytes of private anonymous memory, populated (an AF_XDP UMEM).
    pub(crate) fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: asks the kernel for new anonymous memory; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: ptr as *mut u8,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no reference into the
        // mapping outlives `self` (all accessors borrow `self`).
        unsafe {
            libc::munmap(self.ptr as *mut c_void, self.len);
        }
    }
}

/// The socket address of an interface for `bind(2)` on a packet socket.
pub(crate) fn bind_ll(fd: &OwnedFd, ifindex: u32, protocol_be: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol_be;
    sll.sll_ifindex = ifindex as c_int;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// System page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}
