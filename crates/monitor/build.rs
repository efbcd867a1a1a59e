//! Compile the BPF programs in `src/bpf/` with clang and generate their skeletons.
//!
//! No vmlinux.h is generated: `src/bpf/nflab_core.h` declares the few kernel
//! structs the programs read, with CO-RE relocations, so the build needs neither
//! bpftool nor the build host's BTF, and the objects load on any kernel with BTF.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: [&str; 4] = ["udp", "stages", "caps", "tap"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        if let Err(e) = SkeletonBuilder::new()
            .source(&src)
            .clang_args(["-Wall", "-Wno-unused-function", "-Isrc/bpf"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
        {
            panic!(
                "cannot build the BPF program {src}: {e:#}\n\
                 nflab-monitor needs clang (`apt-get install clang`, see scripts/deps.txt)"
            );
        }
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf/nflab_core.h");
    println!("cargo:rerun-if-changed=src/bpf/packet.h");
    println!("cargo:rerun-if-changed=src/bpf/ringbuf.h");
}
