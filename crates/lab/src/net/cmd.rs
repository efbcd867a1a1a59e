//! Commands that set up namespaces and links (`ip`, `sysctl`, `ethtool`), each
//! failure one sentence with the command and its stderr.

use std::process::Command;

use nflab_io::process::system_tool;

use crate::error::LabError;

/// Run `ip ARGS`; a failure is one sentence with the command and its stderr.
pub fn ip(args: &[&str]) -> Result<(), LabError> {
    run("ip", args)
}

/// `ethtool -K DEV tx off` in `ns` for each of `devs`: the kernel computes transmit
/// checksums itself. `who` is what needs it, the subject of the sentence when
/// ethtool is missing (`dut.kind = "ovs"`).
pub fn checksums_in_software(ns: &str, devs: &[&str], who: &str) -> Result<(), LabError> {
    for dev in devs {
        let out = Command::new(system_tool("ip"))
            .args(["netns", "exec", ns])
            .arg(system_tool("ethtool"))
            .args(["-K", dev, "tx", "off"])
            .output()
            .map_err(|e| {
                LabError::Host(format!("cannot run 'ip netns exec': {e}; install iproute2"))
            })?;
        if out.status.success() {
            continue;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::Topology(
            if err.contains("ethtool") && err.contains("No such file") {
                format!(
                    "{who} needs ethtool to have the kernel compute checksums on {}: install ethtool",
                    devs.join(" and ")
                )
            } else {
                format!("'ethtool -K {dev} tx off' failed: {}", err.trim())
            },
        ));
    }
    Ok(())
}

/// `sysctl -qw SETTINGS` in namespace `ns`.
pub fn sysctl(ns: &str, settings: &[&str]) -> Result<(), LabError> {
    let sysctl = system_tool("sysctl");
    let sysctl = sysctl.to_string_lossy();
    let mut args = vec!["netns", "exec", ns, &sysctl, "-qw"];
    args.extend_from_slice(settings);
    run("ip", &args)
}

fn run(prog: &str, args: &[&str]) -> Result<(), LabError> {
    let out = Command::new(system_tool(prog))
        .args(args)
        .output()
        .map_err(|e| LabError::Host(format!("cannot run '{prog}': {e}; install iproute2")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Topology(format!(
            "'{prog} {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
