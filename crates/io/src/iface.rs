//! Interface facts of the current thread's network namespace.
//!
//! Network namespaces are per thread: call these from the thread that will use the
//! interface.

use std::os::fd::AsRawFd;

use crate::sys;
use crate::IoError;

/// Check `name` is something Linux could call an interface (`dev_valid_name`).
fn check_name(name: &str) -> Result<(), IoError> {
    let ok = !name.is_empty()
        && name.len() < libc::IFNAMSIZ
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace());
    if ok {
        Ok(())
    } else {
        Err(IoError::BadInterfaceName {
            ifname: name.to_string(),
        })
    }
}

/// Inode of the calling thread's network namespace (0 if /proc cannot say):
/// names the namespace, for keys and file names that must keep namespaces apart.
pub fn this_netns_inode() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0)
}

/// The interface index of `name`.
pub fn index(name: &str) -> Result<u32, IoError> {
    check_name(name)?;
    let c = std::ffi::CString::new(name).map_err(|_| IoError::BadInterfaceName {
        ifname: name.to_string(),
    })?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(IoError::NoSuchInterface {
                ifname: name.to_string(),
            });
        }
        return Err(sys::err_from("if_nametoindex", name, e));
    }
    Ok(idx)
}

/// Run an interface ioctl (`SIOCGIF*`) on a throwaway datagram socket.
fn ifreq_ioctl(name: &str, req: libc::c_ulong, call: &'static str) -> Result<libc::ifreq, IoError> {
    check_name(name)?;
    let fd = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| sys::err_from("socket(AF_INET)", name, e))?;
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq with a NUL-terminated name (checked shorter than
    // IFNAMSIZ); SIOCGIFHWADDR/SIOCGIFMTU write only inside it.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut ifr) };
    if rc < 0 {
        return Err(ioctl_error(call, name));
    }
    Ok(ifr)
}

/// The error of an interface ioctl that just failed: no such interface, or the call's.
pub(crate) fn ioctl_error(call: &'static str, name: &str) -> IoError {
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENODEV) {
        return IoError::NoSuchInterface {
            ifname: name.to_string(),
        };
    }
    sys::err_from(call, name, e)
}

/// The hardware (MAC) address of `name`; all zero for interfaces without one (lo).
pub fn mac(name: &str) -> Result<[u8; 6], IoError> {
    let ifr = ifreq_ioctl(name, libc::SIOCGIFHWADDR, "ioctl(SIOCGIFHWADDR)")?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut out = [0u8; 6];
    for (o, b) in out.iter_mut().zip(sa.sa_data.iter()) {
        *o = *b as u8;
    }
    Ok(out)
}

/// The MTU of `name` in bytes (L3: excludes the 14-byte Ethernet header).
pub fn mtu(name: &str) -> Result<usize, IoError> {
    let ifr = ifreq_ioctl(name, libc::SIOCGIFMTU, "ioctl(SIOCGIFMTU)")?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    Ok(mtu.max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_gives_the_clear_error() {
        let e = index("nflabnope0").unwrap_err();
        assert!(matches!(e, IoError::NoSuchInterface { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "interface 'nflabnope0' does not exist in this network namespace: check the name with `ip link` and the namespace the thread runs in"
        );
        assert!(matches!(
            mtu("nflabnope0"),
            Err(IoError::NoSuchInterface { .. })
        ));
        assert!(matches!(
            mac("nflabnope0"),
            Err(IoError::NoSuchInterface { .. })
        ));
    }

    #[test]
    fn bad_names_are_rejected_before_any_syscall() {
        for n in ["", "a/b", "x:1", "has space", "sixteen_chars_xx"] {
            assert!(
                matches!(index(n), Err(IoError::BadInterfaceName { .. })),
                "{n:?}"
            );
        }
    }

    #[test]
    fn loopback_facts() {
        // Every network namespace has lo with index 1, MTU 65536 and a zero MAC.
        assert_eq!(index("lo").unwrap(), 1);
        assert_eq!(mtu("lo").unwrap(), 65536);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
    }
}
