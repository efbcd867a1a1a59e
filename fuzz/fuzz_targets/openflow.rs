//! The OpenFlow 1.3 codec and the proxy's translations (`nflab_sdn`): what
//! arrives on a control channel never panics them. A message the codec
//! accepts encodes to bytes that decode to the same message and encode to
//! the same bytes again; so do the typed multipart bodies (flow stats,
//! port descriptions), byte for byte — a port name of 16 bytes that are
//! not UTF-8 or have no NUL included. A FLOW_MOD the proxy translates yields per-switch
//! FLOW_MODs that round-trip too, and PACKET_IN/PACKET_OUT translations
//! keep their data. A 1.0 message round-trips, and so does the 1.3
//! message the proxy makes of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_sdn::of10::Message10;
use nflab_sdn::of13::buf::Reader;
use nflab_sdn::of13::message::Body;
use nflab_sdn::of13::multipart::{mp, FlowStats, Port};
use nflab_sdn::of13::{frame_len, Match, Message};
use nflab_sdn::proxy::switch10;
use nflab_sdn::proxy::translate::{flow_mod_down, packet_in_up, packet_out_down, Maps};
use nflab_sdn::proxy::ProxyConfig;

fn maps() -> Maps {
    // The ACL example's two switches, tables 0/1 and a link between them.
    let cfg: ProxyConfig = toml::from_str(include_str!("../../examples/sdn/proxy.toml"))
        .expect("the example proxy config parses");
    Maps::new(&cfg)
}

/// The bytes after a PACKET_IN's 16-byte head and its match.
fn after_match(body: &[u8]) -> Option<Vec<u8>> {
    let mut r = Reader::new(body.get(16..)?, "packet-in match");
    Match::decode(&mut r).ok()?;
    Some(r.rest().to_vec())
}

fn round_trip(m: &Message) {
    let bytes = m.encode();
    let again = Message::decode(&bytes).expect("an encoded message decodes");
    assert_eq!(&again, m, "message changed in an encode/decode round trip");
    assert_eq!(again.encode(), bytes, "encoding is not stable");
}

/// A 1.0 message (a switch behind the proxy that speaks only 1.0): it
/// round-trips, and what the proxy makes of it in 1.3 round-trips too.
fn of10_message(bytes: &[u8]) {
    let Ok(m) = Message10::decode(bytes) else {
        return;
    };
    let wire = m.encode();
    let again = Message10::decode(&wire).expect("an encoded 1.0 message decodes");
    assert_eq!(
        again, m,
        "1.0 message changed in an encode/decode round trip"
    );
    assert_eq!(again.encode(), wire, "1.0 encoding is not stable");
    if let Some(up) = switch10::up(m) {
        round_trip(&up);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(Some(len)) = frame_len(data) else {
        return;
    };
    if data[0] == nflab_sdn::of10::VERSION {
        return of10_message(&data[..len]);
    }
    let Ok(m) = Message::decode(&data[..len]) else {
        return;
    };
    round_trip(&m);
    match &m.body {
        Body::MultipartReply(mp::FLOW, _, body) => {
            if let Ok(v) = FlowStats::decode_all(body) {
                let mut out = Vec::new();
                for fs in &v {
                    fs.encode(&mut out);
                }
                assert_eq!(
                    FlowStats::decode_all(&out).expect("re-encoded flow stats"),
                    v
                );
            }
        }
        Body::MultipartReply(mp::PORT_DESC, _, body) => {
            if let Ok(v) = Port::decode_all(body) {
                let mut out = Vec::new();
                for p in &v {
                    p.encode(&mut out);
                }
                assert_eq!(Port::decode_all(&out).expect("re-encoded ports"), v);
                // The names byte for byte (pad bytes may come back as zeros).
                for (a, b) in out.chunks(Port::LEN).zip(body.chunks(Port::LEN)) {
                    assert_eq!(a[16..32], b[16..32], "a port name changed");
                }
            }
        }
        Body::FlowMod(fm) => {
            if let Ok(t) = flow_mod_down(&maps(), fm) {
                for (_, local) in t.mods {
                    round_trip(&Message::new(m.xid, Body::FlowMod(local)));
                }
                for e in t.entries {
                    round_trip(&Message::new(m.xid, Body::FlowMod(e.flow_mod())));
                }
            }
        }
        Body::Other(10, body) => {
            // PACKET_IN: the switch's table and port become global; what
            // follows the match (pad and frame) is carried unchanged.
            if let Some(up) = packet_in_up(&maps(), 0, body) {
                assert_eq!(after_match(&up), after_match(body), "the frame changed");
            }
        }
        Body::Other(13, body) => {
            let _ = packet_out_down(&maps(), body);
        }
        _ => {}
    }
});
