//! The OpenFlow proxy's switch-facing side (`nflab_sdn::proxy`): whatever a
//! switch sends — OpenFlow 1.3 or 1.0, replies of any length to the
//! controller's pending requests, messages of either of two switches — the
//! proxy's core translates or drops it and never panics (a port-stats body
//! whose length was not a multiple of 112 once took the core down, and
//! with it every switch).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nflab_sdn::proxy::fuzz_switch_side(data);
});
