//! The spec loader (`Spec::parse`, what `nflab run` calls on the file's
//! text): any text is refused with an error or accepted; an accepted spec
//! expands to at least one run, and written back as TOML it parses to the
//! same spec.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_lab::Spec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = Spec::parse(text, "fuzz") else {
        return;
    };
    let runs = spec.expand(text).expect("an accepted spec expands");
    assert!(!runs.is_empty(), "an accepted spec has no run");
    let Ok(back) = toml::to_string(&spec) else {
        return;
    };
    // The sweep lives in the text, not only in the struct: compare the struct.
    if let Ok(again) = toml::from_str::<Spec>(&back) {
        assert_eq!(
            again, spec,
            "spec changed in a TOML write/read round trip:\n{back}"
        );
    } else {
        panic!("a spec written as TOML does not read back:\n{back}");
    }
});
