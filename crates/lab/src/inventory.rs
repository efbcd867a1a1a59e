//! `[hosts]` of the spec: the hosts of a real testbed by role, and how to
//! reach each (SSH, or this machine). What runs there is in [`crate::hosts`].

use std::collections::BTreeMap;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::LabError;

/// One host of the inventory, `[hosts.<role>]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// "local", or an SSH destination such as `root@192.0.2.7`.
    pub address: String,
    /// SSH port.
    #[serde(default)]
    pub port: Option<u16>,
    /// Extra ssh arguments, e.g. `["-i", "/root/.ssh/lab"]`.
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// Path of the nflab binary on that host.
    #[serde(default)]
    pub nflab: Option<String>,
    /// LoadGen: network namespace to run in on this host.
    #[serde(default)]
    pub netns: Option<String>,
    /// LoadGen: interface the generator sends on.
    #[serde(default)]
    pub tx_iface: Option<String>,
    /// LoadGen: interface the recorder listens on.
    #[serde(default)]
    pub rx_iface: Option<String>,
    /// DuT: interface facing the generator.
    #[serde(default)]
    pub ingress_iface: Option<String>,
    /// DuT: interface facing the recorder.
    #[serde(default)]
    pub egress_iface: Option<String>,
}

impl HostEntry {
    /// True for the machine nflab runs on.
    pub fn is_local(&self) -> bool {
        self.address == "local"
    }

    /// The ssh command that runs `nflab ARGS` on this host. ssh hands the
    /// remote shell one string, so every word is single-quoted for it.
    fn ssh(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ssh");
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]);
        if let Some(p) = self.port {
            c.args(["-p", &p.to_string()]);
        }
        c.args(&self.ssh_options);
        c.arg(&self.address).arg("--");
        let words: Vec<String> = std::iter::once(self.nflab.as_deref().unwrap_or("nflab"))
            .chain(args.iter().copied())
            .map(shell_quote)
            .collect();
        c.arg(words.join(" "));
        c
    }

    /// Run `nflab remote ARGS` on this host and parse its JSON answer.
    pub fn remote(&self, args: &[&str]) -> Result<serde_json::Value, LabError> {
        let out = if self.is_local() {
            Command::new(std::env::current_exe().map_err(|e| LabError::Host(e.to_string()))?)
                .arg("remote")
                .args(args)
                .output()
        } else {
            let mut all = vec!["remote"];
            all.extend_from_slice(args);
            self.ssh(&all).output()
        }
        .map_err(|e| {
            LabError::Host(format!(
                "cannot run ssh for host {}: {e}; install openssh-client",
                self.address
            ))
        })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            return Err(LabError::Host(format!(
                "host {} did not carry out `nflab remote {}`: {last}",
                self.address,
                args.first().unwrap_or(&"")
            )));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| {
            LabError::Host(format!(
                "host {} answered `nflab remote {}` with something that is not JSON ({e}): is the same nflab installed there?",
                self.address,
                args.first().unwrap_or(&"")
            ))
        })
    }
}

/// Quote a word for a POSIX shell: 'it'\''s'.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The inventory, keyed by role ("loadgen", "dut").
pub type Inventory = BTreeMap<String, HostEntry>;
