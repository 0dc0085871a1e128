//! HTTP/3 through an independent client: aioquic (PyPI, installed into
//! target/h3venv by scripts/install-aioquic) driven by tests/h3/client.py,
//! which prints one JSON line per request and one for the connection.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::*;

/// The virtualenv's python, installed on first use.
pub fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let o = Command::new(root.join("scripts/install-aioquic")).output().expect("run scripts/install-aioquic");
        assert!(o.status.success(), "scripts/install-aioquic failed: {}", String::from_utf8_lossy(&o.stderr));
        PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
    })
    .clone()
}

/// One response as the client saw it.
#[derive(Debug, Clone)]
pub struct H3Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The HEADERS frame after the body, if any.
    pub trailers: Vec<(String, String)>,
    pub length: u64,
    pub sha256: String,
    /// The first KB of the body, as Latin-1 text.
    pub body: String,
    pub error: Option<String>,
    /// The code of a STOP_SENDING the server sent for the request.
    pub stop_sending: Option<u64>,
}

impl H3Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One client run: its responses, in request order, and the connection.
#[derive(Debug)]
pub struct H3Run {
    pub responses: Vec<H3Resp>,
    pub conn: Value,
    pub stderr: String,
}

impl H3Run {
    pub fn one(&self) -> &H3Resp {
        assert_eq!(self.responses.len(), 1, "{self:?}");
        &self.responses[0]
    }
}

/// `[[name, value], ...]` as pairs.
fn pairs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|p| (p[0].as_str().unwrap_or("").to_string(), p[1].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the client against 127.0.0.1:`port` with `args` (see client.py).
pub fn run(port: u16, args: &[&str]) -> H3Run {
    let mut c = Command::new(python());
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h3/client.py"));
    c.args(["127.0.0.1", &port.to_string(), "--insecure"]);
    c.args(args);
    let o = run_bounded(c, Duration::from_secs(90));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut responses = Vec::new();
    let mut conn = Value::Null;
    for line in out.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        if let Some(c) = v.get("connection") {
            conn = c.clone();
            continue;
        }
        responses.push(H3Resp {
            status: v["status"].as_u64().unwrap_or(0) as u16,
            headers: pairs(&v["headers"]),
            trailers: pairs(&v["trailers"]),
            length: v["length"].as_u64().unwrap_or(0),
            sha256: v["sha256"].as_str().unwrap_or("").to_string(),
            body: v["body"].as_str().unwrap_or("").to_string(),
            error: v["error"].as_str().map(str::to_string),
            stop_sending: v["stop_sending"].as_u64(),
        });
    }
    H3Run { responses, conn, stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

/// A GET of `path`.
pub fn get(port: u16, path: &str) -> H3Resp {
    let r = run(port, &["--request", "GET", path]);
    r.one().clone()
}

/// SHA-256 of `data` in hex, as the client reports bodies.
pub fn sha256_hex(data: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
