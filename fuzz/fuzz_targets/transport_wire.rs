//! The transport codec (`nflab_transport::wire`): `Repr::parse` never
//! panics; a datagram it accepts is one `Packet::new_checked` accepts too,
//! and emitted again it parses to the same `Repr`, no longer than the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_transport::wire::{Packet, Repr};

fuzz_target!(|data: &[u8]| {
    let checked = Packet::new_checked(data);
    let Ok(repr) = Repr::parse(data) else {
        return;
    };
    assert!(
        checked.is_ok(),
        "Repr::parse accepted what new_checked refused"
    );
    let len = repr.buffer_len();
    assert!(
        len <= data.len(),
        "buffer_len {len} exceeds the {}-byte input",
        data.len()
    );
    let mut out = vec![0u8; len];
    assert_eq!(repr.emit(&mut out), len);
    let again = Repr::parse(&out).expect("an emitted datagram parses");
    assert_eq!(again, repr, "datagram changed in an emit/parse round trip");
});
