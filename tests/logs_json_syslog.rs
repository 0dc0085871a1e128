//! Access-log formats and targets beyond the plain file: `escape=json`,
//! `default` and `none` on hostile request bytes (byte-for-byte what nginx
//! 1.22 writes), `access_log ... if=`, `gzip`, `syslog:` targets of
//! `access_log` and `error_log` (UDP over IPv4 and IPv6, a unix datagram
//! socket) and the variables `$pipe`, `$request_length`,
//! `$upstream_response_length` and `$upstream_bytes_received`. Every test
//! passes with SLUICE_TEST_NGINX=1 too.

mod common;

use std::io::Read;
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use common::origin::{Origin, Reply};
use common::tls::{TlsFiles, fetch};
use common::*;

/// A minimal JSON reader, enough for a log line: an object whose values
/// are strings, numbers or null. Returns (key, decoded value) pairs, or
/// why the text is not JSON.
fn parse_json_object(text: &str) -> Result<Vec<(String, String)>, String> {
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_whitespace() {
            *i += 1;
        }
    };
    let string = |i: &mut usize| -> Result<String, String> {
        if b.get(*i) != Some(&'"') {
            return Err(format!("string expected at {i}"));
        }
        *i += 1;
        let mut s = String::new();
        loop {
            let c = *b.get(*i).ok_or("unterminated string")?;
            *i += 1;
            match c {
                '"' => return Ok(s),
                '\\' => {
                    let e = *b.get(*i).ok_or("bad escape")?;
                    *i += 1;
                    match e {
                        '"' | '\\' | '/' => s.push(e),
                        'n' => s.push('\n'),
                        'r' => s.push('\r'),
                        't' => s.push('\t'),
                        'b' => s.push('\u{8}'),
                        'f' => s.push('\u{c}'),
                        'u' => {
                            let hex: String = b.get(*i..*i + 4).ok_or("short \\u")?.iter().collect();
                            let n = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad \\u{hex}"))?;
                            s.push(char::from_u32(n).ok_or("bad code point")?);
                            *i += 4;
                        }
                        _ => return Err(format!("bad escape \\{e}")),
                    }
                }
                c if (c as u32) < 0x20 => return Err(format!("raw control character {:#x} in a string", c as u32)),
                c => s.push(c),
            }
        }
    };
    ws(&mut i);
    if b.get(i) != Some(&'{') {
        return Err("not an object".into());
    }
    i += 1;
    let mut out = Vec::new();
    loop {
        ws(&mut i);
        if b.get(i) == Some(&'}') && out.is_empty() {
            i += 1;
            break;
        }
        let k = string(&mut i)?;
        ws(&mut i);
        if b.get(i) != Some(&':') {
            return Err(format!(": expected at {i}"));
        }
        i += 1;
        ws(&mut i);
        let v = if b.get(i) == Some(&'"') {
            string(&mut i)?
        } else {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '.' || b[i] == '-') {
                i += 1;
            }
            let lit: String = b[start..i].iter().collect();
            if lit != "null" && lit.parse::<f64>().is_err() {
                return Err(format!("bad value {lit:?}"));
            }
            lit
        };
        out.push((k, v));
        ws(&mut i);
        match b.get(i) {
            Some(',') => i += 1,
            Some('}') => {
                i += 1;
                break;
            }
            _ => return Err(format!(", or }} expected at {i}")),
        }
    }
    ws(&mut i);
    if i != b.len() {
        return Err("text after the object".into());
    }
    Ok(out)
}

/// Requests with quotes, backslashes, control bytes, UTF-8 and invalid
/// UTF-8 in the URI (decoded into `$uri`), the query and headers. (Control
/// bytes other than tab go in the URI only: sluice refuses them in header
/// values with 400, where nginx takes them.)
const HOSTILE: [&[u8]; 3] = [
    b"GET /a%22b%5Cc%01d%09e%7Ff%C3%A9g%FFh%08%0C%1B[31m?q=%22x\"\\y HTTP/1.1\r\nHost: t\r\nUser-Agent: q\"b\\s\tt\xc3\xa9\xff\r\nX-H: \\\"\r\nConnection: close\r\n\r\n",
    b"GET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    b"GET /%E2%80%A8%F0%9F%98%80 HTTP/1.1\r\nHost: t\r\nUser-Agent: \xe2\x80\xa8\r\nX-H: \r\nConnection: close\r\n\r\n",
];

fn hostile_server() -> TestServer {
    let vars = "$uri|$request_uri|$args|$http_user_agent|$http_x_h|$http_x_none";
    let json = "'{\"uri\":\"$uri\",\"request_uri\":\"$request_uri\",\"args\":\"$args\",\"ua\":\"$http_user_agent\",'\n\
                '\"h\":\"$http_x_h\",\"none\":\"$http_x_none\",\"status\":$status}'";
    let http = format!(
        "log_format d '{vars}';\nlog_format n escape=none '{vars}';\nlog_format j escape=json {json};\n\
         server {{ listen 127.0.0.1:{{port}}; return 200 ok;\n\
         access_log logs/d.log d; access_log logs/n.log n; access_log logs/j.log j; }}"
    );
    let s = builder().http(&http).start();
    for r in HOSTILE {
        let mut c = s.connect();
        c.send(r);
        assert_eq!(c.read_response().status, 200);
    }
    s
}

#[test]
fn escape_default_and_none_are_nginx_bytes() {
    let mut s = hostile_server();
    assert!(s.quit().success());
    let d = std::fs::read(s.path("logs/d.log")).unwrap();
    let n = std::fs::read(s.path("logs/n.log")).unwrap();
    let want_d: &[u8] = b"/a\\x22b\\x5Cc\\x01d\\x09e\\x7Ff\\xC3\\xA9g\\xFFh\\x08\\x0C\\x1B[31m|/a%22b%5Cc%01d%09e%7Ff%C3%A9g%FFh%08%0C%1B[31m?q=%22x\\x22\\x5Cy|q=%22x\\x22\\x5Cy|q\\x22b\\x5Cs\\x09t\\xC3\\xA9\\xFF|\\x5C\\x22|-\n\
        /plain|/plain|-|-|-|-\n\
        /\\xE2\\x80\\xA8\\xF0\\x9F\\x98\\x80|/%E2%80%A8%F0%9F%98%80|-|\\xE2\\x80\\xA8||-\n";
    let want_n: &[u8] = b"/a\"b\\c\x01d\te\x7Ff\xC3\xA9g\xFFh\x08\x0c\x1b[31m|/a%22b%5Cc%01d%09e%7Ff%C3%A9g%FFh%08%0C%1B[31m?q=%22x\"\\y|q=%22x\"\\y|q\"b\\s\tt\xc3\xa9\xff|\\\"|\n\
        /plain|/plain||||\n\
        /\xe2\x80\xa8\xf0\x9f\x98\x80|/%E2%80%A8%F0%9F%98%80||\xe2\x80\xa8||\n";
    assert_eq!(String::from_utf8_lossy(&d), String::from_utf8_lossy(want_d));
    assert_eq!(d, want_d);
    assert_eq!(String::from_utf8_lossy(&n), String::from_utf8_lossy(want_n));
    assert_eq!(n, want_n);
}

#[test]
fn escape_json_lines_parse_as_json() {
    let mut s = hostile_server();
    assert!(s.quit().success());
    let raw = std::fs::read(s.path("logs/j.log")).unwrap();
    let want: &[u8] = b"{\"uri\":\"/a\\\"b\\\\c\\u0001d\\te\x7Ff\xc3\xa9g\xffh\\b\\f\\u001B[31m\",\"request_uri\":\"/a%22b%5Cc%01d%09e%7Ff%C3%A9g%FFh%08%0C%1B[31m?q=%22x\\\"\\\\y\",\"args\":\"q=%22x\\\"\\\\y\",\"ua\":\"q\\\"b\\\\s\\tt\xc3\xa9\xff\",\"h\":\"\\\\\\\"\",\"none\":\"\",\"status\":200}\n\
        {\"uri\":\"/plain\",\"request_uri\":\"/plain\",\"args\":\"\",\"ua\":\"\",\"h\":\"\",\"none\":\"\",\"status\":200}\n\
        {\"uri\":\"/\xe2\x80\xa8\xf0\x9f\x98\x80\",\"request_uri\":\"/%E2%80%A8%F0%9F%98%80\",\"args\":\"\",\"ua\":\"\xe2\x80\xa8\",\"h\":\"\",\"none\":\"\",\"status\":200}\n";
    assert_eq!(String::from_utf8_lossy(&raw), String::from_utf8_lossy(want));
    assert_eq!(raw, want);
    // Bytes >= 0x80 pass as they are (nginx): a line is JSON once read
    // as UTF-8 with invalid sequences replaced, as log shippers read it.
    let text = String::from_utf8_lossy(&raw);
    let lines: Vec<&str> = text.lines().collect();
    let objs: Vec<Vec<(String, String)>> =
        lines.iter().map(|l| parse_json_object(l).unwrap_or_else(|e| panic!("{e}: {l:?}"))).collect();
    let get = |o: &Vec<(String, String)>, k: &str| o.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
    assert_eq!(get(&objs[0], "uri"), "/a\"b\\c\u{1}d\te\u{7f}fég\u{fffd}h\u{8}\u{c}\u{1b}[31m");
    assert_eq!(get(&objs[0], "ua"), "q\"b\\s\tté\u{fffd}");
    assert_eq!(get(&objs[0], "h"), "\\\"");
    assert_eq!(get(&objs[0], "status"), "200");
    assert_eq!(get(&objs[2], "uri"), "/\u{2028}😀");
}

#[test]
fn access_log_if_skips_empty_and_zero() {
    let mut s = builder()
        .http(
            "map $status $loggable { ~^[23] 0; default 1; }\n\
             server { listen 127.0.0.1:{port};\n\
               location /f/ { return 200 f; }\n\
               location /q/ { access_log logs/q.log combined if=$arg_log; return 200 q; }\n\
               access_log logs/errors.log combined if=$loggable; }",
        )
        .start();
    assert_eq!(s.get("/f/ok").status, 200);
    assert_eq!(s.get("/missing").status, 404);
    for q in ["/q/1?log=1", "/q/2?log=0", "/q/3", "/q/4?log=", "/q/5?log=00", "/q/6?log=yes"] {
        assert_eq!(s.get(q).status, 200);
    }
    assert!(s.quit().success());
    let errors = read_lossy(&s.path("logs/errors.log"));
    assert_eq!(errors.lines().count(), 1, "{errors}");
    assert!(errors.contains("\"GET /missing HTTP/1.1\" 404 "), "{errors}");
    let q = read_lossy(&s.path("logs/q.log"));
    let uris: Vec<&str> = q.lines().filter_map(|l| l.split('"').nth(1)).collect();
    assert_eq!(uris, ["GET /q/1?log=1 HTTP/1.1", "GET /q/5?log=00 HTTP/1.1", "GET /q/6?log=yes HTTP/1.1"], "{q}");
}

#[test]
fn gzip_access_log_is_gzip_members() {
    let mut s = builder()
        .http(
            "log_format u '$request_uri';\n\
             server { listen 127.0.0.1:{port}; return 200 z;\n\
             access_log logs/z.log.gz u gzip=4 buffer=1k flush=1s; }",
        )
        .start();
    for i in 0..60 {
        assert_eq!(s.get(&format!("/line/{i:03}/padding-padding-padding")).status, 200);
    }
    assert!(s.quit().success());
    let raw = std::fs::read(s.path("logs/z.log.gz")).unwrap();
    assert_eq!(&raw[..2], [0x1f, 0x8b], "not gzip");
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&raw[..]).read_to_string(&mut text).unwrap();
    let want: String = (0..60).map(|i| format!("/line/{i:03}/padding-padding-padding\n")).collect();
    assert_eq!(text, want);
    // a 1k buffer: several members
    assert!(raw.windows(3).filter(|w| *w == [0x1f, 0x8b, 0x08]).count() > 1);
}

/// Waits for datagrams on a socket until `n` arrived or 5 s passed.
fn recv_udp(sock: &UdpSocket, n: usize) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 65536];
    while got.len() < n && std::time::Instant::now() < deadline {
        if let Ok(k) = sock.recv(&mut buf) {
            got.push(buf[..k].to_vec());
        }
    }
    got
}

/// Collects datagrams until one contains `needle` (or 5 s passed).
fn recv_udp_until(sock: &UdpSocket, needle: &str) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 65536];
    while std::time::Instant::now() < deadline {
        if let Ok(k) = sock.recv(&mut buf) {
            got.push(buf[..k].to_vec());
            if String::from_utf8_lossy(&buf[..k]).contains(needle) {
                break;
            }
        }
    }
    got
}

fn recv_unix(sock: &UnixDatagram, n: usize) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 65536];
    while got.len() < n && std::time::Instant::now() < deadline {
        if let Ok(k) = sock.recv(&mut buf) {
            got.push(buf[..k].to_vec());
        }
    }
    got
}

/// Splits `<PRI>Mmm dd hh:mm:ss [host ]tag: msg` into (pri, host, tag, msg),
/// checking the time's shape.
fn split_syslog(m: &[u8], with_host: bool) -> (u32, String, String, String) {
    let t = String::from_utf8_lossy(m).into_owned();
    let close = t.find('>').unwrap_or_else(|| panic!("no PRI in {t:?}"));
    assert!(t.starts_with('<'), "{t:?}");
    let pri: u32 = t[1..close].parse().unwrap();
    let rest = &t[close + 1..];
    let time = &rest[..15];
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    assert!(months.contains(&&time[..3]), "time {time:?}");
    let day = time[4..6].trim_start();
    assert!(day.parse::<u32>().is_ok() && (time.as_bytes()[4] != b'0'), "day {time:?}");
    assert_eq!((&time[3..4], &time[6..7], &time[9..10], &time[12..13]), (" ", " ", ":", ":"), "{time:?}");
    let rest = &rest[16..];
    let (host, rest) = if with_host { rest.split_once(' ').unwrap() } else { ("", rest) };
    let (tag, msg) = rest.split_once(": ").unwrap_or_else(|| panic!("no tag in {t:?}"));
    (pri, host.to_string(), tag.to_string(), msg.to_string())
}

fn hostname() -> String {
    let o = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_ascii_lowercase()
}

#[test]
fn syslog_targets_udp_v4_v6_and_unix() {
    let v4 = UdpSocket::bind("127.0.0.1:0").unwrap();
    let v6 = UdpSocket::bind("[::1]:0").unwrap();
    let errs = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dir = temp_dir("syslog");
    let path = dir.join("log.sock");
    let unix = UnixDatagram::bind(&path).unwrap();
    // nginx's workers run as nobody when started by root
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let http = format!(
        "log_format u '$request_uri $status';\n\
         server {{ listen 127.0.0.1:{{port}}; root html;\n\
         error_log syslog:server=127.0.0.1:{},tag=errs info;\n\
         access_log syslog:server=127.0.0.1:{} u;\n\
         access_log syslog:server=[::1]:{},facility=local0,severity=warn,tag=web_1 u;\n\
         access_log syslog:server=unix:{},facility=daemon,severity=notice,nohostname u; }}",
        errs.local_addr().unwrap().port(),
        v4.local_addr().unwrap().port(),
        v6.local_addr().unwrap().port(),
        path.display()
    );
    let mut s = builder().http(&http).file("html/a.txt", "a").start();
    assert_eq!(s.get("/a.txt?x=\"1\"").status, 200);
    assert_eq!(s.get("/nope").status, 404);
    let host = hostname();
    let got = recv_udp(&v4, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    let m: Vec<_> = got.iter().map(|m| split_syslog(m, true)).collect();
    // local7.info: 23 * 8 + 6
    assert_eq!(m[0], (190, host.clone(), "nginx".into(), "/a.txt?x=\\x221\\x22 200".into()));
    assert_eq!(m[1], (190, host.clone(), "nginx".into(), "/nope 404".into()));
    let got = recv_udp(&v6, 2);
    let m: Vec<_> = got.iter().map(|m| split_syslog(m, true)).collect();
    // local0.warning: 16 * 8 + 4
    assert_eq!(m[1], (132, host.clone(), "web_1".into(), "/nope 404".into()));
    let got = recv_unix(&unix, 2);
    let m: Vec<_> = got.iter().map(|m| split_syslog(m, false)).collect();
    // daemon.notice: 3 * 8 + 5, no hostname
    assert_eq!(m[0], (29, String::new(), "nginx".into(), "/a.txt?x=\\x221\\x22 200".into()));
    // The error line for the 404 at the line's own level (local7.err:
    // 23 * 8 + 3), the whole error-log line after the header.
    let got = recv_udp_until(&errs, "open()");
    let m: Vec<_> = got.iter().map(|m| split_syslog(m, true)).collect();
    let open = m.iter().find(|x| x.3.contains("open()")).unwrap_or_else(|| panic!("{m:?}"));
    assert_eq!((open.0, open.2.as_str()), (187, "errs"), "{open:?}");
    let line = &open.3;
    assert!(
        line.contains(" [error] ") && line.contains("/html/nope\" failed (2: No such file or directory)"),
        "{line}"
    );
    // nginx's error-log line whole, its own time included
    let (date, time) = (&line[..10], &line[11..19]);
    assert_eq!((&date[4..5], &date[7..8], &time[2..3], &time[5..6]), ("/", "/", ":", ":"), "{line}");
    assert!(!line.ends_with('\n'), "{line:?}");
    assert!(s.quit().success());
}

#[test]
fn syslog_receiver_gone_does_not_block() {
    // Nobody listens: every datagram is refused or dropped, requests go on.
    let port = {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.local_addr().unwrap().port()
    };
    let dir = temp_dir("syslog-gone");
    let http = format!(
        "server {{ listen 127.0.0.1:{{port}}; return 200 ok;\n\
         access_log syslog:server=127.0.0.1:{port};\n\
         access_log syslog:server=unix:{}/missing.sock; }}",
        dir.display()
    );
    let mut s = builder().http(&http).start();
    let started = std::time::Instant::now();
    for _ in 0..50 {
        assert_eq!(s.get("/").text(), "ok");
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(s.quit().success());
}

#[test]
fn syslog_parameter_errors_as_nginx() {
    let cases = [
        ("syslog:server=127.0.0.1,facility=local9", "unknown syslog facility \"local9\""),
        ("syslog:server=127.0.0.1,severity=err", "unknown syslog severity \"err\""),
        ("syslog:server=127.0.0.1,tag=a-b", "syslog \"tag\" only allows alphanumeric characters and underscore"),
        ("syslog:server=127.0.0.1,bogus", "unknown syslog parameter \"bogus\""),
        ("syslog:tag=x", "no syslog server specified"),
        ("syslog:server=127.0.0.1:0", "invalid port in syslog server \"127.0.0.1:0\""),
        ("syslog:server=no-such-host.invalid", "host not found in syslog server \"no-such-host.invalid\""),
        ("syslog:server=unix:", "no path in the unix domain socket in syslog server \"unix:\""),
        ("syslog:server=127.0.0.1 combined buffer=4k", "logs to syslog cannot be buffered"),
        ("logs/a.log combined gzip=10", "invalid compression level \"10\""),
        ("logs/a.log combined if=$nope", "unknown \"nope\" variable"),
    ];
    for (arg, want) in cases {
        let srv = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; access_log {arg}; }}")).prepare();
        let o = srv.run(&["-t"]);
        let err = stderr_of(&o);
        assert!(!o.status.success(), "{arg}: {err}");
        assert!(err.contains(&format!("[emerg] {want}")), "{arg}: {err}");
    }
}

#[test]
fn pipe_request_length_and_upstream_lengths() {
    let origin = Origin::start(|r| {
        if r.target() == "/chunked" {
            Reply::raw(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            )
        } else {
            Reply::http(200, &[], "hello world")
        }
    });
    let http = format!(
        "log_format v '$request_uri|$pipe|$request_length|$upstream_response_length|$upstream_bytes_received|$upstream_status';\n\
         server {{ listen 127.0.0.1:{{port}}; access_log logs/v.log v;\n\
         location /up/ {{ proxy_pass http://{}/; }}\n\
         location / {{ return 200 ok; }} }}",
        origin.addr()
    );
    let mut s = builder().http(&http).start();
    // two pipelined requests in one write: the second is "p"
    let a = "GET /one HTTP/1.1\r\nHost: t\r\n\r\n";
    let b = "GET /two HTTP/1.1\r\nHost: t\r\nX-Pad: 0123456789\r\n\r\n";
    let mut c = s.connect();
    c.send(format!("{a}{b}"));
    assert_eq!(c.read_response().status, 200);
    assert_eq!(c.read_response().status, 200);
    // then one on its own: "."
    let d = "GET /three HTTP/1.1\r\nHost: t\r\n\r\n";
    c.send(d);
    assert_eq!(c.read_response().status, 200);
    let body = "x".repeat(100);
    let e = format!("POST /up/len HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{body}");
    c.send(&e);
    assert_eq!(c.read_response().text(), "hello world");
    let f = "GET /up/chunked HTTP/1.1\r\nHost: t\r\n\r\n";
    c.send(f);
    assert_eq!(c.read_response().text(), "hello");
    // a chunked body counts as received, framing included
    let g = "POST /up/len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    c.send(g);
    assert_eq!(c.read_response().text(), "hello world");
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/v.log"));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    assert_eq!(lines[0], format!("/one|.|{}|-|-|-", a.len()));
    assert_eq!(lines[1], format!("/two|p|{}|-|-|-", b.len()));
    assert_eq!(lines[2], format!("/three|.|{}|-|-|-", d.len()));
    let f4: Vec<&str> = lines[3].split('|').collect();
    assert_eq!(f4[..4], ["/up/len", ".", &e.len().to_string(), "11"], "{}", lines[3]);
    let received: u64 = f4[4].parse().unwrap();
    assert!(received > 11 + 17, "{}", lines[3]);
    let f5: Vec<&str> = lines[4].split('|').collect();
    // nginx counts what came after the head, chunk framing included
    assert_eq!(f5[..5], ["/up/chunked", ".", &f.len().to_string(), "15", "81"], "{}", lines[4]);
    let f6: Vec<&str> = lines[5].split('|').collect();
    assert_eq!(f6[..4], ["/up/len", ".", &g.len().to_string(), "11"], "{}", lines[5]);
}

#[test]
fn json_snippet_over_http1_tls_and_h2() {
    let http = "include snippets/log-json.conf;\n\
                access_log logs/access.json json;\n\
                server { listen 127.0.0.1:{port0} ssl http2; listen 127.0.0.1:{port1} http2; listen 127.0.0.1:{port2};\n\
                  server_name a.test; ssl_protocols TLSv1.2 TLSv1.3;\n\
                  ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/a.test.ecdsa.key;\n\
                  location / { return 200 ok; } }";
    let s = builder()
        .tls_files()
        .ports(3)
        .file("conf/snippets/log-json.conf", include_str!("../conf/snippets/log-json.conf"))
        .http(http)
        .start();
    let tls = format!("https://a.test:{}/t", s.ports[0]);
    let runs: [(String, Vec<&str>); 4] = [
        (tls.clone(), vec!["--http2", "--tlsv1.3", "--tls13-ciphers", "TLS_AES_128_GCM_SHA256"]),
        (tls, vec!["--http1.1", "--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384"]),
        (format!("http://127.0.0.1:{}/t", s.ports[1]), vec!["--http2-prior-knowledge"]),
        (format!("http://127.0.0.1:{}/t", s.ports[2]), vec!["--http1.1"]),
    ];
    for (url, extra) in &runs {
        assert_eq!(fetch(&s, url, extra).status, 200, "{url} {extra:?}");
    }
    let lines = wait_lines(&s.path("logs/access.json"), 4, LOG_WAIT);
    let want = [
        ("h2", "TLSv1.3", "TLS_AES_128_GCM_SHA256"),
        ("", "TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384"),
        ("h2c", "", ""),
        ("", "", ""),
    ];
    for (line, (http2, proto, cipher)) in lines.iter().zip(want) {
        let o = parse_json_object(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let get = |k: &str| o.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("{k}"));
        assert_eq!((get("http2"), get("ssl_protocol"), get("ssl_cipher")), (http2, proto, cipher), "{line}");
        assert_eq!((get("status"), get("pipe"), get("upstream_status")), ("200", ".", ""), "{line}");
        let id = get("request_id");
        assert!(id.len() == 32 && id.bytes().all(|c| c.is_ascii_hexdigit()), "{line}");
        assert!(get("request_length").parse::<u64>().unwrap() > 10, "{line}");
    }
}

#[test]
fn syslog_full_queue_drops_lines_without_blocking() {
    // A receiver that never reads: its queue fills after a few big lines;
    // the rest are dropped (EAGAIN) and the requests go on at full speed.
    let dir = temp_dir("syslog-full");
    let path = dir.join("full.sock");
    let unix = UnixDatagram::bind(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let http = format!(
        "log_format big '$http_x_big';\n\
         server {{ listen 127.0.0.1:{{port}}; return 200 ok;\n\
         access_log syslog:server=unix:{} big; }}",
        path.display()
    );
    let mut s = builder().http(&http).start();
    let big = format!("X-Big: {}", "b".repeat(7000));
    let started = std::time::Instant::now();
    let mut c = s.connect();
    for _ in 0..200 {
        c.send(format!("GET / HTTP/1.1\r\nHost: t\r\n{big}\r\n\r\n"));
        assert_eq!(c.read_response().text(), "ok");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    if !common::tls::nginx_mode() {
        // each worker reports its drops once a second
        let log = s.wait_error_log("access log lines to syslog server");
        assert!(log.contains("[warn] ") && log.contains(&format!("\"unix:{}\" dropped", path.display())), "{log}");
    }
    assert!(s.quit().success());
    // what the queue took arrived whole
    let got = recv_unix(&unix, 1);
    assert!(got[0].ends_with("b".repeat(7000).as_bytes()));
}

#[test]
fn upstream_lists_join_a_second_upstream_with_a_colon() {
    // X-Accel-Redirect from one upstream to a location proxying to another:
    // nginx's ` : ` between the two upstreams' entries.
    let a = Origin::start(|_| Reply::http(200, &["X-Accel-Redirect: /b/x"], ""));
    let b = Origin::start(|_| Reply::http(200, &[], "hello"));
    let http = format!(
        "log_format v '$upstream_addr|$upstream_status|$upstream_response_length|$upstream_bytes_received';\n\
         server {{ listen 127.0.0.1:{{port}}; access_log logs/v.log v;\n\
         location /a/ {{ proxy_pass http://{}; }}\n\
         location /b/ {{ internal; proxy_pass http://{}; }} }}",
        a.addr(),
        b.addr()
    );
    let mut s = builder().http(&http).start();
    assert_eq!(s.get("/a/1").text(), "hello");
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/v.log"));
    let f: Vec<&str> = log.trim_end().split('|').collect();
    assert_eq!(f[..3], [format!("{} : {}", a.addr(), b.addr()).as_str(), "200 : 200", "0 : 5"], "{log}");
    let (ra, rb) = f[3].split_once(" : ").unwrap_or_else(|| panic!("{log}"));
    assert!(ra.parse::<u64>().unwrap() > 40 && rb.parse::<u64>().unwrap() > 40, "{log}");
}
