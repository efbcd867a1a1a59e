//! `[app] kind = "prrt"`: seed 000's wireless PRRT study (§6.3) across the run's DuT,
//! next to the probe traffic.
//!
//! The controller end runs in the LoadGen namespace on lg0 (198.18.0.1); the plant end in
//! a namespace of its own, `nflab-<id>-prrt`, on `prrt0` (198.18.0.4), a macvlan of lg1.
//! PC (plant → controller) crosses the DuT from lg1's side to lg0's — over a link DuT
//! that is `[dut.link.reverse]` — and CP the other way. Both send `payload_bytes` every
//! `gap_ms` for `duration_s` with the deadline-aware transport (`nflab-transport`).
//! Per run: `prrt.json` (the contract), `prrt-packets.parquet` (per message:
//! m1..m6 and the layer delays, [`nflab_analyze::prrt`]) and `prrt-stats.json` (both
//! ends' counters and the resolved parameters).

use std::net::{SocketAddrV4, UdpSocket};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use nflab_analyze::prrt::{write_packets, PrrtPacket};
use nflab_transport::app::AppSpec;
use nflab_transport::session::{self, EndPoint, SessionError, SessionOutcome};
use nflab_wire::MacAddr;

use crate::app::plant_ns::PlantNs;
use crate::error::LabError;
pub use crate::spec::app::{PrrtSection, Redundancy};
use crate::topo::{Topology, LG0_IP};

/// The plant's address (on prrt0, in its own namespace).
pub const PLANT_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 0, 4);
/// The plant interface's MAC.
pub const PLANT_MAC: MacAddr = MacAddr([0x02, 0x4e, 0x46, 0x00, 0x02, 0x02]);
/// UDP port of both ends.
pub const PORT: u16 = 47010;
/// The plant's interface.
const PLANT_IFACE: &str = "prrt0";

/// A study run under way.
pub struct PrrtRun {
    thread: JoinHandle<Result<SessionOutcome, SessionError>>,
    spec: AppSpec,
    plant_vanishes_s: Option<f64>,
    _ns: PlantNs,
}

/// The plant's socket goes out through a macvlan, whose checksum offload stays on; a
/// link DuT re-sends frames as read, so the checksum would never be filled in.
fn no_udp_checksum(s: &UdpSocket) -> std::io::Result<()> {
    nflab_io::udp_without_checksum(std::os::fd::AsFd::as_fd(s))
}

/// Set up the plant's namespace and start both ends; they stop early when `stop` is set.
pub fn start(
    topo: &Topology,
    section: &PrrtSection,
    stop: &Arc<AtomicBool>,
) -> Result<PrrtRun, LabError> {
    let spec = section.app_spec().map_err(LabError::Unsupported)?;
    super::check_dut("prrt", topo.dut)?;
    let ns = PlantNs::create(topo, "prrt", PLANT_IFACE, PLANT_IP, PLANT_MAC)?;
    let lg = topo.lg_ns.as_str();
    let plant = EndPoint {
        netns: ns.name.clone(),
        addr: SocketAddrV4::new(PLANT_IP, PORT),
        tap_iface: Some(PLANT_IFACE.into()),
        vanish_after_ns: section.plant_vanishes_s.map(|v| (v * 1e9).round() as u64),
    };
    // lg1 also sees the plant's frames (the macvlan's lower device): the controller's
    // tap watches lg0 only.
    let controller = EndPoint {
        netns: lg.to_string(),
        addr: SocketAddrV4::new(LG0_IP, PORT),
        tap_iface: Some("lg0".into()),
        vanish_after_ns: None,
    };
    let stop = Arc::clone(stop);
    let run_spec = spec.clone();
    let thread = std::thread::Builder::new()
        .name("prrt-study".into())
        .spawn(move || session::run(&run_spec, &plant, &controller, Some(no_udp_checksum), &stop))
        .map_err(|e| LabError::Host(format!("cannot start the PRRT study thread: {e}")))?;
    Ok(PrrtRun {
        thread,
        spec,
        plant_vanishes_s: section.plant_vanishes_s,
        _ns: ns,
    })
}

/// The session's rows as the Parquet records.
pub fn packet_records(out: &SessionOutcome) -> Vec<PrrtPacket> {
    out.packets
        .iter()
        .map(|r| {
            let l = &r.layers;
            PrrtPacket {
                dir: r.dir.as_str().into(),
                seq: r.seq,
                m: r.m,
                layers: [
                    l.l7_l2_ns,
                    l.l2_l1_ns,
                    l.l1_l1_ns,
                    l.l1_l2_ns,
                    l.l2_l7_ns,
                    l.one_way_ns,
                ],
            }
        })
        .collect()
}

impl PrrtRun {
    /// Wait for both ends to finish, then write `prrt.json`, `prrt-packets.parquet` and
    /// `prrt-stats.json` to `dir`.
    pub fn finish(self, dir: &Path) -> Result<SessionOutcome, LabError> {
        let out = self
            .thread
            .join()
            .map_err(|_| LabError::Other("the PRRT study thread panicked".into()))?
            .map_err(|e| LabError::Other(format!("the PRRT study: {e}")))?;
        let art = |name: &str| {
            let p = dir.join(name);
            move |e: std::io::Error| LabError::artifact(&p, e)
        };
        nflab_transport::study::write_prrt_json(&dir.join("prrt.json"), &out.run)
            .map_err(art("prrt.json"))?;
        write_packets(&dir.join("prrt-packets.parquet"), &packet_records(&out))
            .map_err(|e| LabError::Other(e.to_string()))?;
        let s = &self.spec;
        let stats = serde_json::json!({
            "app": {
                "kind": "prrt",
                "gap_ms": s.gap_ms,
                "payload_bytes": s.payload_bytes,
                "target_delay_ms": s.target_delay_ms,
                "window_ms": s.window_ms,
                "duration_s": s.duration_s,
                "outage_threshold_ms": s.outage_threshold_ms,
                "peer_timeout_ms": s.peer_timeout_ms,
                "plant_vanishes_s": self.plant_vanishes_s,
                "redundancy": {"block_size": s.block_size, "proactive_share": s.proactive_share},
            },
            "interrupted": out.interrupted,
            "messages": out.packets.len(),
            "stats": out.stats,
        });
        crate::artifacts::files::write_json(&dir.join("prrt-stats.json"), &stats)?;
        Ok(out)
    }
}
