//! Variables about the connection, the clock and the origin's answer:
//! `$request_completion`, `$connection_time`, `$msie`, `$date_gmt`,
//! `$date_local`, `$proxy_port`, `$tcpinfo_*`, `$ssl_alpn_protocol`,
//! `$ssl_curve`, `$ssl_early_data` and `$upstream_cookie_NAME`, with the
//! values and the `-` (not found) nginx 1.22.1 logs. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::time::Duration;

use common::origin::*;
use common::tls::*;
use common::*;

const FORMAT: &str = "log_format t '$uri rc=[$request_completion] msie=[$msie] pp=[$proxy_port] \
     uc=[$upstream_cookie_a] ucb=[$upstream_cookie_B] none=[$upstream_cookie_z] ed=[$ssl_early_data] \
     alpn=[$ssl_alpn_protocol] curve=[$ssl_curve]';";

fn cookie_origin() -> Origin {
    Origin::start(|_| {
        Reply::http(
            200,
            &["Set-Cookie: b=1; path=/", "Set-Cookie: A = 2 ; x", "Set-Cookie: a=3", "Set-Cookie: zz=4"],
            "x",
        )
    })
}

#[test]
fn log_lines_name_completion_port_and_origin_cookies() {
    let o = cookie_origin();
    let http = format!(
        "{FORMAT}\n{}",
        r#"
        upstream up { server 127.0.0.1:%O%; }
        server {
            listen 127.0.0.1:{port};
            access_log logs/t.log t;
            location = /r { return 200 "x"; }
            location = /gone { return 444; }
            location /p { proxy_pass http://127.0.0.1:%O%; }
            location /u { proxy_pass http://up; }
            location /s { proxy_pass https://127.0.0.1:1; }
        }"#
    );
    let mut s = proxy(&http, &[("%O%", o.port)]);
    assert_eq!(s.get("/r").status, 200);
    assert_eq!(s.get_with("/r", &["User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"]).status, 200);
    assert_eq!(s.get_with("/r", &["User-Agent: Opera/9.80 (compatible; MSIE 6.0)"]).status, 200);
    assert_eq!(s.get("/p").status, 200);
    assert_eq!(s.get("/u").status, 200);
    // Nothing listens on port 1: 502, a whole answer all the same.
    assert_eq!(s.get("/s").status, 502);
    let mut c = s.connect();
    c.send("GET /gone HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(c.read_to_close().is_empty());
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/t.log"));
    let tail = " ed=[-] alpn=[-] curve=[-]";
    let want = [
        "/r rc=[OK] msie=[] pp=[-] uc=[-] ucb=[-] none=[-]",
        "/r rc=[OK] msie=[1] pp=[-] uc=[-] ucb=[-] none=[-]",
        "/r rc=[OK] msie=[] pp=[-] uc=[-] ucb=[-] none=[-]",
        // The first header whose name matches in any case; the value runs
        // to the `;`, its spaces kept.
        &format!("/p rc=[OK] msie=[] pp=[{}] uc=[2 ] ucb=[1] none=[-]", o.port),
        "/u rc=[OK] msie=[] pp=[80] uc=[2 ] ucb=[1] none=[-]",
        "/s rc=[OK] msie=[] pp=[1] uc=[-] ucb=[-] none=[-]",
        // Closed without an answer: not complete.
        "/gone rc=[] msie=[] pp=[-] uc=[-] ucb=[-] none=[-]",
    ];
    let want: Vec<String> = want.iter().map(|w| format!("{w}{tail}")).collect();
    assert_eq!(log.lines().collect::<Vec<_>>(), want, "{log}");
}

#[test]
fn connection_time_counts_from_the_accept() {
    let mut s = builder()
        .http(
            "log_format t '$connection_requests $connection_time';\n\
             server { listen 127.0.0.1:{port}; access_log logs/t.log t; location / { return 200 \"$connection_time\"; } }",
        )
        .start();
    let mut c = s.connect();
    c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let first: f64 = c.read_response().text().parse().expect("seconds");
    std::thread::sleep(Duration::from_millis(400));
    c.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let second: f64 = c.read_response().text().parse().expect("seconds");
    assert!(first < 0.3, "{first}");
    assert!((0.4..5.0).contains(&second), "{second}");
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/t.log"));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, n) in lines.iter().zip(["1", "2"]) {
        let (reqs, secs) = line.split_once(' ').expect("two fields");
        assert_eq!(reqs, n);
        let (whole, ms) = secs.split_once('.').expect("seconds.millis");
        assert!(whole.parse::<u64>().is_ok() && ms.len() == 3 && ms.parse::<u32>().is_ok(), "{line}");
    }
}

/// `%A, %d-%b-%Y %H:%M:%S` of `t` seconds (already in the zone).
fn ssi_date(t: i64) -> String {
    const DAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{}, {:02}-{}-{} {:02}:{:02}:{:02}",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[test]
fn dates_msie_and_tcp_info_as_nginx_computes_them() {
    let s = builder()
        .env("TZ", "America/New_York")
        .http(
            "server { listen 127.0.0.1:{port};\n\
               location / { return 200 \"$date_gmt|$date_local|$msie|$tcpinfo_rtt|$tcpinfo_rttvar|$tcpinfo_snd_cwnd|$tcpinfo_rcv_space\"; }\n}",
        )
        .start();
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
    let r = s.get_with("/", &["User-Agent: Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1)"]);
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
    let text = r.text();
    let f: Vec<&str> = text.split('|').collect();
    assert_eq!(f.len(), 7, "{text}");
    // The server's second lies between ours.
    let gmt_ok = (before - 1..=after).any(|t| f[0] == format!("{} GMT", ssi_date(t)));
    assert!(gmt_ok, "date_gmt {:?} for {before}..{after}", f[0]);
    // New York is 5 hours behind UTC in winter (EST), 4 in summer (EDT).
    let local_ok = (before - 1..=after).any(|t| {
        f[1] == format!("{} EST", ssi_date(t - 5 * 3600)) || f[1] == format!("{} EDT", ssi_date(t - 4 * 3600))
    });
    assert!(local_ok, "date_local {:?}", f[1]);
    assert_eq!(f[2], "1");
    let n: Vec<u64> = f[3..].iter().map(|v| v.parse().unwrap_or_else(|_| panic!("{text}"))).collect();
    // A loopback round trip is microseconds, the window at least one
    // segment, and the receive space a buffer's worth.
    assert!(n[0] < 1_000_000 && n[2] >= 1 && n[3] >= 1000, "{text}");
}

#[test]
fn alpn_and_curve_over_tls() {
    let mut s = builder()
        .tls_files()
        .http(&format!(
            "{FORMAT}\n\
             server {{\n  listen 127.0.0.1:{{port}} ssl http2;\n  server_name a.test;\n  access_log logs/t.log t;\n\
               ssl_certificate tls/a.test.ecdsa.crt;\n  ssl_certificate_key tls/a.test.ecdsa.key;\n\
               location / {{ return 200 \"$ssl_alpn_protocol|$ssl_curve|$ssl_early_data\"; }}\n}}"
        ))
        .start();
    let url = format!("https://a.test:{}/", s.port);
    let h2 = fetch(&s, &url, &[]);
    assert_eq!((h2.version.as_str(), h2.text().as_str()), ("2", "h2|X25519|"));
    assert_eq!(fetch(&s, &url, &["--http1.1"]).text(), "http/1.1|X25519|");
    assert_eq!(fetch(&s, &url, &["--no-alpn"]).text(), "|X25519|");
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/t.log"));
    let lines: Vec<&str> = log.lines().collect();
    let tail: Vec<&str> = lines.iter().map(|l| l.split_once(" ed=").map_or("", |(_, t)| t)).collect();
    assert_eq!(
        tail,
        ["[-] alpn=[h2] curve=[X25519]", "[-] alpn=[http/1.1] curve=[X25519]", "[-] alpn=[-] curve=[X25519]"]
    );
}

/// `$request_body`: a body read whole into memory for the origin, in a
/// proxied header and in the log; not found without a body, in a location
/// that does not read it (`return`), or past the memory buffer (a temp
/// file), as nginx.
#[test]
fn request_body_reaches_headers_and_the_log() {
    let o = Origin::start(|r| Reply::ok(format!("xb=[{}]", r.header("x-body").unwrap_or("none"))));
    let http = format!(
        "{}\n{}",
        "log_format b '$request_method $uri rb=[$request_body]';",
        r#"
        client_body_buffer_size 1k;
        server {
            listen 127.0.0.1:{port};
            access_log logs/b.log b;
            location /p { proxy_set_header X-Body $request_body; proxy_pass http://127.0.0.1:%O%; }
            location /s { return 200 "[$request_body]"; }
        }"#
    );
    let mut s = proxy(&http, &[("%O%", o.port)]);
    let post = |path: &str, body: &str| {
        let raw = format!(
            "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        request(s.port, &raw).text()
    };
    assert_eq!(post("/p", "a=1&b=2"), "xb=[a=1&b=2]");
    // An empty value sends no header at all.
    assert_eq!(s.get("/p").text(), "xb=[none]");
    let big = "x".repeat(8000);
    assert_eq!(post("/p", &big), "xb=[none]");
    assert_eq!(post("/s", "a=1"), "[]");
    assert!(s.quit().success());
    let log = read_lossy(&s.path("logs/b.log"));
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["POST /p rb=[a=1&b=2]", "GET /p rb=[-]", "POST /p rb=[-]", "POST /s rb=[-]"],
        "{log}"
    );
}

/// `$request_body_file` and `client_body_in_file_only`, as nginx-tests'
/// body.t: a body past the memory buffer is in a named file (unlinked at
/// once unless asked for), `on` puts every body in a file that stays,
/// `clean` removes it when the request ends; a body passed on unbuffered
/// has no file, and its `$request_body` is the body when it is small.
#[test]
fn request_body_file_and_in_file_only() {
    let o = Origin::start(|r| Reply::ok(format!("got {}", r.body.len())));
    let http = r#"
        client_body_buffer_size 1k;
        client_body_temp_path client_body_temp;
        server {
            listen 127.0.0.1:{port};
            add_header X-File $request_body_file;
            add_header X-Body $request_body;
            location /p { proxy_pass http://127.0.0.1:%O%; }
            location /on { client_body_in_file_only on; proxy_pass http://127.0.0.1:%O%; }
            location /clean { client_body_in_file_only clean; proxy_pass http://127.0.0.1:%O%; }
            location /u {
                proxy_request_buffering off;
                client_body_in_file_only on;
                proxy_pass http://127.0.0.1:%O%;
            }
        }"#;
    let s = proxy(http, &[("%O%", o.port)]);
    let post = |path: &str, body: &str| {
        let raw = format!(
            "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        request(s.port, &raw)
    };
    let temp = s.path("client_body_temp");
    let in_temp = |r: &Response| {
        let f = std::path::PathBuf::from(r.must("X-File"));
        assert_eq!(f.parent(), Some(temp.as_path()), "{}", r.head);
        f
    };
    // Small: in memory, no file.
    let r = post("/p", "a=1");
    assert_eq!((r.text().as_str(), r.header("X-File"), r.header("X-Body")), ("got 3", None, Some("a=1")));
    // Past the buffer: a named file, already unlinked.
    let big = "x".repeat(5000);
    let r = post("/p", &big);
    assert_eq!(r.text(), "got 5000");
    assert!(r.header("X-Body").is_none(), "{}", r.head);
    assert!(!in_temp(&r).exists());
    // `on`: every body in a file that stays.
    let r = post("/on", "abc");
    assert_eq!(r.text(), "got 3");
    let kept = in_temp(&r);
    assert_eq!(std::fs::read(&kept).expect("kept file"), b"abc");
    // `clean`: gone once the request ends.
    let r = post("/clean", &big);
    assert_eq!(r.text(), "got 5000");
    let clean = in_temp(&r);
    let t0 = std::time::Instant::now();
    while clean.exists() && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!clean.exists(), "{} left behind", clean.display());
    // Unbuffered: no file, the small body is the variable's.
    let r = post("/u", "q=2");
    assert_eq!((r.text().as_str(), r.header("X-File"), r.header("X-Body")), ("got 3", None, Some("q=2")));
    assert_eq!(o.requests().last().map(|r| r.body.clone()), Some(b"q=2".to_vec()));
}
