//! Build details for `sluice -V`: the compiler's version and the TLS
//! stack's crate versions (read from Cargo.lock, so they are the ones
//! linked), as nginx's `-V` names its compiler and OpenSSL.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "rustc".into());
    println!("cargo:rustc-env=SLUICE_RUSTC_VERSION={version}");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    for (krate, var) in [("rustls", "SLUICE_RUSTLS_VERSION"), ("aws-lc-sys", "SLUICE_AWS_LC_SYS_VERSION")] {
        println!("cargo:rustc-env={var}={}", locked_version(&lock, krate).unwrap_or("unknown"));
    }
}

/// The version of `name` in Cargo.lock's `[[package]]` list.
fn locked_version<'a>(lock: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            let v = lines.next()?.trim().strip_prefix("version = \"")?;
            return v.strip_suffix('"');
        }
    }
    None
}
