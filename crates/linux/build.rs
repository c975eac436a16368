//! Builds the XDP program (bpf/corecap_xdp.c) with clang when it is present
//! (`CORECAP_BPF_CLANG` names another compiler); otherwise the committed object
//! (bpf/corecap_xdp.o, made by bpf/build.sh) is used, so a build without clang works too.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let obj = out.join("corecap_xdp.o");
    println!("cargo:rerun-if-changed=bpf/corecap_xdp.c");
    println!("cargo:rerun-if-changed=bpf/corecap_xdp.o");
    println!("cargo:rerun-if-env-changed=CORECAP_BPF_CLANG");
    let clang = std::env::var("CORECAP_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let built = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .args(["-c", "bpf/corecap_xdp.c", "-o"])
        .arg(&obj)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !built {
        std::fs::copy("bpf/corecap_xdp.o", &obj).expect("copy the prebuilt XDP object");
    }
}
