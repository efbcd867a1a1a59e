//! `dut.realtime = true`: which DuT kinds it applies to. It puts the threads nflab runs
//! as the DuT under SCHED_FIFO — the nflab data plane's and the link emulator's workers,
//! the udp relay's thread, and every thread of the ovs-vswitchd nflab starts (priority
//! 40, docs/sdn.md). Elsewhere nflab starts no thread of the DuT's own that it could
//! raise, so the key is refused in one sentence rather than ignored.

use crate::error::LabError;
use crate::spec::DutKind;

pub use crate::sys::cpu::DUT_PRIORITY as PRIORITY;

/// Refuse `dut.realtime = true` for `kind` where it cannot apply.
pub fn check(kind: DutKind) -> Result<(), LabError> {
    match super::driver(kind).why_not_realtime() {
        None => Ok(()),
        Some(why) => Err(LabError::Unsupported(format!(
            "dut.realtime = true does not apply to dut.kind = \"{}\": {why}; it applies to {}",
            kind.as_str(),
            super::registry::kinds_where(|d| d.why_not_realtime().is_none(), "and")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_is_refused_in_one_sentence_where_it_cannot_apply() {
        for kind in [
            DutKind::Nflab,
            DutKind::Link,
            DutKind::UdpRelay,
            DutKind::Ovs,
        ] {
            assert!(check(kind).is_ok(), "{}", kind.as_str());
        }
        for kind in [
            DutKind::LinuxRouter,
            DutKind::LinuxBridge,
            DutKind::Loopback,
            DutKind::Testpmd,
            DutKind::External,
        ] {
            let e = check(kind).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "dut.realtime = true does not apply to dut.kind = \"{}\"",
                    kind.as_str()
                )) && e.ends_with("it applies to nflab, link, ovs and udp-relay"),
                "{e}"
            );
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn a_spec_with_realtime_on_a_kernel_dut_is_refused_before_anything_runs() {
        let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-router\"\nrealtime = true\n";
        let e = crate::spec::Spec::parse(text, "t")
            .and_then(|s| s.check_supported())
            .unwrap_err()
            .to_string();
        assert!(e.contains("dut.kind = \"linux-router\""), "{e}");
        // Off is fine anywhere.
        let off = text.replace("true", "false");
        assert!(crate::spec::Spec::parse(&off, "t")
            .and_then(|s| s.check_supported())
            .is_ok());
    }
}
