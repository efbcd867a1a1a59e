//! Producers: one AF_PACKET `TPACKET_V3` RX ring per RX queue of the tapped
//! interface, all in one `PACKET_FANOUT` group split by queue, so each queue's
//! frames reach exactly one producer.
//!
//! AF_PACKET hands a packet socket a *copy* (a clone of the skb) and the frame
//! goes on up the stack, to the recorder's socket or to the DuT's forwarding,
//! exactly as without the capture: a tap, never a sink. (An AF_XDP redirect
//! would take frames away from the path being measured.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_io::{AfPacket, AfPacketConfig, Fanout, FanoutMode, PacketIo, RxRingKind};

use crate::filler::Filler;
use crate::{CaptureError, ProducerCounters};

/// The kernel ring hands a partly filled block over after this long.
pub const RING_TIMEOUT_NS: u64 = 1_000_000;

/// Frames asked for per `rx_batch` call.
const BATCH: usize = 256;

/// Number of RX queues of `iface`, from `ip -d -j link` run in the calling
/// thread's network namespace (sysfs shows the namespace it was mounted in,
/// not the thread's).
pub fn rx_queues(iface: &str) -> Result<usize, CaptureError> {
    let out = std::process::Command::new(nflab_io::process::system_tool("ip"))
        .args(["-d", "-j", "link", "show", "dev", iface])
        .output()
        .map_err(|e| CaptureError::Config(format!("cannot run ip to inspect {iface}: {e}")))?;
    if !out.status.success() {
        return Err(CaptureError::Config(format!(
            "interface {iface} does not exist here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| CaptureError::Config(format!("ip -j link show {iface}: {e}")))?;
    let link = &v[0];
    if link["operstate"] == "DOWN" {
        return Err(CaptureError::Config(format!(
            "interface {iface} is down: bring it up (ip link set {iface} up) before capturing"
        )));
    }
    Ok(link["num_rx_queues"].as_u64().unwrap_or(1).max(1) as usize)
}

/// Open `n` RX rings on `iface` in one fanout group (no group for one ring).
pub fn open_all(iface: &str, n: usize) -> Result<Vec<AfPacket>, CaptureError> {
    // The kernel retires a block after 1 ms even if it is nearly empty, so at
    // low rates the ring's depth in time is its block count in ms: 128 blocks
    // ride out a producer that the scheduler keeps off the CPU for 100 ms.
    // (The kernel ring is outside the QQ budget: it is the NIC side of it.)
    let blocks = 128;
    let fanout = (n > 1).then(|| Fanout {
        // Group ids are per namespace; the pid keeps two captures apart.
        group_id: (std::process::id() & 0xffff) as u16,
        mode: FanoutMode::QueueMapping,
    });
    (0..n)
        .map(|_| {
            AfPacket::open(
                iface,
                &AfPacketConfig {
                    rx: true,
                    tx: false,
                    rx_ring: RxRingKind::Blocks,
                    rx_block_bytes: 256 << 10,
                    rx_blocks: blocks,
                    rx_block_timeout_ms: (RING_TIMEOUT_NS / 1_000_000) as u32,
                    kernel_timestamps: true,
                    // Like tcpdump: both directions of the interface.
                    ignore_outgoing: false,
                    fanout,
                    ..AfPacketConfig::default()
                },
            )
            .map_err(CaptureError::from)
        })
        .collect()
}

/// One producer: its socket, feeding its inner queues.
pub struct Producer {
    id: usize,
    sock: AfPacket,
}

impl Producer {
    pub fn new(id: usize, sock: AfPacket) -> Producer {
        Producer { id, sock }
    }

    /// Fill inner queues and hand them over until `stop`; then hand over the
    /// last one and return the counters.
    pub fn run(
        mut self,
        mut filler: Filler,
        stop: &AtomicBool,
    ) -> Result<ProducerCounters, CaptureError> {
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            let n = self
                .sock
                .rx_batch(BATCH, Duration::from_millis(5), &mut |frame, meta| {
                    let ts_ns = meta.ts_ns.unwrap_or_else(nflab_io::clock::realtime_ns);
                    filler.push(ts_ns, meta.wire_len as u32, frame);
                })?;
            filler.tick();
            // One more pass after the stop: the kernel ring's last block.
            if stopping && n == 0 {
                break;
            }
        }
        Ok(ProducerCounters {
            id: self.id,
            captured: filler.finish(),
            kernel_drops: self.sock.stats().rx_kernel_drops,
            ..ProducerCounters::default()
        })
    }
}
