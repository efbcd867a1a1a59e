//! `[hosts]` of the spec: the hosts of a real testbed by role, and how to
//! reach each (SSH, or this machine). What runs there is in the `hosts` module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
        check_entry(self, at)
    }
}

/// ssh options that would weaken or redirect host key checking.
const HOST_KEY_OPTIONS: [&str; 6] = [
    "stricthostkeychecking",
    "userknownhostsfile",
    "globalknownhostsfile",
    "hostkeyalias",
    "knownhostscommand",
    "updatehostkeys",
];

/// The `-o` options a spec may give ssh (lower case): how to authenticate,
/// connect and multiplex. Anything else could run a command here as root on
/// every call (`ProxyCommand`, `LocalCommand`, `Match exec`, `-F` and the files
/// they name) or hand root's agent to a host (`ForwardAgent`).
pub const ALLOWED_SSH_OPTIONS: [&str; 31] = [
    "addressfamily",
    "batchmode",
    "bindaddress",
    "bindinterface",
    "certificatefile",
    "ciphers",
    "compression",
    "connectionattempts",
    "connecttimeout",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "gssapiauthentication",
    "hostkeyalgorithms",
    "identitiesonly",
    "identityfile",
    "ipqos",
    "kbdinteractiveauthentication",
    "kexalgorithms",
    "loglevel",
    "macs",
    "passwordauthentication",
    "port",
    "preferredauthentications",
    "pubkeyacceptedalgorithms",
    "pubkeyauthentication",
    "rekeylimit",
    "serveraliveinterval",
    "serveralivecountmax",
    "tcpkeepalive",
    "user",
];

/// ssh flags a spec may give: those that take a value, and those that do not.
const FLAGS_WITH_VALUE: [char; 6] = ['i', 'l', 'c', 'm', 'b', 'o'];
const FLAGS_ALONE: [char; 5] = ['4', '6', 'C', 'q', 'v'];

/// Check `ssh_options` against the allow-list: Err names the first option
/// that is not allowed, in one sentence.
fn check_ssh_options(opts: &[String], at: &str) -> Result<(), String> {
    let refuse = |o: &str| {
        format!(
            "{at}: ssh_options {o:?} is not allowed: nflab gives ssh only -i FILE, -l USER, -c, -m, -b, -4, -6, -C, -q, -v and -o with one of {} (docs/experiments.md, Security)",
            ALLOWED_SSH_OPTIONS.join(", ")
        )
    };
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        if o.chars().any(char::is_control) {
            return Err(refuse(o));
        }
        let Some(flags) = o
            .strip_prefix('-')
            .filter(|f| !f.is_empty() && !f.starts_with('-'))
        else {
            return Err(refuse(o));
        };
        for (i, c) in flags.char_indices() {
            if FLAGS_ALONE.contains(&c) {
                continue;
            }
            if !FLAGS_WITH_VALUE.contains(&c) {
                return Err(refuse(o));
            }
            // The value is the rest of this word, or the next word.
            let rest = &flags[i + c.len_utf8()..];
            let value = if rest.is_empty() {
                match it.next() {
                    Some(v) => v.as_str(),
                    None => return Err(refuse(o)),
                }
            } else {
                rest
            };
            if value.chars().any(char::is_control) || value.is_empty() {
                return Err(refuse(o));
            }
            if c == 'o' && !dash_o_allowed(value) {
                return Err(refuse(value));
            }
            break;
        }
    }
    Ok(())
}

/// One `-o` value, `Key=Value` or `Key Value`: an allowed key and one word.
fn dash_o_allowed(value: &str) -> bool {
    let v = value.trim_start();
    let end = v
        .find(|c: char| c == '=' || c.is_whitespace())
        .unwrap_or(v.len());
    let key = v[..end].to_ascii_lowercase();
    let rest = v[end..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim();
    ALLOWED_SSH_OPTIONS.contains(&key.as_str())
        && !rest.is_empty()
        && !rest.contains(char::is_whitespace)
}

/// Check one host's address, options and pinned key; `at` names it.
pub fn check_entry(h: &HostEntry, at: &str) -> Result<(), String> {
    if h.is_local() {
        return Ok(());
    }
    let a = &h.address;
    if a.is_empty() || a.starts_with('-') || a.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "{at}: address = {a:?} is not an SSH destination: write user@host or host (no leading '-', no spaces)"
        ));
    }
    if let Some(o) = h.ssh_options.iter().find(|o| {
        let l = o.to_ascii_lowercase();
        HOST_KEY_OPTIONS.iter().any(|r| l.contains(r))
    }) {
        return Err(format!(
            "{at}: ssh_options {o:?} would change host key checking, which nflab keeps on: pin the key with host_key or add it to known_hosts"
        ));
    }
    check_ssh_options(&h.ssh_options, at)?;
    if let Some(k) = &h.host_key {
        let words: Vec<&str> = k.split_whitespace().collect();
        let typed = words.first().is_some_and(|t| {
            t.starts_with("ssh-") || t.starts_with("ecdsa-") || t.starts_with("sk-")
        });
        if words.len() < 2 || !typed || k.chars().any(|c| c.is_control()) {
            return Err(format!(
                "{at}: host_key = {k:?} is not an SSH public key: give the line of the host's ssh_host_*_key.pub (\"ssh-ed25519 AAAA…\")"
            ));
        }
    }
    Ok(())
}

/// The inventory, keyed by role ("loadgen", "dut").
pub type Inventory = BTreeMap<String, HostEntry>;
