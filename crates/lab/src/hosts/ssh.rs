//! Running `nflab remote` on a host of the inventory: over SSH (host key checking
//! always on, one multiplexed connection per host) or, for `address = "local"`,
//! as a child process. Every word of the remote command is single-quoted.

use std::process::Command;

use crate::error::LabError;
use crate::spec::hosts::HostEntry;

impl HostEntry {
    /// The ssh command that runs `nflab ARGS` on this host. ssh hands the
    /// remote shell one string, so every word is single-quoted for it.
    fn ssh(&self, args: &[&str], known_hosts: Option<&std::path::Path>) -> Command {
        let mut c = Command::new("ssh");
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]);
        // ssh keeps the first value of an option: these come before the user's.
        c.args(super::ssh_args::host_key_options(known_hosts));
        // One connection per host for the study, unless the spec's options
        // say how to multiplex (ControlMaster, ControlPath, ControlPersist).
        let own_control = self.ssh_options.iter().any(|o| {
            let o = o.trim_start_matches("-o").trim_start().to_ascii_lowercase();
            o.starts_with("control")
        });
        if !own_control {
            c.args(super::ssh_mux::options());
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
    ) -> Result<(Command, Option<super::ssh_args::PinnedKey>), LabError> {
        // Checked again here: a host can come from a journal or a stored spec
        // that no spec check saw (gc's replay, --resume of another tree).
        crate::spec::hosts::check_entry(self, &format!("host {}", self.address))
            .map_err(LabError::Host)?;
        let pinned = super::ssh_args::PinnedKey::write(self)?;
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
            if let Some(why) = super::ssh_args::host_key_refusal(&err, self) {
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
