//! The calling thread's namespace's UDP sockets, from `/proc/net/udp` and
//! `/proc/net/udp6` (the same columns; an IPv6 address is one hex word): which
//! sockets are bound to a port (their inodes, for [`crate::vnf_socket`]) and how
//! full one's receive queue is (the UDP monitor's buffer samples).

/// The calling thread's namespace's tables, IPv4 first.
pub(crate) const UDP_TABLES: [&str; 2] =
    ["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"];

/// One socket's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SocketLine {
    /// Local port.
    pub port: u16,
    /// Bytes queued for reading (`rx_queue`).
    pub rx_queue: u64,
    /// The socket's inode.
    pub inode: u64,
    /// Datagrams the socket dropped.
    pub drops: u64,
}

/// The socket lines of a table's text (the header skipped, bad lines too).
pub(crate) fn socket_lines(table: &str) -> impl Iterator<Item = SocketLine> + '_ {
    table.lines().skip(1).filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        Some(SocketLine {
            port: u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?,
            rx_queue: hex(f.get(4)?.rsplit(':').next()?)?,
            inode: f.get(9)?.parse().ok()?,
            drops: f.last()?.parse().ok()?,
        })
    })
}

/// Inodes of the sockets bound to `port` in the calling thread's namespace.
pub(crate) fn bound_inodes(port: u16) -> Vec<u64> {
    UDP_TABLES
        .iter()
        .filter_map(|t| read_in_one(t))
        .flat_map(|text| udp_socket_inodes(&text, port))
        .collect()
}

/// A table's text, read into room for 1 MiB. The kernel walks the table afresh at
/// every `read` (one page of lines each), resuming by line index: a socket bound
/// or closed elsewhere between two reads shifts the lines, and a line can be
/// skipped (a test binding sockets in parallel threads saw its own socket
/// missing). `read_to_string` starts with a 32-byte read, so even a table of a
/// few lines took several walks; with room ready, a table of one page (≈ 30
/// sockets, a DuT namespace's) is walked once.
fn read_in_one(path: &str) -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(1 << 20);
    std::fs::File::open(path).ok()?.read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// Inodes of the sockets bound to local `port` in a `/proc/net/udp{,6}` text.
pub(crate) fn udp_socket_inodes(table: &str, port: u16) -> Vec<u64> {
    socket_lines(table)
        .filter(|l| l.port == port)
        .map(|l| l.inode)
        .collect()
}

/// One of this namespace's tables, opened once and read with one `pread` per
/// sample.
///
/// Every `read` of the file walks the whole UDP hash table (16 384 slots here,
/// shared by all namespaces) up to where the last one stopped, and
/// `read_to_string` makes at least three (a 32-byte probe, the rest, the end):
/// ≈ 175 µs a sample against ≈ 50 µs for one read into a buffer that holds
/// every line (`os.read` timed in Python on the reference VM).
pub(crate) struct UdpTable {
    path: &'static str,
    file: std::fs::File,
    buf: Vec<u8>,
}

impl UdpTable {
    /// The table of the calling thread's namespace (fixed at open) that lists a
    /// socket bound to `port`: udp, or udp6 for an IPv6 socket; udp when neither does.
    pub(crate) fn open_for(port: u16) -> Option<UdpTable> {
        let mut fallback = None;
        for path in UDP_TABLES {
            let Some(mut t) = UdpTable::with_buffer(path, 64 << 10) else {
                continue;
            };
            if t.fill(port).is_some() {
                return Some(t);
            }
            fallback.get_or_insert(t);
        }
        fallback
    }

    fn with_buffer(path: &'static str, bytes: usize) -> Option<UdpTable> {
        let file = std::fs::File::open(path).ok()?;
        Some(UdpTable {
            path,
            file,
            buf: vec![0; bytes],
        })
    }

    /// `rx_queue` and `drops` of the socket bound to `port`.
    pub(crate) fn fill(&mut self, port: u16) -> Option<(u64, u64)> {
        use std::io::Read;
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        let found = std::str::from_utf8(&self.buf[..n])
            .ok()
            .and_then(|t| udp_socket_fill(t, port));
        if found.is_some() || n < self.buf.len() {
            return found;
        }
        // More sockets than the buffer holds: the whole file, the slow way.
        let mut all = String::new();
        std::fs::File::open(self.path)
            .ok()?
            .read_to_string(&mut all)
            .ok()?;
        udp_socket_fill(&all, port)
    }
}

/// `rx_queue` and `drops` of the socket bound to `port` in a table's text.
pub(crate) fn udp_socket_fill(table: &str, port: u16) -> Option<(u64, u64)> {
    socket_lines(table)
        .find(|l| l.port == port)
        .map(|l| (l.rx_queue, l.drops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

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
    fn the_table_read_in_one_pread_finds_a_socket_and_its_queue() {
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        let src = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..3 {
            src.send_to(&[7u8; 100], ("127.0.0.1", port)).unwrap();
        }
        let mut table = UdpTable::open_for(port).unwrap();
        let mut fill = || table.fill(port).expect("the socket's line");
        let start = Instant::now();
        let (mut rx, mut drops) = fill();
        while rx < 300 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
            (rx, drops) = fill();
        }
        assert!(rx >= 300, "rx_queue {rx}");
        assert_eq!(drops, 0);
        // Read again from the start (pread at 0), after draining one datagram.
        let mut buf = [0u8; 200];
        sink.recv(&mut buf).unwrap();
        let (rx2, _) = fill();
        assert!(rx2 < rx, "{rx2} after {rx}");
        // A buffer too small for the line: the whole file is read instead.
        let (rx3, _) = UdpTable::with_buffer(UDP_TABLES[0], 64)
            .unwrap()
            .fill(port)
            .unwrap();
        assert_eq!(rx3, rx2);
        assert_eq!(UdpTable::open_for(port).unwrap().fill(0), None);
    }

    #[test]
    fn finds_the_ports_queue_in_proc_net_udp() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 00000000:0009 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 123 2 0000000000000000 17\n";
        assert_eq!(udp_socket_fill(table, 9), Some((0xA00, 17)));
        assert_eq!(udp_socket_fill(table, 10), None);
    }

    #[test]
    fn an_ipv6_socket_is_read_from_udp6() {
        let sink = std::net::UdpSocket::bind("[::1]:0").expect("IPv6 loopback");
        let port = sink.local_addr().unwrap().port();
        let src = std::net::UdpSocket::bind("[::1]:0").unwrap();
        src.send_to(&[7u8; 100], ("::1", port)).unwrap();
        let mut table = UdpTable::open_for(port).unwrap();
        assert!(table.path.ends_with("udp6"), "{}", table.path);
        let start = Instant::now();
        while table.fill(port).unwrap().0 < 100 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(table.fill(port).unwrap().0 >= 100);
    }
}
