//! Link flags for the `subzero` binary, and the build facts every binary reports
//! (`build/facts.rs`).
//!
//! The binary is position-independent (ASLR) and carries ~40,000 relative relocations,
//! applied by the dynamic loader at every start of the broker. Where
//! the toolchain and the C library support it (binutils ≥ 2.38, glibc ≥ 2.36), they are
//! packed as `DT_RELR` (`-z pack-relative-relocs`): ~16 KB instead of ~950 KB of `.rela.dyn`
//! to read, and a tight loop instead of one entry per address. A C library without
//! `GLIBC_ABI_DT_RELR` gets the ordinary table, so the binary still runs everywhere it did.

use std::process::Command;

#[path = "build/facts.rs"]
mod facts;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/facts.rs");
    facts::emit();
    println!("cargo:rerun-if-env-changed=CC");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    if relr_supported() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
/// Whether the C library the linker will use knows `DT_RELR`, and the linker the flag.
fn relr_supported() -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let Some(libc) = Command::new(&cc)
        .arg("-print-file-name=libc.so.6")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    else {
        return false;
    };
    let Ok(bytes) = std::fs::read(&libc) else {
        return false;
    };
    let marker = b"GLIBC_ABI_DT_RELR";
    if !bytes.windows(marker.len()).any(|w| w == marker) {
        return false;
    }
    Command::new(&cc)
        .args(["-Wl,--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("pack-relative-relocs"))
}
