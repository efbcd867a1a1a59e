//! Time-travel dumps: the packets from `pre` before to `post` after a trigger,
//! taken from the ring, written as pcapng with nanosecond timestamps.
//!
//! Windows are planned first ([`DumpPlan`]): a trigger inside a window not yet
//! written extends it, so overlapping triggers give one dump; a trigger inside
//! a window already written starts its new window where the old one ended, so
//! no packet is ever written twice. A window is written once the clock is past
//! its end plus the producers' hand-over timeout, when every queue that can
//! hold its packets is in the ring.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::{SectionHeaderBlock, SectionHeaderOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness};

use crate::qq::InnerQueue;
use crate::trigger::{Filter, Fired};
use crate::CaptureError;

/// A span of time to dump and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Dump number, in order of creation (names the file).
    pub id: usize,
    pub from_ns: u64,
    pub to_ns: u64,
    /// Every trigger that opened or extended it.
    pub reasons: Vec<Fired>,
}

/// The windows to write, in time order.
#[derive(Debug, Default)]
pub struct DumpPlan {
    pre_ns: u64,
    post_ns: u64,
    pending: Vec<Window>,
    /// End of the last window written: nothing before it is written again.
    written_to_ns: Option<u64>,
    next_id: usize,
}

impl DumpPlan {
    pub fn new(pre_ns: u64, post_ns: u64) -> DumpPlan {
        DumpPlan {
            pre_ns,
            post_ns,
            ..DumpPlan::default()
        }
    }

    /// Plan the window of a trigger: a new one, or an extension of the open one.
    pub fn add(&mut self, fired: Fired) {
        let mut from_ns = fired.at_ns.saturating_sub(self.pre_ns);
        let to_ns = fired.at_ns.saturating_add(self.post_ns);
        if let Some(done) = self.written_to_ns {
            if to_ns <= done {
                // Wholly inside what was written: nothing new to write.
                return;
            }
            from_ns = from_ns.max(done + 1);
        }
        if let Some(last) = self.pending.last_mut() {
            if from_ns <= last.to_ns {
                last.to_ns = last.to_ns.max(to_ns);
                last.reasons.push(fired);
                return;
            }
        }
        self.pending.push(Window {
            id: self.next_id,
            from_ns,
            to_ns,
            reasons: vec![fired],
        });
        self.next_id += 1;
    }

    /// The windows that end before `until_ns`, removed from the plan.
    pub fn due(&mut self, until_ns: u64) -> Vec<Window> {
        let n = self
            .pending
            .iter()
            .take_while(|w| w.to_ns < until_ns)
            .count();
        let due: Vec<Window> = self.pending.drain(..n).collect();
        if let Some(w) = due.last() {
            self.written_to_ns = Some(w.to_ns);
        }
        due
    }

    /// Every window still planned (the capture is ending).
    pub fn rest(&mut self) -> Vec<Window> {
        self.due(u64::MAX)
    }
}

/// What one dump holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DumpInfo {
    /// File name inside the output directory.
    pub file: String,
    pub from_ns: u64,
    pub to_ns: u64,
    /// Packets written.
    pub packets: u64,
    /// Packets written, per producer.
    #[serde(skip)]
    pub per_producer: Vec<u64>,
    /// The triggers of the window.
    pub reasons: Vec<Fired>,
    /// Set when writing failed: the file is valid up to its last complete packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the dumper writes into each file's section header.
pub struct DumpContext<'a> {
    pub dir: &'a Path,
    pub iface: &'a str,
    pub snaplen: u32,
    pub producers: usize,
    pub filter: Option<&'a Filter>,
}

/// Write `window`'s packets from `queues` (those overlapping it) to
/// `ctx.dir/dump-NNN.pcapng`, in timestamp order.
pub fn write(
    ctx: &DumpContext<'_>,
    window: &Window,
    queues: &[Arc<InnerQueue>],
) -> Result<DumpInfo, CaptureError> {
    let file = format!("dump-{:03}.pcapng", window.id);
    let path = ctx.dir.join(&file);
    let mut picked: Vec<(u64, usize, crate::qq::Frame<'_>)> = Vec::new();
    for q in queues {
        for f in q.frames() {
            if f.ts_ns < window.from_ns || f.ts_ns > window.to_ns {
                continue;
            }
            if ctx.filter.is_some_and(|flt| !flt.matches(f.data)) {
                continue;
            }
            picked.push((f.ts_ns, q.producer, f));
        }
    }
    // Producers' queues interleave in time; a stable sort keeps each one's order.
    picked.sort_by_key(|(ts, _, _)| *ts);
    let mut info = DumpInfo {
        file,
        from_ns: window.from_ns,
        to_ns: window.to_ns,
        packets: 0,
        per_producer: vec![0; ctx.producers],
        reasons: window.reasons.clone(),
        error: None,
    };
    let out = File::create(&path).map_err(|e| CaptureError::io(&path, e))?;
    let mut file = SafeFile::new(out, path.clone());
    // pcap-file writes a block in several pieces: serialize each into memory
    // and hand it to the file whole, so the file only ever ends on a block.
    let header = section_header(ctx, window);
    let mut pcapng = PcapNgWriter::with_section_header(Vec::new(), header)
        .expect("writing to memory cannot fail");
    let mut result = file.write_block(pcapng.get_mut());
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: ctx.snaplen,
        options: vec![
            InterfaceDescriptionOption::IfName(Cow::Owned(ctx.iface.to_string())),
            // Timestamps in nanoseconds: 10^-9.
            InterfaceDescriptionOption::IfTsResol(9),
        ],
    };
    if result.is_ok() {
        pcapng
            .write_pcapng_block(idb)
            .expect("writing to memory cannot fail");
        result = file.write_block(pcapng.get_mut());
    }
    // Where each packet's block ends in the file, and whose it is.
    let mut ends: Vec<(u64, usize)> = Vec::with_capacity(picked.len());
    for (ts, producer, f) in &picked {
        if result.is_err() {
            break;
        }
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(*ts),
            original_len: f.wire_len,
            data: Cow::Borrowed(f.data),
            options: vec![],
        };
        pcapng
            .write_pcapng_block(epb)
            .expect("writing to memory cannot fail");
        result = file.write_block(pcapng.get_mut());
        if result.is_ok() {
            ends.push((file.written, *producer));
        }
    }
    if let Err(e) = result
        .map_err(|e| e.to_string())
        .and_then(|_| file.finish())
    {
        info.error = Some(file.truncate_note(&e));
    }
    // Only what is on disk counts as dumped.
    for &(_, producer) in ends.iter().take_while(|(end, _)| *end <= file.good) {
        info.packets += 1;
        info.per_producer[producer] += 1;
    }
    Ok(info)
}

fn section_header<'a>(ctx: &DumpContext<'_>, window: &Window) -> SectionHeaderBlock<'a> {
    let mut comments = vec![format!(
        "nflab capture on {}: packets from {} ns to {} ns (CLOCK_REALTIME, kernel receive stamps)",
        ctx.iface, window.from_ns, window.to_ns
    )];
    for r in &window.reasons {
        comments.push(format!("trigger at {} ns: {}", r.at_ns, r.reason));
    }
    if let Some(f) = ctx.filter {
        comments.push(format!("dump filter: {}", f.expression()));
    }
    SectionHeaderBlock {
        endianness: Endianness::native(),
        major_version: 1,
        minor_version: 0,
        section_length: -1,
        options: comments
            .into_iter()
            .map(|c| SectionHeaderOption::Comment(Cow::Owned(c)))
            .chain(std::iter::once(SectionHeaderOption::UserApplication(
                Cow::Owned(format!("nflab {}", env!("CARGO_PKG_VERSION"))),
            )))
            .collect(),
    }
}

/// A file that remembers where its last complete block ended, so a write that
/// fails (a full disk) can cut the file back to a valid pcapng.
struct SafeFile {
    /// None once cut back: nothing more reaches the file.
    inner: Option<BufWriter<File>>,
    path: PathBuf,
    /// Bytes handed to `write` so far.
    written: u64,
    /// Bytes on disk after the last successful flush: always whole blocks,
    /// since a block goes into the buffer whole or triggers a flush first.
    good: u64,
}

/// Small enough that a nearly full disk still takes whole buffers.
const DUMP_BUFFER_BYTES: usize = 16 << 10;

impl SafeFile {
    fn new(f: File, path: PathBuf) -> SafeFile {
        SafeFile {
            inner: Some(BufWriter::with_capacity(DUMP_BUFFER_BYTES, f)),
            path,
            written: 0,
            good: 0,
        }
    }

    fn writer(&mut self) -> std::io::Result<&mut BufWriter<File>> {
        self.inner
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the dump was cut back after an error"))
    }

    fn finish(&mut self) -> Result<(), String> {
        let w = self.writer().map_err(|e| e.to_string())?;
        w.flush()
            .and_then(|_| w.get_ref().sync_data())
            .map_err(|e| e.to_string())?;
        self.good = self.written;
        Ok(())
    }

    /// Drop what is buffered, cut the file back to whole blocks, and say so.
    fn truncate_note(&mut self, error: &str) -> String {
        let keep = self.good;
        if let Some(w) = self.inner.take() {
            // into_parts does not flush: the buffered tail never reaches the file.
            let (file, _unwritten) = w.into_parts();
            let _ = file.set_len(keep);
        }
        format!(
            "writing {} failed ({error}); the file is valid pcapng up to its last complete packet ({keep} bytes)",
            self.path.display()
        )
    }
}

impl SafeFile {
    /// Append one whole block (taken from `block`, which is left empty).
    fn write_block(&mut self, block: &mut Vec<u8>) -> std::io::Result<()> {
        let w = self.writer()?;
        if w.buffer().len() + block.len() > w.capacity() {
            w.flush()?;
            self.good = self.written;
        }
        self.writer()?.write_all(block)?;
        self.written += block.len() as u64;
        block.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(at_ns: u64) -> Fired {
        Fired {
            at_ns,
            reason: format!("t{at_ns}"),
        }
    }

    #[test]
    fn overlapping_triggers_extend_one_window() {
        let mut p = DumpPlan::new(100, 50);
        p.add(fired(1000)); // 900..1050
        p.add(fired(1080)); // 980..1130: overlaps, extends
        p.add(fired(2000)); // 1900..2050: new
        let due = p.rest();
        assert_eq!(due.len(), 2);
        assert_eq!(
            (due[0].from_ns, due[0].to_ns, due[0].reasons.len()),
            (900, 1130, 2)
        );
        assert_eq!((due[1].id, due[1].from_ns, due[1].to_ns), (1, 1900, 2050));
    }

    #[test]
    fn a_trigger_after_a_written_window_never_writes_a_packet_twice() {
        let mut p = DumpPlan::new(100, 50);
        p.add(fired(1000)); // 900..1050
        assert_eq!(p.due(1051).len(), 1);
        p.add(fired(1020)); // 920..1070 -> 1051..1070
        p.add(fired(1010)); // 910..1060 -> extends nothing new beyond 1070
        let due = p.rest();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].from_ns, due[0].to_ns), (1051, 1070));
        // Wholly inside what was written: nothing.
        p.add(fired(1000));
        assert!(p.rest().is_empty());
    }

    #[test]
    fn windows_fall_due_only_after_their_end() {
        let mut p = DumpPlan::new(10, 10);
        p.add(fired(100));
        assert!(p.due(110).is_empty());
        assert_eq!(p.due(111).len(), 1);
    }
}
