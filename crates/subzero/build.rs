//! Link flags for the `subzero` binary.
//!
//! The binary is position-independent (ASLR) and carries ~40,000 relative relocations,
//! applied at every start of the broker (static-pie: by its own start-up code, see
//! `.cargo/rustc-wrapper`) and of every worker (by the dynamic loader). Where
//! the toolchain and the C library support it (binutils ≥ 2.38, glibc ≥ 2.36), they are
//! packed as `DT_RELR` (`-z pack-relative-relocs`): ~16 KB instead of ~950 KB of `.rela.dyn`
//! to read, and a tight loop instead of one entry per address. A C library without
//! `GLIBC_ABI_DT_RELR` gets the ordinary table, so the binary still runs everywhere it did.
//!
//! A host waits for the broker's first reply, and every 64 KiB of code its start touches is
//! a page fault: `startup.order` (written by `cargo xtask startup-order`) names the functions
//! `subzero mcp` runs until that reply, and the linker places them first, together. Only
//! LLD reads such a file; it is the toolchain's own linker on x86-64 Linux (Rust ≥ 1.90),
//! and a build that names another linker links in the default order.

use std::process::Command;

/// Names what a bench build leaves out (`cargo xtask bench --only machinery` measures the
/// broker's cold start without each piece of its start-up machinery): `startup-order`,
/// `mcp-args` (the `subzero mcp` flags read without clap), comma-separated.
const WITHOUT: &str = "SUBZERO_BENCH_WITHOUT";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed={WITHOUT}");
    println!("cargo::rustc-check-cfg=cfg(subzero_without_mcp_args)");
    if without("mcp-args") {
        println!("cargo:rustc-cfg=subzero_without_mcp_args");
    }
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    if relr_supported() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    startup_order();
}

/// Link the functions of `startup.order` first, in its order, where the linker is LLD and
/// the build is optimised (the names are those of an optimised build).
fn startup_order() {
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    // `cargo xtask startup-order` asks for the linker's map of the binary it traces: the
    // shipped binary has no symbol table, and a build with one would name every symbol
    // differently (the profile is part of each crate's hash).
    println!("cargo:rerun-if-env-changed=SUBZERO_LINK_MAP");
    if let Some(map) = std::env::var_os("SUBZERO_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bin=subzero=-Wl,-Map={}",
            std::path::Path::new(&map).display()
        );
    }
    if std::env::var("OPT_LEVEL").as_deref() == Ok("0")
        || !linker_is_rust_lld()
        || without("startup-order")
    {
        return;
    }
    let order = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("startup.order");
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=subzero=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        // Names of functions a later change renamed or removed are skipped, not errors.
        println!("cargo:rustc-link-arg-bin=subzero=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether a bench build asked to leave `piece` out (see [`WITHOUT`]).
fn without(piece: &str) -> bool {
    std::env::var(WITHOUT).is_ok_and(|v| v.split(',').any(|p| p.trim() == piece))
}

/// Whether rustc links with its own LLD: its default for x86_64-unknown-linux-gnu since
/// 1.90, unless the build names a linker (`RUSTC_LINKER`, or linker flags in RUSTFLAGS).
fn linker_is_rust_lld() -> bool {
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu")
        || std::env::var_os("RUSTC_LINKER").is_some()
    {
        return false;
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("linker")
        || flags.contains("fuse-ld")
        || flags.contains("link-self-contained")
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(output) = Command::new(rustc).arg("-V").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&output.stdout);
    let mut parts = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    matches!((parts.next(), parts.next()), (Some(1), Some(minor)) if minor >= 90)
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
