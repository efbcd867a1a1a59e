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

use crate::MonitorError;

/// The calling thread's namespace's UDP sockets, IPv4 and IPv6.
const UDP_TABLES: [&str; 2] = ["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"];

/// A duplicate of a VNF's UDP socket, with the monitor's filter attached once
/// [`VnfSocket::attach`] succeeded.
#[derive(Debug)]
pub struct VnfSocket {
    fd: OwnedFd,
    attached: bool,
}

impl VnfSocket {
    /// Every UDP socket bound to `port` in the calling thread's namespace, duplicated.
    /// None bound, or none whose owner can be found: one sentence saying so.
    pub fn find(port: u16) -> Result<Vec<VnfSocket>, MonitorError> {
        let mut inodes = Vec::new();
        for t in UDP_TABLES {
            if let Ok(text) = std::fs::read_to_string(t) {
                inodes.extend(udp_socket_inodes(&text, port));
            }
        }
        if inodes.is_empty() {
            return Err(MonitorError::Unsupported(format!(
                "no UDP socket is bound to port {port} in the DuT's namespace: the udp monitor attaches to the VNF's socket, so the VNF must be running first"
            )));
        }
        let mut found = Vec::new();
        for (pid, fd) in owners(&inodes) {
            found.push(VnfSocket {
                fd: duplicate(pid, fd)?,
                attached: false,
            });
        }
        if found.is_empty() {
            return Err(MonitorError::Unsupported(format!(
                "the UDP socket bound to port {port} (inode {inodes:?}) is open in no process this one can see"
            )));
        }
        Ok(found)
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
        if self.attached {
            let _ = self.setsockopt(libc::SO_DETACH_BPF, &0);
        }
    }
}

/// Inodes of the sockets bound to local `port` in a `/proc/net/udp{,6}` text.
pub fn udp_socket_inodes(table: &str, port: u16) -> Vec<u64> {
    let want = format!("{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1)?.rsplit(':').next()? == want).then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// (pid, fd) of every descriptor of every process that refers to one of `inodes`.
fn owners(inodes: &[u64]) -> Vec<(i32, i32)> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for f in fds.flatten() {
            let is_wanted = std::fs::read_link(f.path())
                .ok()
                .and_then(|l| l.to_str().map(|s| wanted.iter().any(|w| w == s)))
                .unwrap_or(false);
            if let (true, Some(fd)) = (
                is_wanted,
                f.file_name().to_str().and_then(|s| s.parse::<i32>().ok()),
            ) {
                out.push((pid, fd));
                // One descriptor per process is enough: they share the socket.
                break;
            }
        }
    }
    out
}

/// A copy of descriptor `fd` of process `pid` in this process.
fn duplicate(pid: i32, fd: i32) -> Result<OwnedFd, MonitorError> {
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
    Ok(unsafe { OwnedFd::from_raw_fd(dup as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_ports_inodes_in_proc_net_udp() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 00000000:0009 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 123 2 0000000000000000 17\n\
  2: 0100007F:0009 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 456 2 0000000000000000 0\n\
  3: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 789 2 0000000000000000 0\n";
        assert_eq!(udp_socket_inodes(table, 9), vec![123, 456]);
        assert_eq!(udp_socket_inodes(table, 10), Vec::<u64>::new());
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  5: 00000000000000000000000000000000:0009 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 999 2 0000000000000000 0\n";
        assert_eq!(udp_socket_inodes(v6, 9), vec![999]);
    }

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
}
