//! The LoadGen host's side of a host pair (`nflab remote lg-macs|loadgen|fetch|clean`,
//! called over SSH by the controller, `study::pairs`): the generator and the
//! recorder of one run on the pair's interfaces, analysed here with the same
//! code as a local run, into a scratch directory the controller then fetches
//! file by file and removes.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use nflab_wire::MacAddr;

use crate::artifacts::files::write_json;
use crate::error::LabError;
use crate::run::measure;
use crate::run::plan::{build_plan, probe_base};
use crate::spec::pairs::PairEntry;
use crate::spec::Spec;
use crate::topo::Topology;

/// Prefix of a progress line on the stderr of `nflab remote loadgen --take`:
/// `nflab-progress {"event":"progress",…}`, read by the controller.
pub const PROGRESS_PREFIX: &str = "nflab-progress ";

/// Writes each `progress` event as a [`PROGRESS_PREFIX`] line on stderr.
pub struct ProgressLines;

impl crate::artifacts::events::Observer for ProgressLines {
    fn on(&self, event: &crate::artifacts::events::Event) {
        if let (crate::artifacts::events::Event::Progress { .. }, Ok(json)) =
            (event, serde_json::to_string(event))
        {
            eprintln!("{PROGRESS_PREFIX}{json}");
        }
    }
}

pub use crate::hosts::owner::SCRATCH_PREFIX;

/// MACs of the LoadGen's interfaces: `(tx, rx)`.
pub fn lg_macs(netns: Option<&str>, tx: &str, rx: &str) -> Result<(MacAddr, MacAddr), LabError> {
    let macs = || -> Result<(MacAddr, MacAddr), LabError> {
        Ok((
            MacAddr(nflab_io::iface::mac(tx)?),
            MacAddr(nflab_io::iface::mac(rx)?),
        ))
    };
    match netns {
        Some(ns) => crate::net::netns::NetnsGuard::run(ns, macs)?,
        None => macs(),
    }
}

/// The pair named `name` of `spec`.
pub fn pair<'a>(spec: &'a Spec, name: &str) -> Result<&'a PairEntry, LabError> {
    spec.pair
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| LabError::Host(format!("the spec has no [[pair]] named {name:?}")))
}

/// One run's traffic and analysis on this LoadGen host, frames to `dst`;
/// returns the scratch directory and the names of the files in it.
pub fn run_loadgen(
    spec: &Spec,
    pair_name: &str,
    run: usize,
    dst: MacAddr,
    owner: Option<&str>,
    stop: &AtomicBool,
) -> Result<(PathBuf, Vec<String>), LabError> {
    crate::net::netns::check_root()?;
    if let Some(tag) = owner {
        crate::hosts::owner::check_tag(tag)?;
    }
    let lg = &pair(spec, pair_name)?.loadgen;
    let topo = Topology::for_loadgen_host(
        lg.netns.clone(),
        lg.tx_iface.clone().unwrap_or_default(),
        lg.rx_iface.clone().unwrap_or_default(),
        spec.dut.kind,
        dst,
    );
    // The controller's tag first, so its gc finds the directory; fresh and
    // private, so no file planted under a guessable name is sent back as a result.
    let stem = format!(
        "{SCRATCH_PREFIX}{}{}-{run:03}-{}",
        owner.map(|t| format!("{t}-")).unwrap_or_default(),
        std::process::id(),
        crate::artifacts::events::unix_s() as u64
    );
    let tmp = std::env::temp_dir();
    let dir = nflab_io::safe_fs::fresh_private_dir(&tmp, &stem)
        .map_err(|e| LabError::artifact(&tmp.join(&stem), e))?;
    let result = traffic_and_analysis(spec, &topo, run, &dir, stop);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| LabError::artifact(&dir, e))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    files.sort();
    Ok((dir, files))
}

/// The run's measuring half (`run::measure`) and its files.
fn traffic_and_analysis(
    spec: &Spec,
    topo: &Topology,
    run: usize,
    dir: &Path,
    stop: &AtomicBool,
) -> Result<(), LabError> {
    let probe = probe_base(topo);
    let gen_plan = build_plan(&spec.traffic, spec.experiment.seed, &probe)?;
    let records = dir.join("records.nfr");
    // Live progress goes to the progress lines of `remote loadgen --take` ([`ProgressLines`]).
    let traffic = measure::send_and_record(
        spec,
        topo,
        crate::run::traffic::Sending {
            plan: &gen_plan,
            probe: &probe,
        },
        run,
        &records,
        stop,
    )?;
    let summary = measure::analyse(spec, &records, &traffic)?;
    write_json(&dir.join("summary.json"), &summary)?;
    write_json(&dir.join("gen.json"), &traffic.generator)?;
    write_json(&dir.join("recorder.json"), &traffic.recorder)?;
    write_json(&dir.join("topology.json"), topo)?;
    Ok(())
}

/// A scratch directory of this host's runs, checked: only those this module
/// made (and a plain file name in them) are read or removed. A directory of
/// that name that is not private to this user was made by someone else.
pub fn scratch(dir: &str, file: Option<&str>) -> Result<PathBuf, LabError> {
    let d = Path::new(dir);
    let ours = d.parent() == Some(std::env::temp_dir().as_path())
        && d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(SCRATCH_PREFIX) && !n.contains(".."));
    if !ours {
        return Err(LabError::Host(format!(
            "{dir} is not a scratch directory of an nflab LoadGen run: refused"
        )));
    }
    if let Err(e) = nflab_io::safe_fs::check_private_dir(d) {
        return Err(LabError::Host(format!(
            "{dir} is not a scratch directory this host's nflab made ({e}): refused"
        )));
    }
    match file {
        None => Ok(d.to_path_buf()),
        Some(f)
            if !f.is_empty() && !f.starts_with('.') && !f.contains('/') && !f.contains('\0') =>
        {
            Ok(d.join(f))
        }
        Some(f) => Err(LabError::Host(format!(
            "{f:?} is not a file name of a LoadGen run: refused"
        ))),
    }
}

/// Stream every file of the scratch directory `dir` to `out` (a header line
/// `nflab-file NAME LEN`, then the bytes; `nflab-end` last), then remove it.
pub fn take(dir: &Path, out: &mut impl Write) -> Result<(), LabError> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| LabError::artifact(dir, e))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let io = |e: std::io::Error| LabError::Other(format!("sending the run's files: {e}"));
    for name in &names {
        let path = dir.join(name);
        let mut f = std::fs::File::open(&path).map_err(|e| LabError::artifact(&path, e))?;
        let len = f
            .metadata()
            .map_err(|e| LabError::artifact(&path, e))?
            .len();
        writeln!(out, "nflab-file {name} {len}").map_err(io)?;
        let copied = std::io::copy(&mut (&mut f).take(len), out).map_err(io)?;
        if copied != len {
            return Err(LabError::Other(format!(
                "{} shrank while it was sent",
                path.display()
            )));
        }
    }
    writeln!(out, "nflab-end").map_err(io)?;
    out.flush().map_err(io)?;
    // Only once everything went out: a broken transfer leaves the copy to fetch again.
    std::fs::remove_dir_all(dir).map_err(|e| LabError::artifact(dir, e))
}

/// The longest header line [`receive`] reads (`nflab-file NAME LEN`).
const HEADER_MAX: usize = 4096;

/// Read what [`take`] sent into `dest`; the names of the files written.
pub fn receive(input: &mut impl BufRead, dest: &Path) -> Result<Vec<String>, LabError> {
    let bad =
        |what: String| LabError::Other(format!("the LoadGen's files arrived damaged: {what}"));
    let mut names = Vec::new();
    loop {
        // A header is a short line: a stream that is not one is damaged, however long.
        let line = crate::hosts::ssh::read_line_bounded(input, HEADER_MAX)
            .map_err(|e| bad(e.to_string()))?
            .unwrap_or_default();
        let line = String::from_utf8_lossy(&line);
        let line: &str = &line;
        if line == "nflab-end" {
            // The controller marks the run complete next: the files must outlast a power cut.
            nflab_io::safe_fs::sync_dir(dest).map_err(|e| LabError::artifact(dest, e))?;
            return Ok(names);
        }
        let mut words = line.splitn(3, ' ');
        let (Some("nflab-file"), Some(name), Some(len)) =
            (words.next(), words.next(), words.next())
        else {
            let shown: String = line.chars().take(80).collect();
            return Err(bad(format!("unexpected header {shown:?} (cut short?)")));
        };
        let len: u64 = len.parse().map_err(|_| bad(format!("length {len:?}")))?;
        if name.is_empty() || name.starts_with('.') || name.contains('/') {
            return Err(bad(format!("file name {name:?}")));
        }
        let path = dest.join(name);
        let mut f = std::fs::File::create(&path).map_err(|e| LabError::artifact(&path, e))?;
        let copied = std::io::copy(&mut input.take(len), &mut f)
            .map_err(|e| LabError::artifact(&path, e))?;
        if copied != len {
            return Err(bad(format!("{name}: {copied} of {len} bytes")));
        }
        f.sync_all().map_err(|e| LabError::artifact(&path, e))?;
        names.push(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_files_arrive_whole_and_the_scratch_copy_goes() {
        let tmp = std::env::temp_dir();
        let src = tmp.join(format!("{SCRATCH_PREFIX}test-{}", std::process::id()));
        let dst = tmp.join(format!("nflab-take-test-{}", std::process::id()));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("records.nfr"), &big).unwrap();
        std::fs::write(src.join("summary.json"), b"{}\nnflab-end\n").unwrap();
        let mut wire = Vec::new();
        take(&src, &mut wire).unwrap();
        assert!(!src.exists());
        let names = receive(&mut wire.as_slice(), &dst).unwrap();
        assert_eq!(names, ["records.nfr", "summary.json"]);
        assert_eq!(std::fs::read(dst.join("records.nfr")).unwrap(), big);
        assert_eq!(
            std::fs::read(dst.join("summary.json")).unwrap(),
            b"{}\nnflab-end\n"
        );
        // Cut short anywhere: an error, never a silently shorter file set.
        for cut in [10, wire.len() / 2, wire.len() - 3] {
            let e = receive(&mut &wire[..cut], &dst).unwrap_err().to_string();
            assert!(e.contains("damaged"), "{cut}: {e}");
        }
        std::fs::remove_dir_all(&dst).unwrap();
    }

    /// Removes the directory when the test ends, also when it fails.
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_header_without_end_is_damage_read_no_further_than_its_bound() {
        let dst = Gone(
            nflab_io::safe_fs::fresh_private_dir(&std::env::temp_dir(), "nflab-receive").unwrap(),
        );
        // 64 MiB and no newline: no header is that long.
        let stream = vec![b'x'; 64 << 20];
        let mut input = std::io::BufReader::new(stream.as_slice());
        let e = receive(&mut input, &dst.0).unwrap_err().to_string();
        assert!(e.contains("damaged") && e.len() < 400, "{}", e.len());
    }

    #[test]
    fn only_our_scratch_directories_and_plain_names_are_served() {
        let tmp = std::env::temp_dir();
        let ours = Gone(
            nflab_io::safe_fs::fresh_private_dir(
                &tmp,
                &format!("{SCRATCH_PREFIX}1-{}-000-2", std::process::id()),
            )
            .unwrap(),
        );
        let ok = ours.0.to_str().unwrap();
        assert!(scratch(ok, Some("records.nfr")).is_ok());
        assert!(scratch(ok, None).is_ok());
        for (dir, file) in [
            ("/etc", None),
            ("/tmp/../etc/nflab-lg-x", None),
            (ok, Some("../../etc/shadow")),
            (ok, Some(".complete")),
            (ok, Some("")),
        ] {
            assert!(scratch(dir, file).is_err(), "{dir} {file:?}");
        }
    }

    #[test]
    fn a_planted_scratch_directory_is_not_served() {
        use std::os::unix::fs::PermissionsExt;
        if !nflab_testkit::require_root() {
            return;
        }
        let tmp = std::env::temp_dir();
        // Made by another user, as an attacker on the LoadGen host would: its
        // files must never go back to the controller as results.
        let planted = Gone(tmp.join(format!("{SCRATCH_PREFIX}x-{}-000-1", std::process::id())));
        std::fs::create_dir(&planted.0).unwrap();
        std::fs::write(planted.0.join("summary.json"), b"{}").unwrap();
        std::os::unix::fs::chown(&planted.0, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&planted.0, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = scratch(planted.0.to_str().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("refused") && e.contains("uid 65534"), "{e}");
        // Ours but open to others, or a symlink to a directory of ours: refused too.
        std::os::unix::fs::chown(&planted.0, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(&planted.0, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(scratch(planted.0.to_str().unwrap(), None).is_err());
        let real = Gone(nflab_io::safe_fs::fresh_private_dir(&tmp, "nflab-take-real").unwrap());
        let link = tmp.join(format!("{SCRATCH_PREFIX}link-{}", std::process::id()));
        std::os::unix::fs::symlink(&real.0, &link).unwrap();
        let refused = scratch(link.to_str().unwrap(), None).is_err();
        std::fs::remove_file(&link).unwrap();
        assert!(refused);
    }
}
