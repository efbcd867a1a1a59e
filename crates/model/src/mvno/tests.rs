//! The seed's published numbers (ch. 4.4) from short runs, and the spec's
//! refusals of bad input.

use super::*;
use crate::des::service::Family;

fn cfg(rate: f64, duration_s: f64, warmup_s: f64, edit: impl FnOnce(&mut MvnoSpec)) -> MvnoConfig {
    let mut s = MvnoSpec {
        rate_per_s: rate,
        duration_s,
        warmup_s,
        ..MvnoSpec::default()
    };
    edit(&mut s);
    match s.check() {
        Ok(c) => c,
        Err(e) => panic!("default spec refused: {e}"),
    }
}

/// Offered load on the AUC from Table 4.6: 2 SAIs per device, each
/// holding a processor for keys + CMAP out + update.
fn auc_capacity_per_s(processors: f64) -> f64 {
    processors / (2.0 * (2886.0 + 749.0 + 4960.0) * 1e-6)
}

#[test]
fn auc_is_the_bottleneck_at_460() {
    let r = run(&cfg(460.0, 120.0, 30.0, |_| {}));
    let auc = r.utilisation["auc"];
    assert!((auc - 0.99).abs() <= 0.02, "AUC utilisation {auc}");
    // Below saturation every device gets through.
    assert!(
        (r.attach_rate_per_s - 460.0).abs() < 0.03 * 460.0,
        "{}",
        r.attach_rate_per_s
    );
    assert!(r.utilisation["cmap"] < 0.7 && r.utilisation["hlr"] < 0.1);
    // The utilisation is the offered work over the capacity (independent).
    let expected = 460.0 / auc_capacity_per_s(8.0);
    assert!((auc - expected).abs() < 0.02, "{auc} vs {expected}");
}

#[test]
fn beyond_the_auc_a_retry_livelock() {
    let r = run(&cfg(560.0, 150.0, 90.0, |_| {}));
    // All devices keep retrying, the AUC is saturated, few attach.
    assert!(r.utilisation["auc"] > 0.99, "{}", r.utilisation["auc"]);
    assert!(
        r.attach_rate_per_s < 0.5 * 560.0,
        "attach {}",
        r.attach_rate_per_s
    );
    assert!(r.series.retries.iter().skip(90).sum::<u64>() > 0);
}

#[test]
fn doubled_auc_moves_the_bottleneck_to_cmap_near_850() {
    // The CMAP's saturation rate from a run below it: rate / utilisation.
    let r = run(&cfg(600.0, 60.0, 15.0, |s| s.processors.auc = 16));
    let saturation = 600.0 / r.utilisation["cmap"];
    assert!(
        (saturation - 850.0).abs() < 0.05 * 850.0,
        "CMAP saturates at {saturation}/s"
    );
    assert!(r.utilisation["auc"] < r.utilisation["cmap"]);
}

#[test]
fn parallel_auc_hold_raises_the_capacity_to_510() {
    let r = run(&cfg(400.0, 60.0, 15.0, |s| s.auc_hold = AucHold::Parallel));
    let capacity = 400.0 / r.utilisation["auc"];
    let expected = 8.0 / (2.0 * (2886.0 + 4960.0) * 1e-6);
    assert!(
        (capacity - expected).abs() < 0.03 * expected,
        "{capacity} vs {expected}"
    );
}

#[test]
fn equal_seeds_equal_runs() {
    let a = run(&cfg(100.0, 20.0, 5.0, |_| {}));
    let b = run(&cfg(100.0, 20.0, 5.0, |_| {}));
    assert_eq!(a.series.attachments, b.series.attachments);
    assert_eq!(a.events, b.events);
}

#[test]
fn spec_defaults_round_trip_through_toml() {
    let text = include_str!("../../../../examples/mvno.toml");
    let spec = MvnoSpec::from_toml(text, std::path::Path::new(".")).expect("example parses");
    let d = MvnoSpec::default();
    assert_eq!(spec.processors.auc, d.processors.auc);
    assert_eq!(spec.service.backend_query_miss.mean_us, Some(70482.0));
    assert_eq!(spec.policing.msu_quota, 5000);
    assert!(spec.check().is_ok());
}

fn refused(text: &str) -> String {
    match MvnoSpec::from_toml(text, std::path::Path::new(".")).and_then(|s| s.check()) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_input_is_one_sentence_naming_the_key() {
    let e = refused("[processors]\nauc = 0\n");
    assert!(e.contains("processors.auc = 0") && !e.contains('\n'), "{e}");
    let e = refused("[service]\ncmap_in = { mean_us = -5, cv = 0.1 }\n");
    assert!(e.contains("service.cmap_in.mean_us"), "{e}");
    let e = refused("family = \"exponential\"\n");
    assert!(
        e.contains("service.cmap_in.cv") && e.contains("exponential"),
        "{e}"
    );
    let e = refused("[service]\nisd = { mean_us = 5, cv = 0 }\n");
    assert!(e.contains("service.isd.cv"), "{e}");
    let e = refused("rate_per_s = -1\n");
    assert!(e.contains("rate_per_s"), "{e}");
    let e = refused("[processors]\nauc = 0.5\n");
    assert!(e.contains("auc"), "{e}");
    let mut s = MvnoSpec::default();
    assert!(s.set_processors("auc=16").is_ok());
    assert_eq!(s.processors.auc, 16);
    assert!(s.set_processors("xyz=3").is_err());
}

#[test]
fn sample_file_bad_row_is_named() {
    let dir = std::env::temp_dir().join(format!("nflab-mvno-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let _guard = RemoveDir(dir.clone());
    std::fs::write(dir.join("good.txt"), "# µs\n1000\n3000\n\n").expect("write");
    std::fs::write(dir.join("bad.txt"), "1000\nabc\n").expect("write");
    let ok = MvnoSpec::from_toml("[service]\nisd = { samples = \"good.txt\" }\n", &dir)
        .and_then(|s| s.check())
        .expect("good samples");
    // Empirical mean of the two samples: 2 ms.
    assert!((ok.services[4].mean() - 2e-3).abs() < 1e-12);
    let e = MvnoSpec::from_toml("[service]\nisd = { samples = \"bad.txt\" }\n", &dir)
        .and_then(|s| s.check())
        .map(|_| ())
        .expect_err("bad row");
    assert!(
        e.to_string().contains("row 2") && e.to_string().contains("service.isd"),
        "{e}"
    );
}

struct RemoveDir(std::path::PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn lognormal_family_gives_the_same_bottleneck() {
    let r = run(&cfg(300.0, 40.0, 10.0, |s| s.family = Family::Lognormal));
    let expected = 300.0 / auc_capacity_per_s(8.0);
    assert!((r.utilisation["auc"] - expected).abs() < 0.02);
}

#[test]
fn msu_policing_holds_840_at_3400() {
    let r = run(&cfg(3400.0, 80.0, 40.0, |s| {
        s.processors.auc = 16;
        s.policy = Policy::Msu;
    }));
    assert!(
        (r.attach_rate_per_s - 840.0).abs() < 0.05 * 840.0,
        "attach {}",
        r.attach_rate_per_s
    );
    assert!(r.refused > 0);
    // Without policing the same overload collapses (the livelock).
    let b = run(&cfg(3400.0, 80.0, 40.0, |s| s.processors.auc = 16));
    assert!(
        b.attach_rate_per_s < 0.5 * r.attach_rate_per_s,
        "baseline {}",
        b.attach_rate_per_s
    );
}

#[test]
fn device_policing_caps_retries() {
    let r = run(&cfg(3400.0, 80.0, 40.0, |s| {
        s.processors.auc = 16;
        s.policy = Policy::Device;
    }));
    assert!(r.max_retries <= 30, "max retries {}", r.max_retries);
    assert!(r.max_retries >= 1, "the policy never refused anyone");
    assert!(
        (r.attach_rate_per_s - 840.0).abs() < 0.05 * 840.0,
        "attach {}",
        r.attach_rate_per_s
    );
}

#[test]
fn simple_dropping_is_worse_than_baseline() {
    let d = run(&cfg(900.0, 100.0, 50.0, |s| {
        s.processors.auc = 16;
        s.policy = Policy::Dropping;
    }));
    let b = run(&cfg(900.0, 100.0, 50.0, |s| s.processors.auc = 16));
    assert!(d.dropped > 0);
    assert!(
        d.attach_rate_per_s < b.attach_rate_per_s,
        "dropping {} baseline {}",
        d.attach_rate_per_s,
        b.attach_rate_per_s
    );
}
