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
