//! `proxy.toml`: the emulated switch, its switches, table map, port map and
//! inter-switch links (docs/sdn.md). Every mistake is one sentence naming
//! the key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use crate::error::SdnError;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// `[proxy]`.
    pub proxy: ProxySection,
    /// `[[switch]]`: the real switches.
    #[serde(default, rename = "switch")]
    pub switches: Vec<SwitchEntry>,
    /// `[[table]]`: global table id → (switch, local table).
    #[serde(default, rename = "table")]
    pub tables: Vec<TableEntry>,
    /// `[[port]]`: global port → (switch, local port).
    #[serde(default, rename = "port")]
    pub ports: Vec<PortEntry>,
    /// `[[link]]`: inter-switch cables, `from` → `to`.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkEntry>,
}

/// `[proxy]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySection {
    /// Where the switches connect, e.g. "127.0.0.1:6653".
    pub listen: String,
    /// The controller the proxy connects to, e.g. "127.0.0.1:6633".
    pub controller: String,
    /// Datapath id of the emulated switch.
    #[serde(default = "default_dpid")]
    pub datapath_id: u64,
    /// The app pipeline, controller side first: "log", "multi-switch",
    /// "transparent" (default ["multi-switch"]).
    #[serde(default = "default_apps")]
    pub apps: Vec<String>,
    /// Control-channel log file of the "log" app.
    #[serde(default)]
    pub log: Option<String>,
    /// Seconds to wait for every switch to connect (default 30).
    #[serde(default = "default_wait")]
    pub connect_timeout_s: f64,
    /// Let `listen` be an address other hosts reach (default false: loopback
    /// only). Whoever reaches it can pose as a switch and, through the
    /// controller, program the others.
    #[serde(default)]
    pub allow_remote_switches: bool,
}

fn default_dpid() -> u64 {
    1
}
fn default_apps() -> Vec<String> {
    vec!["multi-switch".into()]
}
fn default_wait() -> f64 {
    30.0
}

/// `[[switch]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchEntry {
    /// Name used by the maps.
    pub name: String,
    /// Its datapath id, by which the proxy knows it when it connects.
    pub datapath_id: u64,
}

/// `[[table]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    /// Global table id the controller sees.
    pub id: u8,
    /// Switch name.
    pub switch: String,
    /// Table on that switch.
    pub local: u8,
}

/// `[[port]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortEntry {
    /// Global port number the controller sees (1, 2, … without gaps).
    pub id: u32,
    /// Switch name.
    pub switch: String,
    /// Port on that switch.
    pub local: u32,
}

/// `[[link]]`: a cable from `from`'s port `from_port` to `to`'s port `to_port`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEntry {
    /// Sending switch.
    pub from: String,
    /// Its port.
    pub from_port: u32,
    /// Receiving switch.
    pub to: String,
    /// Its port.
    pub to_port: u32,
}

/// Apps the pipeline knows.
pub const APPS: [&str; 3] = ["log", "multi-switch", "transparent"];

impl ProxyConfig {
    /// Read and check a file.
    pub fn load(path: &Path) -> Result<ProxyConfig, SdnError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SdnError::Config(format!("cannot read proxy config {}: {e}", path.display()))
        })?;
        let cfg: ProxyConfig = toml::from_str(&text).map_err(|e| {
            SdnError::Config(format!(
                "{}: {}",
                path.display(),
                e.to_string().lines().collect::<Vec<_>>().join(" ")
            ))
        })?;
        cfg.check()?;
        Ok(cfg)
    }

    /// The switch index of `name`.
    pub fn switch_index(&self, name: &str) -> Option<usize> {
        self.switches.iter().position(|s| s.name == name)
    }

    /// Check the maps against each other.
    pub fn check(&self) -> Result<(), SdnError> {
        let bad = |m: String| Err(SdnError::Config(m));
        if self.switches.is_empty() {
            return bad(
                "proxy config has no [[switch]]: name at least one switch (name, datapath_id)"
                    .into(),
            );
        }
        self.check_listen()?;
        for app in &self.proxy.apps {
            if !APPS.contains(&app.as_str()) {
                return bad(format!(
                    "proxy.apps has \"{app}\"; valid apps: {}",
                    APPS.join(", ")
                ));
            }
        }
        if self.proxy.apps.iter().any(|a| a == "transparent") && self.switches.len() != 1 {
            return bad(format!(
                "proxy.apps = \"transparent\" presents exactly one switch, but {} are configured: use \"multi-switch\"",
                self.switches.len()
            ));
        }
        let mut names = BTreeSet::new();
        let mut dpids = BTreeSet::new();
        for s in &self.switches {
            if !names.insert(s.name.as_str()) {
                return bad(format!("switch \"{}\" is configured twice", s.name));
            }
            if !dpids.insert(s.datapath_id) {
                return bad(format!(
                    "switch \"{}\" has datapath_id {:#x} like another switch",
                    s.name, s.datapath_id
                ));
            }
        }
        let known = |what: &str, name: &str| -> Result<(), SdnError> {
            if names.contains(name) {
                Ok(())
            } else {
                Err(SdnError::Config(format!(
                    "{what} names switch \"{name}\", which is not a [[switch]] (known: {})",
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                )))
            }
        };
        if self.tables.is_empty() {
            return bad("proxy config has no [[table]]: map global table 0 at least".into());
        }
        let mut ids = BTreeSet::new();
        let mut locals = BTreeSet::new();
        for t in &self.tables {
            known(&format!("table {}", t.id), &t.switch)?;
            if !ids.insert(t.id) {
                return bad(format!("table {} is mapped twice", t.id));
            }
            if !locals.insert((t.switch.as_str(), t.local)) {
                return bad(format!(
                    "table {} maps to local table {} of \"{}\", which another table has",
                    t.id, t.local, t.switch
                ));
            }
        }
        if !ids.contains(&0) {
            return bad(
                "no [[table]] has id = 0: the emulated pipeline starts at global table 0".into(),
            );
        }
        let mut port_ids: Vec<u32> = Vec::new();
        let mut local_ports = BTreeSet::new();
        for p in &self.ports {
            known(&format!("port {}", p.id), &p.switch)?;
            port_ids.push(p.id);
            if !local_ports.insert((p.switch.as_str(), p.local)) {
                return bad(format!(
                    "port {} maps to port {} of \"{}\", which another port has",
                    p.id, p.local, p.switch
                ));
            }
        }
        port_ids.sort_unstable();
        for (i, id) in port_ids.iter().enumerate() {
            let want = i as u32 + 1;
            if *id != want {
                return bad(format!(
                    "the port map has a gap: port {want} is missing (ports are numbered 1, 2, … without gaps; found {id})"
                ));
            }
        }
        for l in &self.links {
            known("link.from", &l.from)?;
            known("link.to", &l.to)?;
            if l.from == l.to {
                return bad(format!("link from \"{}\" to itself", l.from));
            }
        }
        // A switch that receives over a link keeps its local table 0 for the
        // proxy's entry rules (a GOTO may only go forward).
        let targets: BTreeSet<&str> = self.links.iter().map(|l| l.to.as_str()).collect();
        for t in &self.tables {
            if t.local == 0 && targets.contains(t.switch.as_str()) && t.id != 0 {
                return bad(format!(
                    "table {} maps to local table 0 of \"{}\", which receives over a [[link]]: its table 0 holds the proxy's entry rules, use local >= 1",
                    t.id, t.switch
                ));
            }
        }
        Ok(())
    }

    /// `listen` on loopback, unless `allow_remote_switches`.
    fn check_listen(&self) -> Result<(), SdnError> {
        use std::net::ToSocketAddrs;
        let listen = &self.proxy.listen;
        if self.proxy.allow_remote_switches {
            return Ok(());
        }
        let addrs: Vec<std::net::SocketAddr> = listen
            .to_socket_addrs()
            .map_err(|e| {
                SdnError::Config(format!(
                    "proxy.listen = \"{listen}\" is not an address and port ({e}): write e.g. \"127.0.0.1:6653\""
                ))
            })?
            .collect();
        match addrs.iter().find(|a| !a.ip().is_loopback()) {
            Some(a) => Err(SdnError::Config(format!(
                "proxy.listen = \"{listen}\" ({}) is not a loopback address: any host that reaches it could pose as a switch; listen on 127.0.0.1 or ::1, or set proxy.allow_remote_switches = true",
                a.ip()
            ))),
            None => Ok(()),
        }
    }

    /// Global table → (switch index, local table).
    pub fn table_map(&self) -> BTreeMap<u8, (usize, u8)> {
        self.tables
            .iter()
            .filter_map(|t| Some((t.id, (self.switch_index(&t.switch)?, t.local))))
            .collect()
    }
}
