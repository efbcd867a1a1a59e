//! What this host offers the monitors, for `nflab doctor` and for refusing a spec
//! with a monitor before anything starts.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use serde::Serialize;

use crate::skel::caps::CapsSkelBuilder;
use crate::MonitorError;

/// Where the kernel's own BTF is (CO-RE relocations and tp_btf need it).
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Environment variable naming another path to probe for the kernel's BTF instead
/// of [`VMLINUX_BTF`]: the fault tests point it at a missing file to play a host
/// without BTF (the probe then refuses exactly as on such a host).
pub const BTF_PATH_ENV: &str = "NFLAB_BTF_PATH";

/// The path probed for the kernel's BTF: `$NFLAB_BTF_PATH`, else [`VMLINUX_BTF`].
pub fn btf_path() -> std::path::PathBuf {
    std::env::var_os(BTF_PATH_ENV)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| VMLINUX_BTF.into())
}

/// Each capability: `Ok` or why not.
#[derive(Debug, Clone, Serialize)]
pub struct Caps {
    /// Kernel BTF present.
    pub btf: Result<(), String>,
    /// A BTF tracepoint (tp_btf) program loads.
    pub tp_btf: Result<(), String>,
    /// An fentry program loads (the monitors do not need it).
    pub fentry: Result<(), String>,
}

fn load_one(tp_btf: bool) -> Result<(), String> {
    let mut obj = MaybeUninit::uninit();
    let mut open = CapsSkelBuilder::default()
        .open(&mut obj)
        .map_err(|e| e.to_string())?;
    open.progs.probe_fentry.set_autoload(!tp_btf);
    open.progs.probe_tp_btf.set_autoload(tp_btf);
    open.load().map(drop).map_err(|e| e.to_string())
}

/// Probe this host (root needed for the loads). libbpf's own messages about the
/// refused load are silenced: the result says it in one line.
pub fn probe() -> Caps {
    libbpf_rs::set_print(None);
    let path = btf_path();
    let btf = if path.exists() {
        Ok(())
    } else {
        Err(format!(
            "{} is missing (a kernel built without CONFIG_DEBUG_INFO_BTF)",
            path.display()
        ))
    };
    let (tp_btf, fentry) = if btf.is_ok() {
        (load_one(true), load_one(false))
    } else {
        let e = Err("needs kernel BTF".to_string());
        (e.clone(), e)
    };
    Caps {
        btf,
        tp_btf,
        fentry,
    }
}

/// `Ok` when the monitors can run here, else one sentence saying what is missing.
pub fn require() -> Result<(), MonitorError> {
    let c = probe();
    if let Err(e) = c.btf {
        return Err(MonitorError::Unsupported(format!(
            "[monitor] needs kernel BTF, and {e}: run without [monitor] or on a kernel with BTF"
        )));
    }
    if let Err(e) = c.tp_btf {
        return Err(MonitorError::Unsupported(format!(
            "[monitor] needs BTF tracepoint (tp_btf) programs, which this kernel refuses ({e}); `nflab doctor` shows what the host offers"
        )));
    }
    Ok(())
}
