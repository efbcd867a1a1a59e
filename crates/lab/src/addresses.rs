//! The lab's fixed link-layer and IPv4 addresses (RFC 2544's benchmarking
//! range): the same in every run, on namespaces and on real hosts.

use std::net::Ipv4Addr;

use nflab_wire::MacAddr;

/// Fixed, locally administered MACs: the namespaces isolate runs, so the same
/// addresses in every run make captures comparable.
pub const LG0_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x00, 0x01]);
/// MAC of lg1 (the recorder's interface).
pub const LG1_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x00, 0x02]);
/// MAC of dut0 (the DuT's ingress).
pub const DUT0_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x01, 0x01]);
/// MAC of dut1 (the DuT's egress).
pub const DUT1_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x01, 0x02]);
/// LoadGen sender address (RFC 2544 benchmarking range).
pub const LG0_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// DuT ingress address.
pub const DUT0_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// DuT egress address.
pub const DUT1_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
/// LoadGen receiver address.
pub const LG1_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

/// UDP ports of the probe stream.
pub const PROBE_SRC_PORT: u16 = 49_152;
/// Destination port: discard (RFC 863), so a stray probe is harmless.
pub const PROBE_DST_PORT: u16 = 9;
/// Flow id of the probe stream.
pub const PROBE_FLOW: u16 = 0;
