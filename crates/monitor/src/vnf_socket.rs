//! The VNF's own UDP socket, reached from outside the VNF: the monitor attaches its
//! ingress program there.
//!
//! The VNF is a black box: we know its namespace and port, not its process. The
//! socket is found by port in the namespace's `/proc/net/udp` (its inode), then
//! among every process's open descriptors (`/proc/PID/fd/N` → `socket:[INODE]`), and
//! duplicated into this process with `pidfd_getfd(2)` — the same open socket, so a
//! filter attached through the copy runs for the VNF's datagrams. The filter belongs
//! to the socket, not to the descriptor: [`VnfSocket`] detaches it when dropped, and
//! a VNF that runs inside nflab (the udp relay) takes it along when it exits, also
//! after `kill -9`.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use crate::proc_udp::bound_inodes;
use crate::MonitorError;

/// A duplicate of a VNF's UDP socket, with the monitor's filter attached once
/// [`VnfSocket::attach`] succeeded.
#[derive(Debug)]
pub struct VnfSocket {
    fd: OwnedFd,
    inode: u64,
    attached: bool,
}

impl VnfSocket {
    /// Every UDP socket bound to `port` in the calling thread's namespace, duplicated.
    /// None bound, or none whose owner can be found: one sentence saying so.
    pub fn find(port: u16) -> Result<Vec<VnfSocket>, MonitorError> {
        let inodes = bound_inodes(port);
        if inodes.is_empty() {
            return Err(nothing_bound(port));
        }
        let mut found = Vec::new();
        let mut last_error = None;
        for (ino, pid, fd) in holders(&inodes) {
            if found.iter().any(|s: &VnfSocket| s.inode == ino) {
                continue;
            }
            match duplicate(pid, fd, ino) {
                Ok(fd) => found.push(VnfSocket::checked(fd, ino)?),
                // The process exited or closed it meanwhile: another may hold it.
                Err(e) => last_error = Some(e),
            }
        }
        // A socket closed since the table was read is no one's to monitor.
        let still_bound = bound_inodes(port);
        let missing: Vec<u64> = inodes
            .iter()
            .filter(|i| !found.iter().any(|s| s.inode == **i) && still_bound.contains(i))
            .copied()
            .collect();
        if found.is_empty() && missing.is_empty() {
            return Err(nothing_bound(port));
        }
        if !missing.is_empty() {
            return Err(MonitorError::Unsupported(format!(
                "the UDP socket(s) bound to port {port} with inode {missing:?} could not be reached in any process{}",
                last_error.map(|e| format!(" ({e})")).unwrap_or_default()
            )));
        }
        Ok(found)
    }

    /// A copy of socket `inode`, refused if the VNF filters it itself: attaching
    /// would replace that filter, and detaching would leave the VNF without one.
    fn checked(fd: OwnedFd, inode: u64) -> Result<VnfSocket, MonitorError> {
        let mut len: libc::socklen_t = 0;
        // SAFETY: with a length of 0 the kernel writes only `len` (the number of
        // classic filter blocks: 0 without a filter; EACCES for an eBPF filter).
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_GET_FILTER,
                std::ptr::null_mut(),
                &mut len,
            )
        };
        if rc != 0 || len != 0 {
            return Err(MonitorError::Unsupported(format!(
                "the VNF's UDP socket (inode {inode}) has a socket filter of its own: the udp monitor would replace it, so it refuses"
            )));
        }
        Ok(VnfSocket {
            fd,
            inode,
            attached: false,
        })
    }

    /// Attach the socket-filter program `prog` (its descriptor) to the socket.
    pub fn attach(&mut self, prog: &impl AsFd) -> Result<(), MonitorError> {
        let prog_fd: libc::c_int = prog.as_fd().as_raw_fd();
        self.setsockopt(libc::SO_ATTACH_BPF, &prog_fd)
            .map_err(|e| {
                MonitorError::Bpf(format!(
                    "cannot attach the monitor to the VNF's socket (SO_ATTACH_BPF): {e}"
                ))
            })?;
        self.attached = true;
        Ok(())
    }

    /// Take the filter off the socket (nothing when none is attached).
    pub fn detach(&mut self) {
        if self.attached {
            let _ = self.setsockopt(libc::SO_DETACH_BPF, &0);
            self.attached = false;
        }
    }

    fn setsockopt(&self, opt: libc::c_int, value: &libc::c_int) -> std::io::Result<()> {
        // SAFETY: `value` is a valid c_int for the duration of the call.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for VnfSocket {
    fn drop(&mut self) {
        // The VNF's socket outlives our copy: take the filter off it.
        self.detach();
    }
}

fn nothing_bound(port: u16) -> MonitorError {
    MonitorError::Unsupported(format!(
        "no UDP socket is bound to port {port} in the DuT's namespace: the udp monitor attaches to the VNF's socket, so the VNF must be running first"
    ))
}

/// (inode, pid, fd) of every descriptor of every process that refers to one of
/// `inodes` (a process may hold several: IPv4 and IPv6, `SO_REUSEPORT` workers).
fn holders(inodes: &[u64]) -> Vec<(u64, i32, i32)> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        out.extend(
            fds.flatten()
                .filter_map(|f| socket_fd(&f, inodes))
                .map(|(ino, fd)| (ino, pid, fd)),
        );
    }
    out
}

/// (inode, fd) if descriptor entry `f` (`/proc/PID/fd/N`) is one of `inodes`' sockets.
fn socket_fd(f: &std::fs::DirEntry, inodes: &[u64]) -> Option<(u64, i32)> {
    let link = std::fs::read_link(f.path()).ok()?;
    let ino: u64 = link
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let fd = f.file_name().to_str()?.parse().ok()?;
    inodes.contains(&ino).then_some((ino, fd))
}

/// A copy of descriptor `fd` of process `pid` in this process, checked to be socket
/// `inode` (the pid or the descriptor number may have been reused since /proc said so).
fn duplicate(pid: i32, fd: i32, inode: u64) -> Result<OwnedFd, MonitorError> {
    let err = |what: &str| {
        MonitorError::Bpf(format!(
            "cannot take a copy of the VNF's socket (pid {pid}, fd {fd}) with {what}: {}",
            std::io::Error::last_os_error()
        ))
    };
    // SAFETY: plain syscalls; each returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(err("pidfd_open"));
    }
    // SAFETY: `pidfd` is a descriptor we own from here on.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: as above.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if dup < 0 {
        return Err(err("pidfd_getfd"));
    }
    // SAFETY: `dup` is a new descriptor owned by nothing else.
    let dup = unsafe { OwnedFd::from_raw_fd(dup as i32) };
    let same = nix::sys::stat::fstat(dup.as_raw_fd()).is_ok_and(|st| st.st_ino == inode);
    if !same {
        return Err(MonitorError::Bpf(format!(
            "descriptor {fd} of pid {pid} is no longer socket {inode}"
        )));
    }
    Ok(dup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_of_this_process_is_found_and_a_free_port_is_one_sentence() {
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        let socks = VnfSocket::find(port).expect("the sink's socket");
        assert_eq!(socks.len(), 1);
        // The copy is the sink's socket: the same local address.
        let copy = std::net::UdpSocket::from(socks[0].fd.try_clone().unwrap());
        assert_eq!(copy.local_addr().unwrap(), sink.local_addr().unwrap());
        let unbound = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let free = unbound.local_addr().unwrap().port();
        drop(unbound);
        let e = VnfSocket::find(free).unwrap_err().to_string();
        assert!(e.contains(&format!("port {free}")), "{e}");
    }

    #[test]
    fn every_socket_on_the_port_is_found_even_in_one_process() {
        let v4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = v4.local_addr().unwrap().port();
        let v6 = std::net::UdpSocket::bind(("::1", port)).expect("IPv6 loopback");
        let socks = VnfSocket::find(port).expect("both sockets");
        assert_eq!(socks.len(), 2, "{socks:?}");
        drop(v6);
    }

    #[test]
    fn a_socket_with_a_filter_of_its_own_is_refused() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        // Classic BPF: "ret #0xffffffff" — keep every datagram whole.
        let mut code = [libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: u32::MAX,
        }];
        let prog = libc::sock_fprog {
            len: 1,
            filter: code.as_mut_ptr(),
        };
        // SAFETY: `prog` points at one valid instruction for the call.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        let e = VnfSocket::find(port).unwrap_err().to_string();
        assert!(e.contains("filter of its own"), "{e}");
    }
}
