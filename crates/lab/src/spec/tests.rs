use super::*;

const QUICK: &str = r#"
[experiment]
name = "quick"
repetitions = 2

[dut]
kind = "loopback"

[traffic]
rate_pps = 1000
frame_bytes = 64
duration_s = 1

[sweep]
"traffic.rate_pps" = [1000, 2000, 3000]
"dut.kind" = ["loopback", "linux-router"]
"#;

#[test]
fn a_link_spec_checks_each_direction_and_names_the_bad_key() {
    let check = |dut: &str| {
        let text = format!("[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n{dut}\n");
        Spec::parse(&text, "t")
            .and_then(|s| s.check_supported())
            .map_err(|e| e.to_string())
    };
    check(
            "[dut.link]\ndelay_us = 8090\njitter_us = 740\ndistribution = \"normal\"\n\
             loss = { model = \"gilbert-elliott\", p = 0.01, r = 0.5, \"1-h\" = 0.8, \"1-k\" = 0.0 }\n\
             rate_mbps = 26\nqueue_packets = 64\nduplicate = 0.001\nreorder = 0.01\n\
             [dut.link.reverse]\ndelay_us = 100",
        )
        .expect("a full link");
    check("").expect("a bare link is a cable");
    for (dut, want) in [
        (
            "[dut.link.reverse]\nloss = { model = \"bernoulli\", p = 2 }",
            "dut.link.reverse.loss.p = 2 is not a probability",
        ),
        (
            "[dut.link]\nrate_mbps = -3",
            "dut.link.rate_mbps = -3 is not valid",
        ),
        (
            "pipeline = [\"l2fwd\"]",
            "dut.pipeline does not apply to dut.kind = \"link\"",
        ),
        ("io = \"af_xdp\"", "dut.io = \"af_xdp\" cannot serve a link"),
        ("[dut.link]\ndelay = 5", "delay"),
    ] {
        let e = check(dut).unwrap_err();
        assert!(e.contains(want), "{dut}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A pipeline's link function carries one direction only.
    let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"nflab\"\npipeline = [\"link\"]\n[dut.link.reverse]\ndelay_us = 1\n";
    let e = Spec::parse(text, "t")
        .and_then(|s| s.check_supported())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dut.link.reverse applies to dut.kind = \"link\" only"),
        "{e}"
    );
}

#[test]
fn a_links_keys_can_be_swept() {
    let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n[dut.link]\njitter_us = 5\n\
                    [dut.link.reverse]\ndelay_us = 1\n[app]\nkind = \"ncsbench\"\n\
                    [sweep]\n\"dut.link.delay_us\" = [100, 200]\n\"dut.link.reverse.jitter_us\" = [0, 3]\n\"app.periods\" = [10]\n";
    let plans = Spec::parse(text, "t").unwrap().expand(text).unwrap();
    assert_eq!(plans.len(), 4);
    let l = plans[3].spec.dut.link.clone().unwrap();
    assert_eq!((l.delay_us, l.jitter_us), (Some(200.0), Some(5.0)));
    let r = l.reverse.unwrap();
    assert_eq!((r.delay_us, r.jitter_us), (Some(1.0), Some(3.0)));
    let Some(AppSection::Ncsbench(c)) = &plans[0].spec.app else {
        panic!("no app")
    };
    assert_eq!(c.periods, 10);
    let bad = text.replace("dut.link.delay_us", "dut.link.x.y.z");
    let e = Spec::parse(&bad, "t")
        .and_then(|s| s.expand(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sweep key \"dut.link.x.y.z\" is not valid"),
        "{e}"
    );
}

#[test]
fn a_links_loss_rate_can_be_swept() {
    let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"link\"\n[dut.link]\nloss = { model = \"bernoulli\", p = 0.0 }\n\
                    [dut.link.reverse]\nloss = { model = \"bernoulli\", p = 0.0 }\n\
                    [sweep]\n\"dut.link.loss.p\" = [0.1, 0.5]\n\"dut.link.reverse.loss.p\" = [0.25]\n";
    let plans = Spec::parse(text, "t").unwrap().expand(text).unwrap();
    assert_eq!(plans.len(), 2);
    let l = plans[1].spec.dut.link.clone().unwrap();
    let fwd = serde_json::to_value(&l.loss).unwrap();
    assert_eq!(
        (fwd["model"].as_str(), fwd["p"].as_f64()),
        (Some("bernoulli"), Some(0.5))
    );
    let rev = serde_json::to_value(&l.reverse.unwrap().loss).unwrap();
    assert_eq!(rev["p"].as_f64(), Some(0.25));
    assert_eq!(plans[0].params["dut.link.loss.p"].as_float(), Some(0.1));
}

#[test]
fn an_ncsbench_app_is_checked_with_its_dut() {
    let check = |dut: &str, app: &str| {
        let text = format!(
                "[experiment]\nname = \"x\"\n[dut]\nkind = \"{dut}\"\n[app]\nkind = \"ncsbench\"\n{app}\n"
            );
        Spec::parse(&text, "t")
            .and_then(|s| s.check_supported().map(|()| s))
            .map_err(|e| e.to_string())
    };
    let s = check("link", "periods = 100").expect("a valid app");
    let Some(AppSection::Ncsbench(c)) = s.app else {
        panic!("no app")
    };
    assert_eq!(
        (c.period_ms, c.deadline_ms, c.periods, c.backups),
        (35.0, 29.0, 100, 10)
    );
    assert_eq!(c.max_consecutive_losses, 3);
    for (dut, app, want) in [
        (
            "link",
            "period_ms = 20",
            "app.period_ms = 20 is shorter than app.deadline_ms = 29",
        ),
        (
            "linux-router",
            "",
            "cannot cross dut.kind = \"linux-router\"",
        ),
        ("link", "periods_ms = 5", "periods_ms"),
        ("link", "time_scale = 0.5", "app.time_scale = 0.5"),
    ] {
        let e = check(dut, app).unwrap_err();
        assert!(e.contains(want), "{app}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn traffic_the_dut_cannot_forward_is_refused_before_the_run() {
    let check = |dut: &str, traffic: &str| {
        let text =
            format!("[experiment]\nname = \"x\"\n[dut]\nkind = \"{dut}\"\n[traffic]\n{traffic}\n");
        Spec::parse(&text, "t")
            .unwrap()
            .check_supported()
            .map_err(|e| e.to_string())
    };
    let e = check("linux-router", "ip_version = 6").unwrap_err();
    assert!(
        e.contains("traffic.ip_version = 6") && e.contains("IPv4 only"),
        "{e}"
    );
    let e = check("linux-router", "vlan = 100").unwrap_err();
    assert!(
        e.contains("traffic.vlan = 100") && e.contains("linux-bridge"),
        "{e}"
    );
    let e = check("linux-bridge", "pcp = 6").unwrap_err();
    assert!(e.contains("traffic.pcp = 6 needs traffic.vlan"), "{e}");
    check(
        "linux-bridge",
        "ip_version = 6\nvlan = 100\npcp = 6\nframe_bytes = 128",
    )
    .expect("a bridge carries both");
    check("loopback", "ip_version = 6\nvlan = 100\nframe_bytes = 128")
        .expect("loopback carries both");
}

#[test]
fn cross_product_times_repetitions() {
    let spec = Spec::parse(QUICK, "t").unwrap();
    let runs = spec.expand(QUICK).unwrap();
    assert_eq!(runs.len(), 3 * 2 * 2);
    // First key outermost, repetitions innermost.
    assert_eq!(runs[0].spec.traffic.rate_pps, Rate::Pps(1000.0));
    assert_eq!(runs[0].spec.dut.kind, DutKind::Loopback);
    assert_eq!(runs[1].repetition, 1);
    assert_eq!(runs[2].spec.dut.kind, DutKind::LinuxRouter);
    assert_eq!(runs[4].spec.traffic.rate_pps, Rate::Pps(2000.0));
    let idx: Vec<usize> = runs.iter().map(|r| r.index).collect();
    assert_eq!(idx, (0..12).collect::<Vec<_>>());
}

/// Found by the spec_parse fuzzer: 1.3 million repetitions took 2.5 GB while
/// expanding. A study over MAX_RUNS is refused when parsed, naming the key.
#[test]
fn a_study_of_millions_of_runs_is_refused_in_one_sentence() {
    let text = QUICK.replace("repetitions = 2", "repetitions = 1300000");
    let e = Spec::parse(&text, "t").unwrap_err().to_string();
    assert!(
        e.contains("experiment.repetitions = 1300000") && e.contains("7800000 runs"),
        "{e}"
    );
    let text = QUICK.replace("repetitions = 2", "repetitions = 16666");
    assert!(Spec::parse(&text, "t").is_ok(), "6 × 16666 runs are fine");
}

/// Regression (fuzz target spec_parse, crash-52e427f6…): skip_refused with a
/// sweep whose every value is refused was accepted with no run at all.
#[test]
fn a_sweep_refused_whole_under_skip_refused_is_an_error() {
    let text = "[experiment]\nname = \"x\"\nskip_refused = true\n[dut]\nkind = \"link\"\n\
                    [app]\nkind = \"prrt\"\ngap_ms = 1\npayload_bytes = 20\ntarget_delay_ms = 10\n\
                    window_ms = 2\nduration_s = 2\noutage_threshold_ms = 100\n\
                    [sweep]\n\"app.gap_ms\" = [0]\n";
    let e = Spec::parse(text, "t")
        .and_then(|s| s.expand(text).map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("all 1 combinations of the sweep are refused") && e.contains("gap_ms"),
        "{e}"
    );
    // One value that runs is enough.
    let some = text.replace("[0]", "[0, 1]");
    let spec = Spec::parse(&some, "t").unwrap();
    let (plans, refused) = spec.expand_all(&some).unwrap();
    assert_eq!((plans.len(), refused.len()), (1, 1));
}

#[test]
fn random_order_is_a_seeded_permutation() {
    let text = QUICK.replace(
        "repetitions = 2",
        "repetitions = 2\norder = \"random\"\nseed = 7",
    );
    let spec = Spec::parse(&text, "t").unwrap();
    let a = spec.expand(&text).unwrap();
    let b = spec.expand(&text).unwrap();
    let key = |r: &RunPlan| (r.combination, r.repetition);
    assert_eq!(
        a.iter().map(key).collect::<Vec<_>>(),
        b.iter().map(key).collect::<Vec<_>>()
    );
    let mut sorted: Vec<_> = a.iter().map(key).collect();
    assert_ne!(
        sorted,
        (0..12).map(|i| (i / 2, (i % 2) as u32)).collect::<Vec<_>>()
    );
    sorted.sort();
    assert_eq!(
        sorted,
        (0..12).map(|i| (i / 2, (i % 2) as u32)).collect::<Vec<_>>()
    );
}

#[test]
fn unknown_key_names_key_and_line() {
    let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_ps = 5\n";
    let e = Spec::parse(text, "bad.toml").unwrap_err().to_string();
    assert!(e.contains("rate_ps"), "{e}");
    assert!(e.contains("line 4"), "{e}");
    assert!(e.contains("bad.toml"), "{e}");
}

#[test]
fn zero_rate_is_rejected() {
    let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_pps = 0\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(e.contains("positive number"), "{e}");
    assert!(e.contains("line 4"), "{e}");
}

#[test]
fn frame_size_bounds() {
    for (size, ok) in [(63, false), (64, true), (1518, true), (1519, false)] {
        let text = format!("[experiment]\nname = \"x\"\n[traffic]\nframe_bytes = {size}\n");
        let r = Spec::parse(&text, "s");
        assert_eq!(r.is_ok(), ok, "{size}: {r:?}");
        if let Err(e) = r {
            let e = e.to_string();
            assert!(e.contains("frame_bytes") && e.contains("line 4"), "{e}");
        }
    }
}

#[test]
fn sweep_over_unknown_key_or_bad_value_is_rejected() {
    let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rte\" = [1]\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(e.contains("traffic.rte") && e.contains("rte"), "{e}");
    let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rate_pps\" = [10, -1]\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(e.contains("rate_pps"), "{e}");
    let text = "[experiment]\nname = \"x\"\n[sweep]\n\"traffic.rate_pps\" = []\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(e.contains("empty list") && e.contains("line 4"), "{e}");
}

#[test]
fn bad_anomaly_and_dut_kind() {
    let text = "[experiment]\nname = \"x\"\n[analysis]\nanomalies = [\"2:fast\"]\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(e.contains("2:fast"), "{e}");
    let text = "[experiment]\nname = \"x\"\n[dut]\nkind = \"linux-ruter\"\n";
    let e = Spec::parse(text, "s").unwrap_err().to_string();
    assert!(
        e.contains("linux-ruter") && e.contains("linux-router"),
        "{e}"
    );
}

#[test]
fn includes_merge_under_the_file_and_resolve_relative_paths() {
    let dir = std::env::temp_dir().join(format!("nflab-include-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("frag")).unwrap();
    std::fs::write(
        dir.join("frag/common.toml"),
        "[traffic]\nrate_pps = 1234\nframe_bytes = 128\n[analysis]\nanomalies = [\"3:1ms\"]\n",
    )
    .unwrap();
    std::fs::write(
            dir.join("main.toml"),
            "[experiment]\nname = \"inc\"\ninclude = [\"frag/common.toml\"]\n[traffic]\nframe_bytes = 256\n",
        )
        .unwrap();
    let (spec, text) = Spec::from_file(&dir.join("main.toml")).unwrap();
    assert_eq!(spec.traffic.rate_pps, Rate::Pps(1234.0));
    assert_eq!(
        spec.traffic.frame_bytes, 256,
        "the file overrides its includes"
    );
    assert_eq!(spec.analysis.anomalies, vec!["3:1ms".to_string()]);
    assert!(spec.experiment.include.is_empty() && !text.contains("include"));
    // The resolved text parses on its own (it is what spec.toml stores).
    assert_eq!(Spec::parse(&text, "resolved").unwrap(), spec);
    std::fs::write(
        dir.join("bad.toml"),
        "[experiment]\nname = \"x\"\ninclude = [\"missing.toml\"]\n",
    )
    .unwrap();
    let e = Spec::from_file(&dir.join("bad.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml") && e.contains("line 3"), "{e}");
    std::fs::write(
        dir.join("loop.toml"),
        "[experiment]\nname = \"x\"\ninclude = [\"loop.toml\"]\n",
    )
    .unwrap();
    let e = Spec::from_file(&dir.join("loop.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cycle"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn includes_stay_under_the_specs_directory_and_never_echo_a_file_that_is_not_a_spec() {
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let tmp = std::env::temp_dir();
    let root = Gone(nflab_io::safe_fs::fresh_private_dir(&tmp, "nflab-include-confined").unwrap());
    let specs = root.0.join("specs");
    std::fs::create_dir(&specs).unwrap();
    // A file of the host that is not a spec, as /etc/shadow is.
    let secret = root.0.join("shadow");
    std::fs::write(&secret, "root:$6$SECRETHASH$xyz:19000:0:99999:7:::\n").unwrap();
    std::fs::write(specs.join("frag.toml"), "[traffic]\nrate_pps = 1234\n").unwrap();
    std::os::unix::fs::symlink(&secret, specs.join("link.toml")).unwrap();
    let spec_with = |name: &str, inc: &str| {
        let p = specs.join(name);
        let inc = toml::Value::String(inc.into());
        std::fs::write(
            &p,
            format!("[experiment]\nname = \"x\"\ninclude = [{inc}]\n"),
        )
        .unwrap();
        p
    };
    for (name, inc) in [
        ("abs.toml", secret.to_str().unwrap()),
        ("up.toml", "../shadow"),
        ("via-link.toml", "link.toml"),
        ("dots.toml", "./../specs/../shadow"),
    ] {
        let p = spec_with(name, inc);
        let e = Spec::from_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("outside")
                && e.contains("--allow-include-outside")
                && e.contains("experiment.include")
                && !e.contains("SECRETHASH")
                && !e.contains('\n'),
            "{inc}: {e}"
        );
        // Allowed outside: read, but a file that is not TOML is never echoed.
        let e = Spec::from_file_with(&p, true).unwrap_err().to_string();
        assert!(
            !e.contains("SECRETHASH") && e.contains("line 1"),
            "{inc}: {e}"
        );
    }
    let p = spec_with("ok.toml", "frag.toml");
    assert_eq!(
        Spec::from_file(&p).unwrap().0.traffic.rate_pps,
        Rate::Pps(1234.0)
    );
}

#[test]
fn model_section_parses_and_bad_keys_are_one_sentence() {
    let ok = "[experiment]\nname = \"x\"\n[model]\ncpu_hz = 3.3e9\ninterrupts = [\"250:10900\"]\n";
    let s = Spec::parse(ok, "s").unwrap();
    let m = s.model.clone().unwrap();
    assert!(m.fit && m.cores == 1.0 && m.sim_packets == 200_000);
    assert_eq!(m.cpu_hz, Some(3.3e9));
    // Round trip: spec.toml as stored parses to the same spec.
    assert_eq!(Spec::parse(&toml::to_string(&s).unwrap(), "s").unwrap(), s);
    assert!(Spec::parse("[experiment]\nname = \"x\"\n", "s")
        .unwrap()
        .model
        .is_none());
    for (body, needles) in [
        ("cpu_hx = 1e9", &["cpu_hx", "line 4", "cpu_hz"][..]),
        ("cores = 0", &["model.cores = 0", "line 4"]),
        ("cpu_hz = -1", &["model.cpu_hz", "line 4"]),
        ("batch = 0", &["model.batch = 0", "1 or more"]),
        (
            "interrupts = [\"250\"]",
            &["model.interrupts", "RATE_HZ:DURATION_NS", "line 4"],
        ),
        ("sim_packets = 0", &["model.sim_packets", "1 to"]),
        ("fit = \"yes\"", &["fit", "line 4"]),
    ] {
        let text = format!("[experiment]\nname = \"x\"\n[model]\n{body}\n");
        let e = Spec::parse(&text, "s").unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        for n in needles {
            assert!(e.contains(n), "{body}: {n:?} not in {e}");
        }
    }
}

#[test]
fn tx_timestamp_key_values_and_its_backend() {
    let t = |v: &str| {
        Spec::parse(
            &format!("[experiment]\nname = \"x\"\n[traffic]\ntx_timestamp = {v}\n"),
            "s",
        )
    };
    assert_eq!(
        t("\"kernel\"").unwrap().traffic.tx_timestamp,
        TxTimestampMode::Kernel
    );
    assert_eq!(
        t("\"app\"").unwrap().traffic.tx_timestamp,
        TxTimestampMode::App
    );
    let d = Spec::parse("[experiment]\nname = \"x\"\n", "s").unwrap();
    assert_eq!(d.traffic.tx_timestamp, TxTimestampMode::App);
    let e = t("\"nic\"").unwrap_err().to_string();
    assert!(
        e.contains("line 4") && e.contains("nic") && e.contains("`app`") && e.contains("`kernel`"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    let e = Spec::parse(
        "[experiment]\nname = \"x\"\n[traffic]\nbackend = \"af_xdp\"\ntx_timestamp = \"kernel\"\n",
        "s",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 5") && e.contains("tx_timestamp") && e.contains("af_packet"),
        "{e}"
    );
}

#[test]
fn rate_max_round_trips() {
    let text = "[experiment]\nname = \"x\"\n[traffic]\nrate_pps = \"max\"\n";
    let s = Spec::parse(text, "s").unwrap();
    assert_eq!(s.traffic.rate_pps, Rate::Max);
    let back = toml::to_string(&s).unwrap();
    assert!(back.contains("rate_pps = \"max\""), "{back}");
}
