//! The configuration target: lexer, parser (with includes) and builder on
//! arbitrary text, through `config::load`, the call `-t` makes. It must
//! never panic.
//!
//! It must also stay off the real file system and the network, which the
//! builder otherwise reaches on a config's word: `include` and the TLS
//! file directives read any path (`include /dev/*;` would read
//! /dev/zero until memory runs out), and `listen`, `proxy_pass` and an
//! upstream's `server` resolve host names (a DNS query per input). So the
//! text is first read with the real lexer, and an input whose statements
//! name such a path or host is not loaded (its lexing still counts). What
//! stays allowed: includes and files named without a `/`, which resolve in
//! a private configuration directory holding only `mime.types`, and
//! addresses that are IP literals, ports or unix sockets.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::config::lexer::{End, Lexer};
use crate::config::{LoadOptions, Source};

/// Directives whose argument is a file the builder opens (relative to the
/// configuration's directory).
const READS_FILE: &[&str] = &[
    "include",
    "ssl_certificate",
    "ssl_certificate_key",
    "ssl_session_ticket_key",
    "ssl_stapling_file",
    "ssl_client_certificate",
    "ssl_trusted_certificate",
    "ssl_dhparam",
    "proxy_ssl_trusted_certificate",
    "proxy_ssl_certificate",
    "proxy_ssl_certificate_key",
    // `Certificate FILE` / `PrivateKey FILE`.
    "ssl_conf_command",
    "proxy_ssl_conf_command",
];

/// The prefix the target loads under: `<tmp>/sluice-fuzz-config/`, with
/// `conf/mime.types` (the shipped table) so the usual `include mime.types;`
/// works. Written once per process, atomically, so parallel fuzzing jobs
/// and the replay test share it safely.
pub(super) fn prefix() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join("sluice-fuzz-config");
        let conf = dir.join("conf");
        let mime = conf.join("mime.types");
        let text = crate::process::default_conf::MIME_TYPES;
        if std::fs::read_to_string(&mime).ok().as_deref() != Some(text) {
            let _ = std::fs::create_dir_all(&conf);
            let tmp = conf.join(format!(".mime.types.{}", std::process::id()));
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &mime);
            }
        }
        dir
    })
}

/// An address the builder takes without a name lookup: an IP literal with
/// or without a port (`[v6]` too).
fn literal_addr(a: &str) -> bool {
    a.parse::<SocketAddr>().is_ok()
        || a.parse::<IpAddr>().is_ok()
        || a.strip_prefix('[').and_then(|r| r.strip_suffix(']')).is_some_and(|v6| v6.parse::<IpAddr>().is_ok())
}

/// `listen`'s first argument, read as `parse_listen_addr` reads it.
fn listen_offline(raw: &str) -> bool {
    if raw.starts_with("unix:") || raw.starts_with('[') || raw.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let host = raw.rsplit_once(':').map_or(raw, |(h, _)| h);
    host == "*" || host.parse::<IpAddr>().is_ok()
}

/// `proxy_pass`'s URL: variables are resolved per request, not at load;
/// an upstream name is not allowed (whether the builder finds the block
/// or looks the name up depends on the rest of the file).
fn pass_offline(raw: &str) -> bool {
    if raw.contains('$') {
        return true;
    }
    match crate::config::proxy::split_url(raw) {
        Err(_) => true,
        Ok(u) => u.authority.starts_with("unix:") || literal_addr(u.authority),
    }
}

/// Whether loading `text` stays inside the private prefix and off the
/// network; conservative: every statement up to the end or the first lexer
/// error is checked, whatever block it is in.
fn confined(text: &str) -> bool {
    let mut lexer = Lexer::new(text);
    while let Ok(st) = lexer.read_statement() {
        if st.end == End::Eof {
            break;
        }
        let Some((name, args)) = st.words.split_first() else { continue };
        let arg0 = args.first().map(|w| w.text.as_str());
        let ok = match name.text.as_str() {
            n if READS_FILE.contains(&n) => args.iter().all(|w| !w.text.contains('/')),
            "listen" => arg0.is_none_or(listen_offline),
            "proxy_pass" => arg0.is_none_or(pass_offline),
            // An upstream's peer; the `server {` block has no arguments.
            "server" => arg0.is_none_or(|a| a.starts_with("unix:") || literal_addr(a)),
            // Anything but an address or CIDR is looked up as a host name.
            "debug_connection" => arg0.is_none_or(|a| crate::cidr::Cidr::parse(a).is_some()),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Loads arbitrary bytes as the main configuration file (invalid UTF-8
/// replaced, as the file loader does). Properties: no panic; an error
/// located in the main file names a line that exists.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if !confined(&text) {
        return;
    }
    let prefix = prefix();
    let name = prefix.join("conf/sluice.conf");
    let opts = LoadOptions {
        prefix: prefix.to_path_buf(),
        source: Source::Text { name: name.clone(), text: text.into_owned() },
        globals: None,
        error_log: None,
    };
    if let Err(e) = crate::config::load(&opts)
        && e.file.as_deref() == Some(name.as_path())
    {
        let lines = data.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        assert!((1..=lines).contains(&e.line), "error at line {} of a {lines}-line file: {e}", e.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement() {
        assert!(confined("events {} http { include mime.types; server { listen 127.0.0.1:8080; } }"));
        assert!(confined("http { upstream u { server 127.0.0.1:1; server unix:/s; } }"));
        assert!(confined("location / { proxy_pass http://[::1]:8080/x; } location /v { proxy_pass http://$host; }"));
        assert!(confined("listen 80; listen *:81; listen [::]:82 ssl; ssl_certificate cert.pem;"));
        for bad in [
            "include /dev/*;",
            "http { include ../x; }",
            "\"include\" /etc/passwd;",
            "ssl_certificate_key /dev/zero;",
            "listen localhost:80;",
            "proxy_pass http://example.com;",
            "proxy_pass http://backend/;",
            "upstream u { server example.com:80; }",
            "include /x; broken {",
        ] {
            assert!(!confined(bad), "{bad}");
        }
    }

    #[test]
    fn loads_a_real_config() {
        config(include_bytes!("../../conf/sluice.conf"));
        config(b"events {} http { include mime.types; server { listen 127.0.0.1:1; } }");
        config(b"events {\n\n");
    }
}
