//! The recorder: every probe frame that arrives becomes one record; frames of
//! background streams (flow ids from `BACKGROUND_FLOW_BASE`) are only counted.
//!
//! It keeps up by doing little per frame: parse the probe header, push a
//! 40-byte record into the writer's block buffer. Blocks reach the OS at
//! least every `flush_every_ns`, so a killed run loses at most that much.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nflab_io::{clock, AfPacketConfig, Layer, PacketIo, TsSource};
use nflab_record::{flags, Record, RecordError, RecordWriter};
use serde::Serialize;

use crate::error::LabError;

/// First flow id of background streams: the recorder counts flows from here on
/// instead of recording them.
pub const BACKGROUND_FLOW_BASE: u16 = 0x8000;
/// Flow ids reserved per background stream (stream i starts at base + i * span).
pub const BACKGROUND_FLOW_SPAN: u16 = 0x0800;
/// Flow id of the readiness probes sent before a run; never recorded.
pub const READY_FLOW: u16 = u16::MAX;

/// The recorder's ring. A TPACKET_V3 block is handed to user space when it
/// is full or after its retire timeout, so at low rates each block carries
/// few frames: the ring must have many blocks to ride out a recorder that is
/// descheduled for a while (256 × 256 KiB ≈ 1 s at 10 kpps even with 4 ms
/// blocks, and far more at high rates). The timeout only delays delivery to
/// the recorder; the timestamps are taken by the kernel at reception.
pub fn recorder_ring() -> AfPacketConfig {
    AfPacketConfig {
        rx: true,
        tx: false,
        rx_block_bytes: 256 << 10,
        rx_blocks: 256,
        rx_block_timeout_ms: 4,
        ..AfPacketConfig::default()
    }
}

/// What the recorder saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecorderReport {
    /// Probe frames recorded.
    pub probes: u64,
    /// Frames that were not nflab probes (ignored).
    pub foreign_frames: u64,
    /// Frames dropped by the kernel before the recorder read them.
    pub kernel_drops: u64,
    /// Source of the receive timestamps of the recorded frames.
    pub rx_timestamp: String,
    /// Records whose receive timestamp fell back to the application clock.
    pub app_timestamp_fallbacks: u64,
    /// Background frames (flow ids from `BACKGROUND_FLOW_BASE`): counted, not recorded.
    pub background: u64,
    /// Background frames per flow.
    pub background_flows: Vec<BackgroundCount>,
}

/// Background frames received on one flow.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BackgroundCount {
    /// Flow id.
    pub flow: u16,
    /// Frames received.
    pub received: u64,
}

/// Where the recorder puts its records: one `.nfr` writer, or a series of
/// size-bounded segments (`crate::run::record_segments`).
pub trait RecordSink {
    /// Add one record.
    fn push(&mut self, r: &Record) -> Result<(), RecordError>;
    /// Hand the pending records to the OS as a block.
    fn flush_block(&mut self) -> Result<(), RecordError>;
}

impl<W: Write> RecordSink for RecordWriter<W> {
    fn push(&mut self, r: &Record) -> Result<(), RecordError> {
        RecordWriter::push(self, r)
    }
    fn flush_block(&mut self) -> Result<(), RecordError> {
        RecordWriter::flush_block(self)
    }
}

/// Receive until `stop` is set, then drain what is already queued.
pub fn record<S: RecordSink + ?Sized>(
    io: &mut dyn PacketIo,
    writer: &mut S,
    stop: &AtomicBool,
    flush_every_ns: u64,
) -> Result<RecorderReport, LabError> {
    let mut report = RecorderReport::default();
    let payload_only = io.layer() == Layer::UdpPayload;
    let mut last_flush = clock::monotonic_ns();
    let mut write_error = None;
    let mut ts_source = TsSource::None;
    // Background counters by flow id - BACKGROUND_FLOW_BASE; grows to the largest seen.
    let mut background: Vec<u64> = Vec::new();
    loop {
        let stopping = stop.load(Ordering::Acquire);
        let n = io.rx_batch(256, Duration::from_millis(10), &mut |frame, meta| {
            let parsed = if payload_only {
                nflab_wire::parse_probe_payload(frame)
            } else {
                nflab_wire::parse_probe(frame)
            };
            let p = match parsed {
                Ok(p) if p.flow != READY_FLOW => p,
                _ => {
                    report.foreign_frames += 1;
                    return;
                }
            };
            if p.flow >= BACKGROUND_FLOW_BASE {
                let i = (p.flow - BACKGROUND_FLOW_BASE) as usize;
                if i >= background.len() {
                    background.resize(i + 1, 0);
                }
                background[i] += 1;
                return;
            }
            let (rx_ns, rx_flags) = match (meta.ts_ns, meta.ts_source) {
                (Some(t), TsSource::Hardware) => (t, flags::RX_TS_HARDWARE),
                (Some(t), TsSource::KernelSoftware) => (t, flags::RX_TS_KERNEL),
                (Some(t), _) => (t, 0),
                (None, _) => {
                    report.app_timestamp_fallbacks += 1;
                    (clock::realtime_ns(), 0)
                }
            };
            ts_source = meta.ts_source;
            // Frame sizes include the FCS, which veth and most NICs strip.
            let wire_len = if payload_only {
                0
            } else {
                (meta.wire_len + nflab_wire::FCS_BYTES).min(u16::MAX as usize) as u16
            };
            let rec = Record {
                seq: p.seq,
                flow: p.flow,
                tx_ns: p.tx_ns,
                rx_ns,
                wire_len,
                flags: rx_flags,
            };
            report.probes += 1;
            if let Err(e) = writer.push(&rec) {
                write_error.get_or_insert(e);
            }
        })?;
        if let Some(e) = write_error.take() {
            return Err(e.into());
        }
        let now = clock::monotonic_ns();
        if now - last_flush >= flush_every_ns {
            writer.flush_block()?;
            crate::failpoint::hit("recorder-flush");
            last_flush = now;
        }
        // Stop only once a poll after the stop request came back empty.
        if stopping && n == 0 {
            break;
        }
    }
    writer.flush_block()?;
    report.kernel_drops = io.stats().rx_kernel_drops;
    report.rx_timestamp = ts_source.as_str().to_string();
    report.background = background.iter().sum();
    report.background_flows = background
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| BackgroundCount {
            flow: BACKGROUND_FLOW_BASE + i as u16,
            received: *n,
        })
        .collect();
    Ok(report)
}
