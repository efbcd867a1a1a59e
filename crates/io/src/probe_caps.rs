//! What this host and privilege level can do, checked by doing it once.
//!
//! `nflab doctor` and the backend choice call these; each returns the same clear error the
//! real backend would, without side effects that outlive the call.

use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::sys;
use crate::{iface, IoError};

/// Can this process open an AF_PACKET raw socket?
pub fn af_packet() -> Result<(), IoError> {
    sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
        .map(drop)
        .map_err(|e| {
            if sys::is_perm(&e) {
                IoError::NeedCapNetRaw { what: "AF_PACKET" }
            } else if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                IoError::Unsupported {
                    what: "AF_PACKET",
                    hint: "load the af_packet module or use a kernel with CONFIG_PACKET",
                }
            } else {
                sys::err_from("socket(AF_PACKET)", "this host", e)
            }
        })
}

/// Can this process open an AF_XDP socket?
pub fn af_xdp() -> Result<(), IoError> {
    sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
        .map(drop)
        .map_err(|e| {
            if sys::is_perm(&e) {
                IoError::NeedCapNetRaw { what: "AF_XDP" }
            } else if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                IoError::Unsupported {
                    what: "AF_XDP",
                    hint: "use a kernel built with CONFIG_XDP_SOCKETS, or the af_packet backend",
                }
            } else {
                sys::err_from("socket(AF_XDP)", "this host", e)
            }
        })
}

/// How [`xdp_on_with`] attaches its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttach {
    /// `bpf(BPF_LINK_CREATE)` with attach type `BPF_XDP` (kernel 5.9+); closing the link detaches.
    Link,
    /// rtnetlink `RTM_SETLINK` with `IFLA_XDP` (any XDP-capable kernel); detached with fd -1.
    Netlink,
}

/// Can an XDP program run on `ifname`? Loads a 2-instruction `XDP_PASS` program, attaches
/// it with a BPF link (falling back to netlink if link creation fails), then detaches and
/// closes it: nothing stays attached.
pub fn xdp_on(ifname: &str) -> Result<(), IoError> {
    match xdp_on_with(ifname, XdpAttach::Link) {
        Ok(()) => Ok(()),
        Err(
            e @ (IoError::NoSuchInterface { .. }
            | IoError::BadInterfaceName { .. }
            | IoError::NeedCapBpf { .. }
            | IoError::XdpBusy { .. }),
        ) => Err(e),
        Err(_) => xdp_on_with(ifname, XdpAttach::Netlink),
    }
}

/// [`xdp_on`] with one attach method only.
pub fn xdp_on_with(ifname: &str, how: XdpAttach) -> Result<(), IoError> {
    let ifindex = iface::index(ifname)?;
    let prog = load_xdp_pass(ifname)?;
    match how {
        XdpAttach::Link => {
            let link = link_create(&prog, ifindex, ifname)?;
            // Closing the only reference to an unpinned link detaches the program.
            drop(link);
            Ok(())
        }
        XdpAttach::Netlink => {
            netlink_set_xdp(
                ifindex,
                prog.as_raw_fd(),
                sys::XDP_FLAGS_UPDATE_IF_NOEXIST,
                ifname,
            )?;
            netlink_set_xdp(ifindex, -1, 0, ifname)
        }
    }
}

/// Attach an `XDP_PASS` program to `ifname` with netlink, where it stays until
/// [`detach_xdp`] or until the interface goes: a veth with an XDP program
/// receives frames sent to it with `ndo_xdp_xmit` (XDP redirect, live frames)
/// and passes them to the stack, which a veth without one drops.
pub fn attach_xdp_pass(ifname: &str) -> Result<(), IoError> {
    let ifindex = iface::index(ifname)?;
    let prog = load_xdp_pass(ifname)?;
    netlink_set_xdp(
        ifindex,
        prog.as_raw_fd(),
        sys::XDP_FLAGS_UPDATE_IF_NOEXIST,
        ifname,
    )
}

/// Detach whatever XDP program netlink attached to `ifname`.
pub fn detach_xdp(ifname: &str) -> Result<(), IoError> {
    netlink_set_xdp(iface::index(ifname)?, -1, 0, ifname)
}

/// `BPF_MAP_CREATE`, `BPF_MAP_LOOKUP_ELEM`, `BPF_MAP_UPDATE_ELEM` from `enum bpf_cmd`.
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_int = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;

/// `union bpf_attr` for `BPF_MAP_CREATE` (common part).
#[repr(C, align(8))]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// `union bpf_attr` for `BPF_MAP_LOOKUP_ELEM` and `BPF_MAP_UPDATE_ELEM`.
#[repr(C, align(8))]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// A BPF map of `map_type` with `K` keys and `V` values (`what` names it in errors).
pub(crate) fn map_create<K, V>(
    map_type: u32,
    max_entries: u32,
    what: &'static str,
    ifname: &str,
) -> Result<OwnedFd, IoError> {
    let mut mc = MapCreateAttr {
        map_type,
        key_size: size_of::<K>() as u32,
        value_size: size_of::<V>() as u32,
        max_entries,
        map_flags: 0,
    };
    bpf(BPF_MAP_CREATE, &mut mc).map_err(|e| bpf_err(what, ifname, e))
}

fn map_elem<K, V>(
    cmd: libc::c_int,
    map: &OwnedFd,
    key: &K,
    value: *const V,
    what: &'static str,
    ifname: &str,
) -> Result<(), IoError> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key as *const K as u64,
        value: value as u64,
        flags: 0,
    };
    // Both commands return 0, not a descriptor.
    bpf_noreturn(cmd, &mut attr).map_err(|e| bpf_err(what, ifname, e))
}

/// `map[key] = value`.
pub(crate) fn map_update<K, V>(
    map: &OwnedFd,
    key: &K,
    value: &V,
    ifname: &str,
) -> Result<(), IoError> {
    map_elem(
        BPF_MAP_UPDATE_ELEM,
        map,
        key,
        value,
        "bpf(BPF_MAP_UPDATE_ELEM)",
        ifname,
    )
}

/// `*value = map[key]`.
pub(crate) fn map_lookup<K, V>(
    map: &OwnedFd,
    key: &K,
    value: &mut V,
    ifname: &str,
) -> Result<(), IoError> {
    map_elem(
        BPF_MAP_LOOKUP_ELEM,
        map,
        key,
        value as *mut V as *const V,
        "bpf(BPF_MAP_LOOKUP_ELEM)",
        ifname,
    )
}

/// `union bpf_attr` as used by `BPF_PROG_LOAD`, up to `expected_attach_type`
/// (<linux/bpf.h>; the kernel zero-fills the rest of the union).
#[repr(C, align(8))]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` as used by `BPF_LINK_CREATE`, the common part (<linux/bpf.h>).
#[repr(C, align(8))]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

pub(crate) fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, initialised `union bpf_attr` prefix of size_of::<T>() bytes,
    // which is the size passed; the kernel reads (and for some commands writes) only that.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size_of::<T>() as u32) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both commands used here return a fresh file descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as libc::c_int) })
}

pub(crate) fn bpf_err(call: &'static str, ifname: &str, e: std::io::Error) -> IoError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => IoError::NeedCapBpf { what: "XDP" },
        Some(libc::ENOSYS) => IoError::Unsupported {
            what: "bpf()",
            hint: "use a kernel built with CONFIG_BPF_SYSCALL",
        },
        Some(libc::EBUSY) | Some(libc::EEXIST) => IoError::XdpBusy {
            ifname: ifname.to_string(),
        },
        _ => sys::err_from(call, ifname, e),
    }
}

fn load_xdp_pass(ifname: &str) -> Result<OwnedFd, IoError> {
    // r0 = XDP_PASS (2); exit.  Opcodes: BPF_ALU64|BPF_MOV|BPF_K = 0xb7, BPF_JMP|BPF_EXIT = 0x95.
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0x00, 0, 0, 2, 0, 0, 0]),
        u64::from_le_bytes([0x95, 0x00, 0, 0, 0, 0, 0, 0]),
    ];
    load_xdp(&insns, ifname)
}

/// `bpf()` for commands that return 0 rather than a descriptor.
pub(crate) fn bpf_noreturn<T>(cmd: libc::c_int, attr: &mut T) -> std::io::Result<()> {
    // SAFETY: as in `bpf`: a live, initialised bpf_attr prefix of the size passed.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size_of::<T>() as u32) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Load an XDP program given as raw eBPF instructions (GPL, so every helper is usable).
pub(crate) fn load_xdp(insns: &[u64], ifname: &str) -> Result<OwnedFd, IoError> {
    let license = b"GPL\0";
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"nflab_probe");
    let mut attr = ProgLoadAttr {
        prog_type: sys::BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
        prog_ifindex: 0,
        expected_attach_type: 0,
    };
    bpf(sys::BPF_PROG_LOAD, &mut attr).map_err(|e| bpf_err("bpf(BPF_PROG_LOAD)", ifname, e))
}

pub(crate) fn link_create(prog: &OwnedFd, ifindex: u32, ifname: &str) -> Result<OwnedFd, IoError> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: sys::BPF_XDP,
        flags: 0,
    };
    bpf(sys::BPF_LINK_CREATE, &mut attr).map_err(|e| bpf_err("bpf(BPF_LINK_CREATE)", ifname, e))
}

fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// RTM_SETLINK { ifinfomsg, IFLA_XDP { IFLA_XDP_FD, IFLA_XDP_FLAGS } } and wait for the ack.
fn netlink_set_xdp(ifindex: u32, prog_fd: i32, flags: u32, ifname: &str) -> Result<(), IoError> {
    let call = "netlink RTM_SETLINK(IFLA_XDP)";
    let fd = sys::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
        .map_err(|e| sys::err_from("socket(AF_NETLINK)", ifname, e))?;

    let mut nested = Vec::new();
    push_attr(&mut nested, sys::IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    push_attr(&mut nested, sys::IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut body = Vec::new();
    // struct ifinfomsg { u8 family; u8 pad; u16 type; i32 index; u32 flags; u32 change; }
    body.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    body.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    push_attr(
        &mut body,
        libc::IFLA_XDP | libc::NLA_F_NESTED as u16,
        &nested,
    );
    let mut msg = Vec::with_capacity(16 + body.len());
    // struct nlmsghdr { u32 len; u16 type; u16 flags; u32 seq; u32 pid; }
    msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&libc::RTM_SETLINK.to_ne_bytes());
    msg.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&body);

    // SAFETY: sockaddr_nl is plain data; all-zero (pid 0 = the kernel) is the address we want.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `msg` and `kernel` are live for the call and the lengths match them.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
            &kernel as *const _ as *const libc::sockaddr,
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(sys::syscall_err(call, ifname));
    }
    let mut reply = [0u8; 8192];
    loop {
        // SAFETY: `reply` is a writable buffer of the length given.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                reply.as_mut_ptr() as *mut libc::c_void,
                reply.len(),
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(sys::err_from(call, ifname, e));
        }
        let n = n as usize;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(reply[off..off + 4].try_into().unwrap_or([0; 4])) as usize;
            let ty = u16::from_ne_bytes([reply[off + 4], reply[off + 5]]);
            if ty == libc::NLMSG_ERROR as u16 && off + 20 <= n {
                let err =
                    i32::from_ne_bytes(reply[off + 16..off + 20].try_into().unwrap_or([0; 4]));
                if err == 0 {
                    return Ok(());
                }
                let e = std::io::Error::from_raw_os_error(-err);
                return Err(match -err {
                    libc::EPERM | libc::EACCES => IoError::NeedCapBpf { what: "XDP" },
                    libc::EBUSY | libc::EEXIST => IoError::XdpBusy {
                        ifname: ifname.to_string(),
                    },
                    _ => sys::err_from(call, ifname, e),
                });
            }
            if len < 16 {
                break;
            }
            off += (len + 3) & !3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_linux_bpf_h() {
        // offsetof(union bpf_attr, expected_attach_type) == 68 and link_create.attach_type == 8.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, attach_type), 8);
    }

    #[test]
    fn xdp_on_a_missing_interface_names_it() {
        assert!(matches!(
            xdp_on("nflabnope2"),
            Err(IoError::NoSuchInterface { .. })
        ));
    }

    #[test]
    fn nested_attrs_are_padded_to_four_bytes() {
        let mut b = Vec::new();
        push_attr(&mut b, 7, &[1, 2, 3]);
        assert_eq!(b, [7, 0, 7, 0, 1, 2, 3, 0]);
    }
}
