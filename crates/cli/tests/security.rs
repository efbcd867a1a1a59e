//! nflab runs as root: what a spec, a stored tree or another user can make it
//! do (docs/experiments.md, Security). Real files, real runs.

#[macro_use]
mod common;

use common::*;

#[test]
fn an_include_outside_the_specs_directory_is_refused_and_never_echoed() {
    let tmp = TempDir::new("sec-include");
    let specs = tmp.0.join("specs");
    std::fs::create_dir(&specs).unwrap();
    // A file of the host that is not a spec, as /etc/shadow is.
    let secret = tmp.0.join("shadow");
    std::fs::write(&secret, "root:$6$SECRETHASH$x:19000:0:99999:7:::\n").unwrap();
    let spec = write_spec(
        &specs,
        "inc",
        &format!(
            "[experiment]\nname = \"inc\"\ninclude = [{:?}]\n[dut]\nkind = \"loopback\"\n",
            secret.display().to_string()
        ),
    );
    let run = |extra: &[&str]| {
        nflab()
            .args(["run", spec.to_str().unwrap(), "--dry-run"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("experiment.include")
            && err.contains("outside")
            && err.contains("--allow-include-outside")
            && !err.contains("SECRETHASH"),
        "{err}"
    );
    // Allowed: read, and refused as not TOML, still without its lines.
    let out = run(&["--allow-include-outside"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        !err.contains("SECRETHASH") && err.contains("shadow"),
        "{err}"
    );
}

#[test]
fn two_runs_of_one_spec_started_in_the_same_second_both_complete() {
    require_root!();
    let tmp = TempDir::new("sec-twice");
    let out = tmp.0.join("results");
    std::fs::create_dir(&out).unwrap();
    let spec = write_spec(
        &tmp.0,
        "twice",
        "[experiment]\nname = \"twice\"\n[dut]\nkind = \"loopback\"\n\
         [traffic]\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0.1\n",
    );
    // The directories of the next minute exist already, as another run's would:
    // every run below meets a directory of its own name, whatever second it starts.
    let now = chrono::Utc::now();
    let planted: Vec<_> = (0..60)
        .map(|s| {
            let stamp = (now + chrono::Duration::seconds(s)).format("%Y%m%dT%H%M%SZ");
            let d = out.join(format!("{stamp}-twice"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("another-run"), "").unwrap();
            d
        })
        .collect();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run_ok(&spec, &out));
        let b = s.spawn(|| run_ok(&spec, &out));
        (a.join().unwrap(), b.join().unwrap())
    });
    let dir_of = |r: &serde_json::Value| std::path::PathBuf::from(r["dir"].as_str().unwrap());
    let (da, db) = (dir_of(&a.1), dir_of(&b.1));
    assert_ne!(da, db);
    for d in [&da, &db] {
        assert!(!planted.contains(d), "{} was another run's", d.display());
        let name = d.file_name().unwrap().to_str().unwrap();
        assert!(name.contains("-twice-"), "{name}");
        assert!(d.join("runs/000/.complete").is_file(), "{}", d.display());
        assert!(d.join("runs/000/summary.json").is_file(), "{}", d.display());
    }
    for d in &planted {
        let names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["another-run"], "{} was written into", d.display());
    }
}

#[test]
fn through_sudo_the_result_tree_belongs_to_the_caller() {
    use std::os::unix::fs::MetadataExt;
    require_root!();
    let tmp = TempDir::new("sec-sudo");
    let out = tmp.0.join("results");
    let spec = write_spec(
        &tmp.0,
        "mine",
        "[experiment]\nname = \"mine\"\n[dut]\nkind = \"loopback\"\n\
         [traffic]\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0.1\n",
    );
    // As `sudo` leaves them for the caller (uid and gid 4242).
    let o = nflab()
        .args([
            "run",
            spec.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .env("SUDO_UID", "4242")
        .env("SUDO_GID", "4243")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = std::path::PathBuf::from(result["dir"].as_str().unwrap());
    assert!(dir.join("report.html").is_file());
    let mut seen = 0;
    let mut check = vec![out.clone()];
    while let Some(p) = check.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (4242, 4243), "{}", p.display());
        seen += 1;
        if m.is_dir() {
            check.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(seen > 10, "{seen}");
}

/// Tools a caller's `PATH` could plant: each fake writes its name to the marker
/// file and fails. Returns the PATH with them first and the marker.
fn planted_tools(tmp: &std::path::Path) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    // A directory first on PATH, as a caller's ~/.cargo/bin can be.
    let bin = tmp.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let marker = tmp.join("ran");
    for tool in [
        "ip",
        "tc",
        "sysctl",
        "ethtool",
        "tee",
        "sh",
        "bash",
        "dash",
        "stdbuf",
        "setpriv",
        "python3",
        "nft",
        "ssh",
        "true",
        "sleep",
        "ovs-vsctl",
        "ovs-vswitchd",
        "dpdk-testpmd",
    ] {
        let fake = bin.join(tool);
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho {tool} >> {}\nexit 1\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (path, marker)
}

fn planted_ran(marker: &std::path::Path) -> String {
    std::fs::read_to_string(marker).unwrap_or_default()
}

#[test]
fn a_planted_ip_on_path_is_never_run() {
    require_root!();
    let tmp = TempDir::new("sec-path");
    let (path, marker) = planted_tools(&tmp.0);
    let up = nflab()
        .args(["topo", "up"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&up.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("id ").map(str::to_string));
    if let Some(id) = &id {
        let down = nflab()
            .args(["topo", "down", id])
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(down.status.success(), "{}", stderr(&down));
    }
    let ran = planted_ran(&marker);
    assert!(ran.is_empty(), "nflab ran these from PATH: {ran}");
    assert!(up.status.success(), "{}", stderr(&up));
}

/// `nflab run` of a tiny spec, and of an external DuT whose hooks run `sh -c
/// "ip …"`, with planted tools first on PATH: none of them runs (nflab's own
/// tools and the hooks' come from the system's directories).
#[test]
fn nflab_run_with_planted_tools_on_path_never_runs_them() {
    require_root!();
    let tmp = TempDir::new("sec-path-run");
    let (path, marker) = planted_tools(&tmp.0);
    let out = tmp.0.join("results");
    let traffic =
        "[traffic]\nbackend = \"af_packet\"\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0.1\n";
    let tiny = write_spec(
        &tmp.0,
        "tiny",
        &format!("[experiment]\nname = \"tiny\"\n[dut]\nkind = \"loopback\"\n{traffic}"),
    );
    let external = write_spec(
        &tmp.0,
        "hooks",
        &format!(
            "[experiment]\nname = \"hooks\"\n[dut]\nkind = \"external\"\n{traffic}\
             [dut.external]\n\
             setup = [\"sh\", \"-c\", \"ip -n $NFLAB_DUT_NETNS addr add 198.18.0.2/24 dev $NFLAB_INGRESS && ip -n $NFLAB_DUT_NETNS addr add 198.19.0.2/24 dev $NFLAB_EGRESS && ip netns exec $NFLAB_DUT_NETNS sysctl -qw net.ipv4.ip_forward=1\"]\n\
             teardown = [\"true\"]\n"
        ),
    );
    for spec in [&tiny, &external] {
        let o = nflab()
            .args([
                "run",
                spec.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .args(["--json"])
            .env("PATH", &path)
            .output()
            .unwrap();
        let ran = planted_ran(&marker);
        assert!(
            ran.is_empty(),
            "nflab run {} ran these from PATH: {ran}",
            spec.display()
        );
        assert!(o.status.success(), "{}: {}", spec.display(), stderr(&o));
    }
}

/// The README's scripts re-run themselves through `sudo` with the cargo bin
/// directory and the system's directories as PATH, never the rest of the
/// caller's PATH (where a planted `ip` could wait). `id` and `sudo` are fakes
/// here: the first says "not root", the second writes down what it was given.
#[test]
fn the_scripts_hand_root_no_path_of_the_callers() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new("sec-sudo-path");
    let bin = tmp.0.join("caller-bin");
    std::fs::create_dir(&bin).unwrap();
    let argv = tmp.0.join("sudo-argv");
    for (tool, body) in [
        ("id", "echo 1000".to_string()),
        (
            "sudo",
            format!("printf '%s\\n' \"$@\" > {}", argv.display()),
        ),
    ] {
        let p = bin.join(tool);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let common = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/common.sh");
    let o = std::process::Command::new("/bin/bash")
        .arg("-c")
        .arg(format!(
            ". {common}; become_root /nonexistent/script.sh a b"
        ))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", "/home/caller")
        .env_remove("CARGO_HOME")
        .env_remove("RUSTUP_HOME")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let args = std::fs::read_to_string(&argv).unwrap();
    let path = args
        .lines()
        .find_map(|l| l.strip_prefix("PATH="))
        .unwrap_or_else(|| panic!("no PATH= given to sudo: {args}"));
    assert_eq!(
        path,
        "/home/caller/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
    assert!(args.contains("CARGO_HOME=/home/caller/.cargo\n"), "{args}");
    assert!(
        args.contains("RUSTUP_HOME=/home/caller/.rustup\n"),
        "{args}"
    );
    assert!(args.ends_with("/nonexistent/script.sh\na\nb\n"), "{args}");
}

/// `--resume` of a tree another user could have prepared: a `.disk-reserve`
/// symlink is replaced, never followed; a run directory that is a symlink is
/// redone as a plain directory, what it pointed to untouched; a `runs/`
/// that is a symlink is refused in one sentence before anything is written.
#[test]
fn resume_follows_no_symlink_planted_in_the_tree() {
    require_root!();
    let tmp = TempDir::new("sec-resume");
    let out = tmp.0.join("results");
    let spec = write_spec(
        &tmp.0,
        "again",
        "[experiment]\nname = \"again\"\n[dut]\nkind = \"loopback\"\n\
         [traffic]\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0.1\n",
    );
    let (_, result, _) = run_ok(&spec, &out);
    let exp = std::path::PathBuf::from(result["dir"].as_str().unwrap());
    let resume = || {
        nflab()
            .args(["run", "--resume", exp.to_str().unwrap(), "--json"])
            .output()
            .unwrap()
    };
    // Outside the tree: a file and a directory the plants point at.
    let victim = tmp.0.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let elsewhere = tmp.0.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("mine"), "keep").unwrap();
    let listing = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let reserve = exp.join(".disk-reserve");
    let _ = std::fs::remove_file(&reserve);
    std::os::unix::fs::symlink(&victim, &reserve).unwrap();
    let run0 = exp.join("runs/000");
    std::fs::remove_dir_all(&run0).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &run0).unwrap();
    let o = resume();
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = std::fs::read(&victim).unwrap() == b"keep";
    assert!(kept, "the reserve was written through the symlink");
    assert_eq!(listing(&elsewhere), ["mine"]);
    let m = std::fs::symlink_metadata(&run0).unwrap();
    assert!(m.is_dir(), "runs/000 is still a symlink");
    assert!(run0.join(".complete").is_file());
    // runs/ itself a symlink: refused, nothing written anywhere.
    let runs = exp.join("runs");
    std::fs::remove_dir_all(&runs).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &runs).unwrap();
    let before = listing(&exp);
    let o = resume();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("runs") && err.contains("symlink"), "{err}");
    assert_eq!(listing(&elsewhere), ["mine"]);
    assert_eq!(listing(&exp), before);
}

/// `nflab report DIR` through sudo hands back what it wrote (report.html,
/// figures/ and its files) and nothing else of a tree that may be another
/// user's; a figures/ planted as a symlink is refused, nothing written
/// where it points.
#[test]
fn report_through_sudo_hands_back_only_what_it_wrote() {
    use std::os::unix::fs::MetadataExt;
    require_root!();
    let tmp = TempDir::new("sec-report");
    let out = tmp.0.join("results");
    let spec = write_spec(
        &tmp.0,
        "redraw",
        "[experiment]\nname = \"redraw\"\n[dut]\nkind = \"loopback\"\n\
         [traffic]\nrate_pps = 2000\nduration_s = 0.3\nwarmup_s = 0.1\n",
    );
    let (_, result, _) = run_ok(&spec, &out);
    let exp = std::path::PathBuf::from(result["dir"].as_str().unwrap());
    let report = || {
        nflab()
            .args(["report", exp.to_str().unwrap()])
            .env("SUDO_UID", "4242")
            .env("SUDO_GID", "4243")
            .output()
            .unwrap()
    };
    let owner = |p: &std::path::Path| {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.uid(), m.gid())
    };
    let o = report();
    assert!(o.status.success(), "{}", stderr(&o));
    let figures = exp.join("figures");
    let mut drawn: Vec<_> = std::fs::read_dir(&figures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(drawn.len() > 3, "{drawn:?}");
    drawn.extend([exp.join("report.html"), figures.clone()]);
    for p in &drawn {
        assert_eq!(owner(p), (4242, 4243), "{}", p.display());
    }
    for p in ["", "spec.toml", "runs", "runs/000", "runs/000/summary.json"] {
        assert_eq!(owner(&exp.join(p)), (0, 0), "{p} was handed over");
    }
    // figures/ a symlink to a directory elsewhere.
    let elsewhere = tmp.0.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::remove_dir_all(&figures).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &figures).unwrap();
    let o = report();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("figures") && err.contains("symlink"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
