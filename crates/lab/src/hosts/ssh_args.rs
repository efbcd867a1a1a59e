//! What nflab gives ssh from a spec, checked: the destination, host key
//! checking (always on: known_hosts, or a key pinned with `host_key`), and
//! the one sentence when a host presents another key.
//!
//! The remote command itself is built from single-quoted words
//! (`hosts::ssh::shell_quote`); nothing of the spec reaches the
//! remote shell unquoted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::LabError;
use crate::spec::hosts::HostEntry;

/// Alias under which a pinned key is looked up (the file holds only it).
const PINNED_ALIAS: &str = "nflab-pinned";

/// Options that make ssh check the host key: against the pinned key's file
/// when given, else against known_hosts (never asking, never accepting a new key).
pub fn host_key_options(pinned: Option<&Path>) -> Vec<String> {
    let mut v = vec!["-o".into(), "StrictHostKeyChecking=yes".into()];
    if let Some(p) = pinned {
        v.extend([
            "-o".into(),
            format!("UserKnownHostsFile={}", p.display()),
            "-o".into(),
            "GlobalKnownHostsFile=/dev/null".into(),
            "-o".into(),
            format!("HostKeyAlias={PINNED_ALIAS}"),
        ]);
    }
    v
}

/// A known_hosts file holding one pinned key, for as long as one ssh runs.
pub struct PinnedKey {
    path: PathBuf,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl PinnedKey {
    /// The file of `h.host_key`, or None when no key is pinned (or the host is this one).
    pub fn write(h: &HostEntry) -> Result<Option<PinnedKey>, LabError> {
        let Some(key) = h.host_key.as_deref().filter(|_| !h.is_local()) else {
            return Ok(None);
        };
        let tmp = std::env::temp_dir();
        let stem = format!(
            "nflab-known-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut words = key.split_whitespace();
        let line = format!(
            "{PINNED_ALIAS} {} {}\n",
            words.next().unwrap_or(""),
            words.next().unwrap_or("")
        );
        // A fresh name made exclusively: a symlink planted in the temp directory
        // is never followed, and nobody swaps the key ssh trusts.
        let (path, mut f) = nflab_io::safe_fs::create_fresh_file(&tmp, &stem, 0o600)
            .map_err(|e| LabError::artifact(&tmp.join(&stem), e))?;
        let key = PinnedKey { path };
        f.write_all(line.as_bytes())
            .map_err(|e| LabError::artifact(&key.path, e))?;
        Ok(Some(key))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PinnedKey {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Remove the pinned-key files (`nflab-known-<pid>-<n>` in the temp dir) of
/// processes that are gone (a controller killed during an ssh call); returns
/// their names.
pub fn remove_dead_pinned_keys() -> Vec<String> {
    crate::sys::orphans::temp_entries_of_dead_pids("nflab-known-")
        .into_iter()
        .filter(|(name, _)| std::fs::remove_file(std::env::temp_dir().join(name)).is_ok())
        .map(|(name, _)| name)
        .collect()
}

/// One sentence when ssh's stderr says it refused the host's key.
pub fn host_key_refusal(stderr: &str, h: &HostEntry) -> Option<String> {
    let refused = [
        "Host key verification failed",
        "REMOTE HOST IDENTIFICATION HAS CHANGED",
        "host key is known for",
    ]
    .iter()
    .any(|m| stderr.contains(m));
    if !refused {
        return None;
    }
    let host = h.address.rsplit('@').next().unwrap_or(&h.address);
    Some(match h.host_key {
        Some(_) => format!(
            "host {} presented an SSH host key other than its pinned host_key: refused (read its key with `ssh-keyscan -p {} {host}` and compare)",
            h.address,
            h.port.unwrap_or(22)
        ),
        None => format!(
            "host {} presented an SSH host key that known_hosts does not hold: refused (add it to ~/.ssh/known_hosts or pin it with host_key)",
            h.address
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::hosts::check_entry;

    fn host(address: &str) -> HostEntry {
        HostEntry {
            address: address.into(),
            ..Default::default()
        }
    }

    #[test]
    fn options_and_destinations_that_ssh_would_misread_are_refused() {
        assert!(check_entry(&host("root@198.18.254.2"), "h").is_ok());
        for bad in ["-oProxyCommand=touch /tmp/x", "a b", "x\ny", ""] {
            let e = check_entry(&host(bad), "pair \"a\" dut").unwrap_err();
            assert!(
                e.contains("not an SSH destination") && !e.contains('\n'),
                "{e}"
            );
        }
        let mut h = host("root@h");
        h.ssh_options = vec!["-o".into(), "StrictHostKeyChecking=no".into()];
        assert!(check_entry(&h, "h").unwrap_err().contains("host key"));
        let mut h = host("root@h");
        h.host_key = Some("AAAAC3Nza".into());
        assert!(check_entry(&h, "h").unwrap_err().contains("host_key"));
    }

    #[test]
    fn ssh_options_that_run_commands_here_are_refused_and_the_rest_pass() {
        let with = |opts: &[&str]| {
            let mut h = host("root@198.18.254.2");
            h.ssh_options = opts.iter().map(|o| o.to_string()).collect();
            check_entry(&h, "hosts.dut")
        };
        for ok in [
            &["-i", "/root/.ssh/lab", "-o", "LogLevel=ERROR"][..],
            &["-oIdentityFile=/root/.ssh/lab", "-4", "-vvv", "-C"],
            &["-o", "ServerAliveInterval 5", "-o", "ControlPath=none"],
            &["-l", "lab", "-ilab.key", "-o", "User=lab"],
        ] {
            assert!(with(ok).is_ok(), "{ok:?}: {:?}", with(ok));
        }
        for bad in [
            &["-o", "ProxyCommand=touch /tmp/pwned"][..],
            &["-oProxyCommand=sh -c id"],
            &["-o", "LocalCommand=id", "-o", "PermitLocalCommand=yes"],
            &["-o", "PermitLocalCommand yes"],
            &["-F", "/tmp/evil_config"],
            &["-F/tmp/evil_config"],
            &["-4F", "/tmp/evil_config"],
            &["-J", "jump"],
            &["-o", "ProxyJump=jump"],
            &["-o", "Match exec \"id\""],
            &["-o", "Include /tmp/x"],
            &["-o", "ForwardAgent=yes"],
            &["-o", "IdentityFile=/a ProxyCommand=id"],
            &["-E", "/etc/passwd"],
            &["--", "x"],
            &["-"],
            &["-i"],
            &["plain-word"],
        ] {
            let e = with(bad).unwrap_err();
            assert!(
                e.contains("is not allowed") && e.contains("hosts.dut") && !e.contains('\n'),
                "{bad:?}: {e}"
            );
        }
        // Checked again where ssh is run: a host from a journal met no spec check.
        let mut h = host("root@198.18.254.2");
        h.ssh_options = vec!["-oProxyCommand=false".into()];
        let e = h.remote(&["info"]).unwrap_err().to_string();
        assert!(e.contains("is not allowed"), "{e}");
    }

    #[test]
    fn a_pinned_key_is_a_one_line_known_hosts_file_gone_on_drop() {
        let mut h = host("root@h");
        h.host_key = Some("ssh-ed25519 AAAAC3NzaC1 root@box".into());
        let p = PinnedKey::write(&h).unwrap().unwrap();
        let text = std::fs::read_to_string(p.path()).unwrap();
        assert_eq!(text, "nflab-pinned ssh-ed25519 AAAAC3NzaC1\n");
        let path = p.path().to_path_buf();
        let opts = host_key_options(Some(&path)).join(" ");
        assert!(opts.starts_with("-o StrictHostKeyChecking=yes"), "{opts}");
        assert!(opts.contains("HostKeyAlias=nflab-pinned"), "{opts}");
        drop(p);
        assert!(!path.exists());
    }

    #[test]
    fn a_pinned_key_never_follows_a_planted_symlink() {
        use std::os::unix::fs::PermissionsExt;
        // Symlinks at the names the next keys of this process could take, as
        // another user could plant them in the temp directory.
        let tmp = std::env::temp_dir();
        let victim = tmp.join(format!("nflab-known-victim-{}", std::process::id()));
        std::fs::write(&victim, b"precious\n").unwrap();
        let next = NEXT.load(Ordering::Relaxed);
        let links: Vec<PathBuf> = (next..next + 64)
            .map(|n| tmp.join(format!("nflab-known-{}-{n}", std::process::id())))
            .collect();
        for l in &links {
            let _ = std::os::unix::fs::symlink(&victim, l);
        }
        let mut h = host("root@h");
        h.host_key = Some("ssh-ed25519 AAAAC3NzaC1".into());
        let written = PinnedKey::write(&h);
        let after = std::fs::read(&victim);
        for l in &links {
            let _ = std::fs::remove_file(l);
        }
        let _ = std::fs::remove_file(&victim);
        let p = written.unwrap().unwrap();
        assert_eq!(
            after.unwrap(),
            b"precious\n",
            "the key went through a symlink"
        );
        let meta = std::fs::symlink_metadata(p.path()).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(p.path()).unwrap(),
            "nflab-pinned ssh-ed25519 AAAAC3NzaC1\n"
        );
    }

    #[test]
    fn a_refused_key_is_one_sentence() {
        let mut h = host("root@198.18.254.2");
        let msg = host_key_refusal("Host key verification failed.\r\n", &h).unwrap();
        assert!(msg.contains("known_hosts") && !msg.contains('\n'), "{msg}");
        h.host_key = Some("ssh-ed25519 AAAA".into());
        let msg = host_key_refusal("Host key verification failed.\r\n", &h).unwrap();
        assert!(msg.contains("pinned host_key"), "{msg}");
        assert!(host_key_refusal("Connection refused", &h).is_none());
    }
}
