//! NGINX Plus's `state FILE`: an upstream's servers as `server` lines in
//! nginx syntax, read when the configuration is loaded
//! (`config::upstream_block`, with the configuration's own parser, so a
//! bad line is refused with its file and line as nginx refuses it) and
//! written here after every run-time API change: to a temporary file in
//! the same directory, flushed, then renamed over the old one, so a crash
//! or a full disk never leaves a half-written list to start from.

use std::io::Write;
use std::path::Path;

use super::ServerSpec;
use crate::config::proxy::PeerConf;

/// The `server` line of one server, parameters in nginx's spelling.
pub fn line(spec: &ServerSpec) -> String {
    let p = &spec.params;
    let mut s = format!("server {}", quote(&spec.server));
    if spec.resolve {
        s.push_str(" resolve");
    }
    if let Some(svc) = &spec.service {
        s.push_str(&format!(" service={}", quote(svc)));
    }
    params(&mut s, p);
    s.push(';');
    s
}

fn params(s: &mut String, p: &PeerConf) {
    use std::fmt::Write as _;
    let _ = write!(s, " weight={} max_conns={} max_fails={}", p.weight, p.max_conns, p.max_fails);
    let _ = write!(s, " fail_timeout={}s", p.fail_timeout.as_secs());
    if !p.slow_start.is_zero() {
        let _ = write!(s, " slow_start={}s", p.slow_start.as_secs());
    }
    if let Some(r) = &p.route {
        let _ = write!(s, " {}", quote(&format!("route={r}")));
    }
    for (on, word) in [(p.backup, " backup"), (p.down, " down"), (p.drain, " drain")] {
        if on {
            s.push_str(word);
        }
    }
}

/// Quotes a value that nginx's lexer would otherwise split or escape.
fn quote(v: &str) -> String {
    if v.bytes()
        .any(|b| b.is_ascii_whitespace() || matches!(b, b';' | b'{' | b'}' | b'"' | b'\'' | b'\\' | b'$' | b'#'))
    {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        v.to_string()
    }
}

/// Writes the file atomically (temporary file, fsync, rename).
pub fn write(path: &Path, specs: &[ServerSpec]) -> Result<(), String> {
    let mut text = String::new();
    for s in specs {
        text.push_str(&line(s));
        text.push('\n');
    }
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        std::process::id()
    ));
    let failed = |call: &str, p: &Path, e: std::io::Error| {
        format!("{}() \"{}\" failed ({})", call, p.display(), crate::process::signal::os_error(&e))
    };
    let mut f = std::fs::File::create(&tmp).map_err(|e| failed("open", &tmp, e))?;
    f.write_all(text.as_bytes()).map_err(|e| failed("write", &tmp, e))?;
    f.sync_all().map_err(|e| failed("fsync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        failed("rename", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_read_back_as_written() {
        let mut p = PeerConf::new("10.0.0.1:8080".parse().unwrap(), None, "10.0.0.1:8080".into());
        p.weight = 3;
        p.slow_start = Duration::from_secs(30);
        p.down = true;
        p.route = Some("a".into());
        let spec = ServerSpec {
            server: "10.0.0.1:8080".into(),
            resolve: false,
            host: "10.0.0.1".into(),
            service: None,
            params: p,
        };
        assert_eq!(
            line(&spec),
            "server 10.0.0.1:8080 weight=3 max_conns=0 max_fails=1 fail_timeout=10s slow_start=30s route=a down;"
        );
        assert_eq!(quote("a b"), "\"a b\"");
    }
}
