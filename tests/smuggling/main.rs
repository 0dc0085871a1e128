//! Request smuggling and protocol abuse (issue 14): a differential corpus
//! of malformed or ambiguous HTTP/1 requests (cases.rs), each sent alone
//! and again followed by a pipelined `GET /second` (and that once more
//! delivered in two writes split mid-head, which must not change the
//! outcome), through a `proxy_pass` to a recording origin (harness.rs)
//! that notes the exact framing of everything it receives.
//!
//! Per case the outcome is: the response statuses in order, whether the
//! server closed the connection, and the request lines and bodies that
//! reached the origin. The rules, for sluice:
//!
//! 1. Its outcome equals nginx 1.22's, or the case is in `STRICTER` (with
//!    the reason) and sluice's outcome is a stricter version of nginx's:
//!    the same answers up to a point where sluice answers 4xx/5xx and
//!    closes (or just closes), and a prefix of what nginx forwarded.
//! 2. What reaches the origin is unambiguously framed (one Content-Length
//!    or chunked, CRLF lines, valid names and values, nothing after a
//!    closing request), no origin body carries the pipelined second
//!    request, and every origin request is answered to the client (none
//!    is forwarded after sluice answered an error and closed).
//!
//! nginx's outcomes are checked in as tests/smuggling/expected.txt, so the
//! rule holds without nginx installed. `SLUICE_TEST_NGINX=1` runs nginx too
//! and compares with it live; adding `SLUICE_SMUGGLING_RECORD=1` rewrites
//! expected.txt from that run:
//!
//! ```sh
//! SLUICE_TEST_NGINX=1 SLUICE_SMUGGLING_RECORD=1 cargo test --release --test smuggling
//! ```

#[path = "../common/mod.rs"]
mod common;

mod cases;
mod h2;
mod harness;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness::{ORIGIN_BODY, Outcome, Recorder};

/// The request pipelined after a case's bytes.
const SECOND: &[u8] = b"GET /second HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// Cases where sluice answers differently from nginx 1.22, always by
/// refusing (4xx, closing) what nginx accepted. An entry names a base case
/// and covers its `+2nd` variant too.
const STRICTER: &[(&str, &str)] = &[
    // nginx answers 413 and keeps the connection to discard the announced
    // body; sluice answers 413 and closes instead of reading 1 EB.
    ("cl_huge_18", "413, then close rather than discard"),
    // A vertical tab is a control byte httparse refuses in any header
    // value (400); nginx takes the value and refuses the coding (501).
    ("te_vertical_tab", "400 for a control byte in a header value; nginx 501"),
    // nginx's request-line parser takes any scheme in absolute-form;
    // sluice only http and https.
    ("abs_uri_bad_scheme", "400 for a scheme other than http(s)"),
    // httparse knows HTTP/1.0 and HTTP/1.1 only (sluice reads HTTP/1.2 to
    // 1.9 as 1.1 itself); nginx takes any 1.x up to 1.99, and "HTTP/1.1 "
    // with a space before the CRLF.
    ("v_http1_10", "400 for HTTP/1.10"),
    ("v_trailing_space", "400 for a space after the version"),
    // nginx drops (ignore_invalid_headers) a header line without a colon;
    // httparse refuses the head.
    ("hdr_no_colon", "400 for a header line without a colon"),
    // nginx passes DEL (0x7f) in a header value on to the origin (which
    // refuses it here: 502); sluice refuses the request.
    ("hdr_del_in_value", "400 for DEL in a header value"),
];

/// Servers per kind run in parallel, each with its own origin.
const SHARDS: usize = 4;

/// How long a connection may stay silent before a case is over. Cases
/// whose outcome then differs from the expectation run again with `SLOW`,
/// so a loaded machine does not turn a late answer into a difference; a
/// recording run uses `SLOW` throughout.
const QUICK: Duration = Duration::from_millis(400);
const SLOW: Duration = Duration::from_millis(2000);

fn all_cases() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, bytes) in cases::base_cases() {
        let mut two = bytes.clone();
        two.extend_from_slice(SECOND);
        out.push((name.clone(), bytes));
        out.push((format!("{name}+2nd"), two.clone()));
        out.push((format!("{name}+2nd{SPLIT}"), two));
    }
    out
}

/// The suffix of a case sent in two writes 30 ms apart, split in the
/// middle of its first head: its outcome must not depend on how the bytes
/// arrived, so it is held to the unsplit case's expectation.
const SPLIT: &str = "~split";

fn split_point(name: &str, bytes: &[u8]) -> Option<usize> {
    name.ends_with(SPLIT).then(|| bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(bytes.len()).max(2) / 2)
}

fn expected_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/smuggling/expected.txt")
}

fn start_server(nginx: bool, origin: u16) -> common::TestServer {
    common::builder()
        .server_is_nginx(nginx)
        .http(&format!(
            "access_log off;\n\
             server {{\n\
                 listen 127.0.0.1:{{port}};\n\
                 server_name localhost;\n\
                 location / {{ proxy_pass http://127.0.0.1:{origin}; }}\n\
             }}"
        ))
        .start()
}

/// Runs every case against one kind of server; outcomes and the origin's
/// framing complaints per case.
fn run_all(nginx: bool, cases: &[(String, Vec<u8>)], idle: Duration) -> BTreeMap<String, (Outcome, Vec<String>)> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(BTreeMap::new());
    std::thread::scope(|sc| {
        for _ in 0..SHARDS.min(cases.len()) {
            sc.spawn(|| {
                let origin = Recorder::start();
                let server = start_server(nginx, origin.port);
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((name, bytes)) = cases.get(i) else { break };
                    let (got, closed) = harness::exchange(server.port, bytes, split_point(name, bytes), idle);
                    let rs = harness::responses(&got);
                    let reqs = origin.take();
                    let outcome = Outcome {
                        statuses: rs.iter().map(|r| r.0).collect(),
                        from_origin: rs.iter().filter(|r| r.1 == ORIGIN_BODY).count(),
                        closed,
                        origin: reqs.iter().map(|r| r.summary()).collect(),
                    };
                    let flags = reqs.iter().flat_map(|r| r.flags.iter().map(|f| format!("{}: {f}", r.line))).collect();
                    results.lock().unwrap().insert(name.clone(), (outcome, flags));
                }
            });
        }
    });
    results.into_inner().unwrap()
}

/// sluice's outcome refuses where nginx's accepted, and otherwise matches.
fn is_stricter(s: &Outcome, n: &Outcome) -> bool {
    let k = s.statuses.iter().zip(&n.statuses).take_while(|(a, b)| a == b).count();
    let answers = s.statuses.len() == k || (s.statuses.len() == k + 1 && s.statuses[k] >= 400);
    let forwarded = n.origin.starts_with(&s.origin);
    answers && forwarded && (s.closed || (s.statuses.len() == n.statuses.len() && s.closed == n.closed))
}

/// Rule 2: failures of sluice's own, whatever nginx does.
fn safety_failures(name: &str, s: &Outcome, flags: &[String]) -> Vec<String> {
    let mut f = Vec::new();
    for fl in flags {
        f.push(format!("{name}: origin received ambiguous framing: {fl}"));
    }
    for o in &s.origin {
        let body = o.split_once(" {").map(|x| x.1).unwrap_or("");
        if body.contains("GET /second") {
            f.push(format!("{name}: the pipelined request reached the origin inside a body: {o}"));
        }
    }
    if s.origin.len() != s.from_origin {
        f.push(format!(
            "{name}: {} requests reached the origin but {} origin answers reached the client",
            s.origin.len(),
            s.from_origin
        ));
    }
    f
}

/// nginx's outcome for a case; a split case without its own (from
/// expected.txt) is held to the unsplit one's.
fn expectation<'a>(nginx: &'a BTreeMap<String, Outcome>, name: &str) -> Option<&'a Outcome> {
    nginx.get(name).or_else(|| nginx.get(name.strip_suffix(SPLIT)?))
}

fn allowed(name: &str) -> Option<&'static str> {
    let base = name.strip_suffix(SPLIT).unwrap_or(name);
    let base = base.strip_suffix("+2nd").unwrap_or(base);
    STRICTER.iter().find(|(n, _)| *n == base).map(|(_, why)| *why)
}

fn read_expected() -> BTreeMap<String, Outcome> {
    let text = std::fs::read_to_string(expected_path()).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, rest) = l.split_once('\t').unwrap_or_else(|| panic!("bad expectations line {l:?}"));
            (name.to_string(), Outcome::parse(rest).unwrap_or_else(|| panic!("bad expectations line {l:?}")))
        })
        .collect()
}

fn write_expected(nginx: &BTreeMap<String, (Outcome, Vec<String>)>, order: &[(String, Vec<u8>)]) {
    let mut out = String::from(
        "# nginx 1.22's outcome per case of tests/smuggling/cases.rs, proxying to a\n\
         # recording origin: NAME<TAB>STATUSES<TAB>close|open<TAB>ORIGIN REQUESTS\n\
         # (request line {escaped body}, ' | ' between requests; '-' for none).\n\
         # Generated: SLUICE_TEST_NGINX=1 SLUICE_SMUGGLING_RECORD=1 cargo test --release --test smuggling\n",
    );
    for (name, _) in order.iter().filter(|(n, _)| !n.ends_with(SPLIT)) {
        out.push_str(&format!("{name}\t{}\n", nginx[name].0.line()));
    }
    std::fs::write(expected_path(), out).unwrap();
}

#[test]
fn http1_corpus_agrees_with_nginx_or_is_stricter() {
    let cases = all_cases();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    let live = std::env::var_os("SLUICE_TEST_NGINX").is_some();
    let record = std::env::var_os("SLUICE_SMUGGLING_RECORD").is_some();
    let mut sluice = run_all(false, &cases, QUICK);
    let nginx: BTreeMap<String, Outcome> = if live {
        let mut n = run_all(true, &cases, if record { SLOW } else { QUICK });
        let differ: Vec<_> = cases.iter().filter(|(k, _)| sluice[k].0.line() != n[k].0.line()).cloned().collect();
        if !record {
            n.extend(run_all(true, &differ, SLOW));
        }
        for (name, (o, flags)) in &n {
            if !flags.is_empty() {
                println!("nginx forwarded ambiguous framing for {name}: {flags:?} ({})", o.line());
            }
        }
        if record {
            write_expected(&n, &cases);
        }
        n.into_iter().map(|(k, v)| (k, v.0)).collect()
    } else {
        read_expected()
    };
    let differ: Vec<_> = cases
        .iter()
        .filter(|(k, _)| expectation(&nginx, k).is_none_or(|n| n.line() != sluice[k].0.line()))
        .cloned()
        .collect();
    sluice.extend(run_all(false, &differ, SLOW));

    let mut failures = Vec::new();
    let (mut agree, mut stricter) = (0, 0);
    let mut used = std::collections::BTreeSet::new();
    for (name, _) in &cases {
        let (s, flags) = &sluice[name];
        failures.extend(safety_failures(name, s, flags));
        let Some(n) = expectation(&nginx, name) else {
            failures.push(format!("{name}: no nginx expectation (re-record expected.txt)"));
            continue;
        };
        if s.line() == n.line() {
            agree += 1;
        } else if let Some(why) = allowed(name) {
            let base = name.strip_suffix(SPLIT).unwrap_or(name);
            used.insert(base.strip_suffix("+2nd").unwrap_or(base).to_string());
            if is_stricter(s, n) {
                stricter += 1;
                println!("stricter {name}: sluice {} / nginx {} ({why})", s.line(), n.line());
            } else {
                failures.push(format!(
                    "{name}: allowed as stricter but is not\n  sluice {}\n  nginx  {}",
                    s.line(),
                    n.line()
                ));
            }
        } else {
            failures.push(format!("{name}: differs from nginx\n  sluice {}\n  nginx  {}", s.line(), n.line()));
        }
    }
    for (n, _) in STRICTER {
        if !used.contains(*n) {
            failures.push(format!("{n}: in STRICTER but sluice agrees with nginx in both variants"));
        }
    }
    println!("{} cases: {agree} agree with nginx, {stricter} stricter", cases.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
