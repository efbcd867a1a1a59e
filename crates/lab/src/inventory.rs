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
    /// Extra ssh arguments, e.g. `["-i", "/root/.ssh/lab"]`. Host key checking
    /// is nflab's: options that would turn it off are refused.
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// The host's SSH public key, pinned (`"ssh-ed25519 AAAA…"`, as in its
    /// `/etc/ssh/ssh_host_ed25519_key.pub`); without it the key must be in
    /// known_hosts. A host that presents another key is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
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

    /// Check what ssh is given from the spec, before anything runs: the
    /// address must be a destination, not an option, and the options must not
    /// turn host key checking off. `at` names the host in the sentence.
    pub fn check_address(&self, at: &str) -> Result<(), String> {
        crate::ssh_args::check_entry(self, at)
    }

    /// The ssh command that runs `nflab ARGS` on this host. ssh hands the
    /// remote shell one string, so every word is single-quoted for it.
    fn ssh(&self, args: &[&str], known_hosts: Option<&std::path::Path>) -> Command {
        let mut c = Command::new("ssh");
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]);
        // ssh keeps the first value of an option: these come before the user's.
        c.args(crate::ssh_args::host_key_options(known_hosts));
        // One connection per host for the study, unless the spec's options
        // say how to multiplex (ControlMaster, ControlPath, ControlPersist).
        let own_control = self.ssh_options.iter().any(|o| {
            let o = o.trim_start_matches("-o").trim_start().to_ascii_lowercase();
            o.starts_with("control")
        });
        if !own_control {
            c.args(crate::ssh_mux::options());
        }
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
        let out = self.remote_output(args, std::process::Stdio::piped())?;
        self.answer(args, out)
    }

    /// Run `nflab remote ARGS` on this host with its stdout going to `stdout`.
    pub fn remote_output(
        &self,
        args: &[&str],
        stdout: std::process::Stdio,
    ) -> Result<std::process::Output, LabError> {
        let (mut cmd, _pinned) = self.remote_command(args)?;
        let out = cmd
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|c| c.wait_with_output())
            .map_err(|e| {
                LabError::Host(format!(
                    "cannot run ssh for host {}: {e}; install openssh-client",
                    self.address
                ))
            })?;
        Ok(out)
    }

    /// The command that runs `nflab remote ARGS` on this host, and the pinned
    /// key's file it needs until it ends.
    pub fn remote_command(
        &self,
        args: &[&str],
    ) -> Result<(Command, Option<crate::ssh_args::PinnedKey>), LabError> {
        let pinned = crate::ssh_args::PinnedKey::write(self)?;
        let cmd = if self.is_local() {
            let mut c =
                Command::new(std::env::current_exe().map_err(|e| LabError::Host(e.to_string()))?);
            c.arg("remote").args(args);
            c
        } else {
            let mut all = vec!["remote"];
            all.extend_from_slice(args);
            self.ssh(&all, pinned.as_ref().map(|p| p.path()))
        };
        Ok((cmd, pinned))
    }

    /// The JSON answer of `nflab remote ARGS`, or its failure in one sentence.
    fn answer(
        &self,
        args: &[&str],
        out: std::process::Output,
    ) -> Result<serde_json::Value, LabError> {
        self.check_status(args, &out)?;
        serde_json::from_slice(&out.stdout).map_err(|e| {
            LabError::Host(format!(
                "host {} answered `nflab remote {}` with something that is not JSON ({e}): is the same nflab installed there?",
                self.address,
                args.first().unwrap_or(&"")
            ))
        })
    }

    /// Err with the remote's last error line when `out` failed.
    pub fn check_status(&self, args: &[&str], out: &std::process::Output) -> Result<(), LabError> {
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if let Some(why) = crate::ssh_args::host_key_refusal(&err, self) {
                return Err(LabError::Host(why));
            }
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
        Ok(())
    }
}

/// Quote a word for a POSIX shell: 'it'\''s'.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The inventory, keyed by role ("loadgen", "dut").
pub type Inventory = BTreeMap<String, HostEntry>;
