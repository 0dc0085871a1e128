//! The real-config corpus: server blocks as applications, distributions
//! and nginx's own documentation publish them (`tests/corpus/*.conf`, each
//! naming where it comes from), with only addresses, paths and ports
//! changed. Each must pass `-t` and answer its request script the same
//! way under sluice and under Debian's nginx (SLUICE_TEST_NGINX=1).
//!
//! A corpus file is an nginx site file (included from an `http` block
//! like Debian's) with a script in its leading comments:
//!
//! ```text
//! # origin: where the configuration is published
//! # needs: php-fpm | origin | tls      (what the harness starts)
//! # file: html/index.html = <h1>hello</h1>
//! # expect: GET /path -> 200
//! #   send: Host: example.com
//! #   header: X-Frame-Options: SAMEORIGIN
//! #   no-header: X-Powered-By
//! #   body-has: hello
//! ```
//!
//! Placeholders: `{port}`/`{port1}` listening ports, `{prefix}` the
//! server's prefix, `{fpm}` php-fpm's socket, `{origin}` the port of an
//! origin that echoes each request (method, target, then every header as
//! `name: value`). `expect: GET https:/path` fetches over TLS with curl
//! from the second port (`{port1}`), certificates under `conf/tls/`.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::fpm::Fpm;
use common::origin::*;
use common::tls::*;
use common::*;

#[derive(Default, Debug)]
struct Expect {
    method: String,
    path: String,
    status: u16,
    send: Vec<String>,
    headers: Vec<(String, String)>,
    no_headers: Vec<String>,
    body_has: Vec<String>,
}

#[derive(Default)]
struct Case {
    name: String,
    origin_note: bool,
    needs: Vec<String>,
    files: Vec<(String, String)>,
    expects: Vec<Expect>,
    text: String,
}

fn parse(path: &Path) -> Case {
    let text = fs::read_to_string(path).unwrap();
    let mut c = Case { name: path.file_stem().unwrap().to_string_lossy().into_owned(), ..Default::default() };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix('#') else { continue };
        let rest = rest.trim_start();
        if let Some(o) = rest.strip_prefix("origin:") {
            c.origin_note = !o.trim().is_empty();
        } else if let Some(n) = rest.strip_prefix("needs:") {
            c.needs.extend(n.split_whitespace().map(String::from));
        } else if let Some(f) = rest.strip_prefix("file:") {
            let (p, v) = f.split_once(" = ").unwrap_or_else(|| panic!("{}: file line {f:?}", c.name));
            c.files.push((p.trim().to_string(), v.replace("\\n", "\n")));
        } else if let Some(e) = rest.strip_prefix("expect:") {
            let (req, status) = e.split_once("->").unwrap_or_else(|| panic!("{}: expect {e:?}", c.name));
            let mut req = req.split_whitespace();
            c.expects.push(Expect {
                method: req.next().unwrap().to_string(),
                path: req.next().unwrap().to_string(),
                status: status.trim().parse().unwrap_or_else(|_| panic!("{}: status in {e:?}", c.name)),
                ..Default::default()
            });
        } else if let Some(last) = c.expects.last_mut() {
            if let Some(h) = rest.strip_prefix("send:") {
                last.send.push(h.trim().to_string());
            } else if let Some(h) = rest.strip_prefix("header:") {
                let (n, v) = h.split_once(':').unwrap();
                last.headers.push((n.trim().to_string(), v.trim().to_string()));
            } else if let Some(h) = rest.strip_prefix("no-header:") {
                last.no_headers.push(h.trim().to_string());
            } else if let Some(b) = rest.strip_prefix("body-has:") {
                last.body_has.push(b.trim().to_string());
            }
        }
    }
    c.text = text;
    c
}

/// An origin answering with the request it received.
fn echo_all() -> Origin {
    Origin::start(|r| {
        let mut body = format!("{} {}\n", r.method(), r.target());
        for line in r.head.lines().skip(1) {
            if let Some((n, v)) = line.split_once(':') {
                body.push_str(&format!("{}: {}\n", n.trim().to_ascii_lowercase(), v.trim()));
            }
        }
        Reply::http(200, &["Content-Type: text/plain"], body)
    })
}

/// Runs one case; Err: what went wrong.
fn run(c: &Case) -> Result<(), String> {
    if !c.origin_note {
        return Err("no `# origin:` line".into());
    }
    let fpm = c.needs.iter().any(|n| n == "php-fpm").then(Fpm::start);
    let origin = c.needs.iter().any(|n| n == "origin").then(echo_all);
    let mut site = c.text.clone();
    if let Some(f) = &fpm {
        site = site.replace("{fpm}", &f.sock.display().to_string());
    }
    if let Some(o) = &origin {
        site = site.replace("{origin}", &o.port.to_string());
    }
    let mut b = builder()
        .ports(2)
        .http("include mime.types;\ndefault_type application/octet-stream;\naccess_log logs/access.log;\ninclude sites/*.conf;\n")
        .conf_file(&format!("conf/sites/{}.conf", c.name), &site);
    // What Debian's /etc/nginx holds beside nginx.conf.
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    for f in ["fastcgi_params", "fastcgi.conf", "snippets/fastcgi-php.conf"] {
        b = b.file(&format!("conf/{f}"), fs::read(conf.join(f)).unwrap());
    }
    if c.needs.iter().any(|n| n == "tls") {
        b = b.tls_files();
    }
    for (p, v) in &c.files {
        b = b.file(p, v);
    }
    let t = b.prepare();
    let out = t.run(&["-t"]);
    if !out.status.success() {
        return Err(format!("-t failed:\n{}", stderr_of(&out)));
    }
    drop(t);
    let s = b.try_start().map_err(|e| format!("start failed:\n{e}"))?;
    for e in &c.expects {
        check(&s, e).map_err(|why| format!("{} {}: {why}\nerror.log:\n{}", e.method, e.path, s.error_log()))?;
    }
    Ok(())
}

/// A response as the script checks it.
struct Got {
    status: u16,
    head: String,
    body: String,
    headers: Vec<(String, String)>,
}

impl Got {
    fn header(&self, n: &str) -> Option<String> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone())
    }
}

fn fetch(s: &TestServer, e: &Expect) -> Got {
    if let Some(path) = e.path.strip_prefix("https:") {
        let mut extra: Vec<String> = vec!["-X".into(), e.method.clone()];
        for h in &e.send {
            extra.push("-H".into());
            extra.push(h.clone());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let f = curl_fetch(s, &[&format!("https://localhost:{}{path}", s.ports[1])], &extra).one();
        return Got {
            status: f.status,
            head: format!("{} {:?}", f.status_line, f.headers),
            body: f.text(),
            headers: f.headers.clone(),
        };
    }
    let mut raw = format!("{} {} HTTP/1.1\r\n", e.method, e.path);
    if !e.send.iter().any(|h| h.to_ascii_lowercase().starts_with("host:")) {
        raw.push_str("Host: localhost\r\n");
    }
    for h in &e.send {
        raw.push_str(h);
        raw.push_str("\r\n");
    }
    raw.push_str("Connection: close\r\n\r\n");
    let r = request(s.port, &raw);
    let headers = r
        .head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Got { status: r.status, head: r.head.clone(), body: r.text(), headers }
}

fn check(s: &TestServer, e: &Expect) -> Result<(), String> {
    let got = fetch(s, e);
    let (status, head, body) = (got.status, &got.head, &got.body);
    if status != e.status {
        return Err(format!("status {status}, expected {}\n{head}\n{body}", e.status));
    }
    for (n, v) in &e.headers {
        if got.header(n).as_deref() != Some(v.as_str()) {
            return Err(format!("{n}: {:?}, expected {v:?}\n{head}", got.header(n)));
        }
    }
    for n in &e.no_headers {
        if got.header(n).is_some() {
            return Err(format!("unexpected {n}\n{head}"));
        }
    }
    for b in &e.body_has {
        if !body.contains(b.as_str()) {
            return Err(format!("body lacks {b:?}:\n{body}"));
        }
    }
    Ok(())
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_published_config_runs_and_answers_as_nginx() {
    let files = corpus_files();
    assert!(files.len() >= 15, "the corpus holds {} configs", files.len());
    let mut failed = Vec::new();
    for f in &files {
        let c = parse(f);
        assert!(!c.expects.is_empty(), "{}: no expect lines", c.name);
        match run(&c) {
            Ok(()) => println!("corpus: {} ok ({} requests)", c.name, c.expects.len()),
            Err(e) => failed.push(format!("== {}: {e}", c.name)),
        }
    }
    println!("corpus: {} of {} configs pass", files.len() - failed.len(), files.len());
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
