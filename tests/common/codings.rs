//! Helpers for tests/compression.rs: test bodies, independent encoders and
//! decoders (Python's gzip, the brotli and zstd CLIs), HEAD and h2c
//! requests.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use super::*;

pub fn nginx() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// Compressible text: numbered lines of a few words.
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    let words = ["alpha", "beta", "gamma", "delta", "sluice", "nginx", "gate", "river", "<p>", "</p>"];
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 64);
    let mut line = 0u64;
    while v.len() < len {
        line += 1;
        v.extend_from_slice(format!("{line}:").as_bytes());
        for _ in 0..6 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(b' ');
            v.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        }
        v.push(b'\n');
    }
    v.truncate(len);
    v
}

/// Runs an external decoder (or encoder) over `data`.
pub fn pipe(program: &str, args: &[&str], data: &[u8]) -> Vec<u8> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/test-all installs it)"));
    let mut stdin = child.stdin.take().unwrap();
    let input = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    writer.join().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{program} {args:?} failed on {} bytes: {err}", data.len());
    out
}

/// Decodes a body with an independent decoder for its Content-Encoding.
pub fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => pipe(
            "python3",
            &["-c", "import gzip,sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))"],
            data,
        ),
        "br" => pipe("brotli", &["-d", "-c"], data),
        "zstd" => pipe("zstd", &["-d", "-c", "-q"], data),
        other => panic!("unexpected Content-Encoding {other:?}"),
    }
}

pub fn encode(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => pipe(
            "python3",
            &["-c", "import gzip,sys; sys.stdout.buffer.write(gzip.compress(sys.stdin.buffer.read(), 9))"],
            data,
        ),
        "br" => pipe("brotli", &["-c", "-q", "5"], data),
        "zstd" => pipe("zstd", &["-c", "-q", "-3"], data),
        other => panic!("{other}"),
    }
}

/// Asserts a response is `coding`-encoded the way nginx sends it, and
/// that it decodes to `want`.
pub fn assert_encoded(r: &Response, coding: &str, want: &[u8], what: &str) {
    assert_eq!(r.header("Content-Encoding"), Some(coding), "{what}: {}", r.head);
    assert_eq!(r.header("Content-Length"), None, "{what}: {}", r.head);
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"), "{what}: {}", r.head);
    assert_eq!(r.header("Accept-Ranges"), None, "{what}: {}", r.head);
    let got = decode(coding, &r.body);
    assert!(got == want, "{what}: decoded {} bytes, want {}", got.len(), want.len());
}

pub fn assert_plain(r: &Response, want: &[u8], what: &str) {
    assert_eq!(r.header("Content-Encoding"), None, "{what}: {}", r.head);
    assert!(r.body == want, "{what}: {} bytes, want {}", r.body.len(), want.len());
}

pub fn head_request(port: u16, path: &str, headers: &[&str]) -> Response {
    let mut c = Conn::connect(port);
    let mut r = format!("HEAD {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    c.send(r);
    c.read_response_to("HEAD")
}

/// curl over h2c prior knowledge: (headers lowercased, body).
pub fn h2c(port: u16, path: &str, headers: &[&str]) -> (Vec<(String, String)>, Vec<u8>) {
    let dir = temp_dir("h2c");
    let (hf, bf) = (dir.join("h"), dir.join("b"));
    let mut args = vec!["-sS", "--max-time", "30", "--http2-prior-knowledge"];
    for h in headers {
        args.push("-H");
        args.push(h);
    }
    let (hs, bs) = (hf.display().to_string(), bf.display().to_string());
    let url = format!("http://127.0.0.1:{port}{path}");
    args.extend(["-D", &hs, "-o", &bs, &url]);
    let c = curl(&args);
    assert!(c.status.success(), "curl: {}", c.stderr);
    let head = std::fs::read_to_string(&hf).unwrap();
    assert!(head.starts_with("HTTP/2 "), "{head}");
    let hdrs = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (hdrs, std::fs::read(&bf).unwrap())
}

pub fn h(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}
