//! Cycles per packet of each function on its own, in memory (no I/O): the
//! `c_task` of seed 000's model, next to `c_IO` that `dut.json` reports.
//!   cargo run --release -p nflab-dataplane --example costs
use nflab_dataplane::config::{build_chain, BuildContext, FunctionConfigs};
use nflab_dataplane::{tsc, Chain, Packet};
use nflab_wire::{MacAddr, ProbeSpec, ProbeTemplate};

fn frame(dst: std::net::Ipv4Addr, seq: u64) -> Packet {
    let t = ProbeTemplate::new(&ProbeSpec {
        src_mac: MacAddr([2, 0x4e, 0x46, 0, 0, 1]),
        dst_mac: MacAddr([2, 0x4e, 0x46, 0, 1, 1]),
        vlan: None,
        src_ip: "198.18.0.1".parse().unwrap(),
        dst_ip: dst.into(),
        src_port: 49152,
        dst_port: 9,
        dscp: 0,
        ttl: 64,
        flow: 0,
        frame_bytes: 64,
        mtu: 1500,
    })
    .unwrap();
    let mut b = vec![0u8; 128];
    let n = t.write(&mut b, seq, 0);
    Packet::from_slice(&b[..n])
}

fn measure(name: &str, pipeline: &[&str], f: &FunctionConfigs, dsts: &[std::net::Ipv4Addr]) {
    let ctx = BuildContext {
        in_mac: MacAddr([2, 0x4e, 0x46, 0, 1, 1]),
        out_mac: MacAddr([2, 0x4e, 0x46, 0, 1, 2]),
        next_hop_mac: MacAddr([2, 0x4e, 0x46, 0, 0, 2]),
        icmp_source: "198.18.0.2".parse().unwrap(),
        default_routes: vec!["198.19.0.0/24 out 02:4e:46:00:00:02".into()],
        base_dir: ".".into(),
        instance: 0,
    };
    let p: Vec<String> = pipeline.iter().map(|s| s.to_string()).collect();
    let mut chain = Chain::new(build_chain(&p, f, &ctx).unwrap(), 64);
    let (batches, batch) = (20_000u64, 32usize);
    let mut seq = 0u64;
    let mut cycles = 0u64;
    for _ in 0..batches {
        for i in 0..batch {
            let mut pk = frame(dsts[(seq as usize + i) % dsts.len()], seq);
            pk.rx_ns = 1;
            chain.input().transmit(pk);
            seq += 1;
        }
        let t0 = tsc::rdtsc();
        chain.breathe(seq * 1000);
        cycles += tsc::rdtsc() - t0;
        while chain.output().receive().is_some() {}
        while chain.back().receive().is_some() {}
    }
    println!(
        "{name:28} {:8.1} cycles/packet",
        cycles as f64 / (batches * batch as u64) as f64
    );
}

fn main() {
    println!(
        "TSC {:.2} GHz; batch 32, 64 B probe frames, in-memory chain",
        tsc::tsc_hz() / 1e9
    );
    let one = ["198.19.0.1".parse().unwrap()];
    let f = FunctionConfigs::default();
    measure("l2fwd", &["l2fwd"], &f, &one);
    measure("router, 1 route", &["router"], &f, &one);
    // 50k random /20../28 routes, random destinations among them.
    let mut x = 12345u32;
    let mut routes = Vec::new();
    let mut dsts = Vec::new();
    for i in 0..50_000 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let len = 20 + (i % 9) as u8;
        let a = x & (u32::MAX << (32 - len as u32));
        routes.push(format!(
            "{}/{len} out 02:4e:46:00:00:02",
            std::net::Ipv4Addr::from(a)
        ));
        dsts.push(std::net::Ipv4Addr::from(
            a | (x & !(u32::MAX << (32 - len as u32))),
        ));
    }
    routes.sort();
    routes.dedup_by(|a, b| a.split(' ').next() == b.split(' ').next());
    let fr = FunctionConfigs {
        router: Some(nflab_dataplane::config::RouterConfig {
            routes,
            ..Default::default()
        }),
        ..Default::default()
    };
    measure("router, 50k routes random", &["router"], &fr, &dsts);
    let fs = FunctionConfigs {
        sheep: Some(nflab_dataplane::config::SheepConfig {
            cycles: 0,
            accesses: 10,
            table_bytes: Some(64 << 20),
            seed: None,
        }),
        ..Default::default()
    };
    measure("sheep 10 acc, 64 MiB", &["sheep"], &fs, &one);
    let fd = FunctionConfigs {
        delayer: Some(nflab_dataplane::config::DelayerConfig {
            delay_us: 5.0,
            jitter_us: 1.0,
            ..Default::default()
        }),
        ..Default::default()
    };
    measure("delayer", &["delayer"], &fd, &one);
    measure("reorder (in order)", &["reorder"], &f, &one);
    measure("extern-dispatch roundtrip", &["extern-dispatch"], &f, &one);
    measure(
        "l2fwd+router+reorder",
        &["l2fwd", "router", "reorder"],
        &f,
        &one,
    );
}
