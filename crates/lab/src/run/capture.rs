//! `[capture]`: a FlowScope-style capture during each run, on the recorder's
//! interface unless `iface` names another in the LoadGen namespace. Output in
//! `runs/NNN/capture/` (`capture.json`, `dump-NNN.pcapng`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;

use nflab_capture::{CaptureReport, Control};

use crate::error::LabError;
pub use crate::spec::capture::CaptureSection;
use crate::topo::Topology;

/// A capture running beside a run's traffic.
pub struct RunningCapture {
    ctl: Control,
    thread: JoinHandle<Result<CaptureReport, String>>,
}

/// Open the capture in the LoadGen namespace (every socket ready when this
/// returns) and let it run until [`RunningCapture::stop`].
pub fn start(
    section: &CaptureSection,
    topo: &Topology,
    out_dir: &Path,
) -> Result<RunningCapture, LabError> {
    let iface = section
        .iface
        .clone()
        .unwrap_or_else(|| topo.rec_iface.clone());
    let cfg = section
        .config(&iface, out_dir)
        .map_err(|e| LabError::Other(e.message))?;
    let ns = topo.lg_ns.clone();
    let ctl = Control::default();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let thread = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            let opened = crate::net::netns::NetnsGuard::enter(&ns)
                .map_err(|e| e.to_string())
                .and_then(|guard| {
                    nflab_capture::Capture::open(&cfg)
                        .map(|c| (guard, c))
                        .map_err(|e| e.to_string())
                });
            match opened {
                Ok((_guard, capture)) => {
                    let _ = ready_tx.send(Ok(()));
                    capture.run(&ctl, None).map_err(|e| e.to_string())
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.clone()));
                    Err(e)
                }
            }
        })
    };
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(RunningCapture { ctl, thread }),
        Ok(Err(e)) => Err(LabError::Other(format!("capture on {iface}: {e}"))),
        Err(_) => Err(LabError::Other(format!(
            "capture on {iface}: its thread ended before it was ready"
        ))),
    }
}

impl RunningCapture {
    /// End the capture; its dumps and `capture.json` are written when this returns.
    pub fn stop(self) -> Result<CaptureReport, LabError> {
        self.ctl.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(r) => r.map_err(LabError::Other),
            Err(_) => Err(LabError::Other("the capture thread panicked".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml_text: &str) -> CaptureSection {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn keys_map_onto_the_capture_config() {
        let s = section(
            "ring = \"64MiB\"\ntrigger = [\"udp port 7\"]\nanomaly = \"2:250us\"\nloss_burst = 3\npre = 0.5\npost = 0.25\n",
        );
        let c = s.config("lg1", Path::new("/tmp/x")).unwrap();
        assert_eq!(c.ring_bytes, 64 << 20);
        assert_eq!((c.pre_ns, c.post_ns), (500_000_000, 250_000_000));
        assert_eq!(c.triggers.len(), 3);
        assert_eq!(c.producer, nflab_capture::ProducerKind::DEFAULT);
        let c = section("producer = \"af_packet\"")
            .config("lg1", Path::new("/tmp/x"))
            .unwrap();
        assert_eq!(c.producer, nflab_capture::ProducerKind::AfPacket);
    }

    #[test]
    fn bad_values_are_one_sentence_naming_the_key() {
        for (text, key, said) in [
            ("ring = \"big\"", "ring", "capture.ring"),
            ("pre = -1.0", "pre", "capture.pre"),
            ("anomaly = \"2\"", "anomaly", "capture.anomaly"),
            ("loss_burst = 0", "loss_burst", "capture.loss_burst"),
            ("producer = \"pcap\"", "producer", "capture.producer"),
            ("trigger = [\"udp port x\"]", "trigger", "udp port x"),
            (
                "dump_filter = \"udp port x\"",
                "dump_filter",
                "capture.dump_filter",
            ),
        ] {
            let e = section(text)
                .config("lg1", Path::new("/tmp/x"))
                .unwrap_err();
            assert_eq!(e.key, key, "{text}");
            let e = e.message;
            assert!(e.contains(said) && !e.contains('\n'), "{text}: {e}");
        }
        assert!(toml::from_str::<CaptureSection>("rings = \"1GiB\"").is_err());
    }
}
