//! `grpc_pass` between a real gRPC client and server (grpcio, installed by
//! scripts/install-grpcio; tests/grpc/peer.py): unary and streaming calls
//! over HTTP/2 (cleartext and TLS), the origin's trailers (grpc-status,
//! grpc-message, metadata) reaching the client over HTTP/2 and over
//! HTTP/1.1's chunked trailer section, an origin that is down (what the
//! gRPC client sees and the error-log line), `grpcs://` with the origin's
//! certificate verified, and keep-alive to the origin. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use common::*;

/// The virtualenv's python with grpcio.
fn python() -> &'static str {
    static PY: OnceLock<String> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new("scripts/install-grpcio").output().expect("run scripts/install-grpcio");
        assert!(out.status.success(), "install-grpcio: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("path").trim().to_string()
    })
}

const PEER: &str = "tests/grpc/peer.py";

/// The gRPC server of peer.py, stopped on drop.
struct Origin {
    port: u16,
    child: Child,
}

impl Origin {
    fn start(tls: Option<(&PathBuf, &PathBuf)>) -> Origin {
        Origin::start_on(free_port(), tls)
    }

    fn start_on(port: u16, tls: Option<(&PathBuf, &PathBuf)>) -> Origin {
        let mut cmd = Command::new(python());
        cmd.args([PEER, "server", &port.to_string()]);
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start the gRPC server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("ready line");
        assert_eq!(line.trim(), "ready", "the gRPC server did not start");
        Origin { port, child }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call by peer.py's client, as it printed it.
fn call(target: &str, method: &str, args: &[&str], tls: Option<(&str, &str)>) -> serde_json::Value {
    let mut cmd = Command::new(python());
    cmd.args([PEER, "client", target, method]).args(args);
    if let Some((ca, name)) = tls {
        cmd.args(["--tls", ca, name]);
    }
    let out = cmd.output().expect("run the gRPC client");
    assert!(out.status.success(), "client failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("client's JSON")
}

fn h2c_server(pass: &str, extra: &str) -> TestServer {
    builder()
        .http(&format!(
            "{extra}\nserver {{\n  listen 127.0.0.1:{{port}} http2;\n  location / {{ grpc_pass {pass}; }}\n}}"
        ))
        .start()
}

#[test]
fn unary_and_streaming_calls_with_their_trailers() {
    let o = Origin::start(None);
    let s = h2c_server(&format!("grpc://127.0.0.1:{}", o.port), "");
    let target = format!("127.0.0.1:{}", s.port);
    let r = call(&target, "Unary", &["abc"], None);
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["responses"][0], "echo:abc");
    // The client's metadata reached the origin; the origin's initial and
    // trailing metadata reached the client.
    assert_eq!(r["initial"]["x-seen-in"], "hello");
    assert_eq!(r["trailing"]["x-trailer"], "done");
    let r = call(&target, "ServerStream", &["5"], None);
    assert_eq!(r["code"], "OK", "{r}");
    assert_eq!(r["responses"], serde_json::json!(["msg-0", "msg-1", "msg-2", "msg-3", "msg-4"]));
    let r = call(&target, "ClientStream", &["a", "b", "c"], None);
    assert_eq!((r["code"].as_str(), r["responses"][0].as_str()), (Some("OK"), Some("a+b+c")), "{r}");
    let r = call(&target, "Bidi", &["x", "y"], None);
    assert_eq!(r["responses"], serde_json::json!(["X", "Y"]), "{r}");
    // Each message waits for the answer to the one before: the request
    // body reaches the origin as it comes, not once the client ended it.
    let r = call(&target, "PingPong", &["p", "q", "r"], None);
    assert_eq!((r["code"].as_str(), &r["responses"]), (Some("OK"), &serde_json::json!(["P", "Q", "R"])), "{r}");
    // A trailers-only answer: the status and message are the origin's.
    let r = call(&target, "Fail", &["x"], None);
    assert_eq!((r["code"].as_str(), r["details"].as_str()), (Some("NOT_FOUND"), Some("no such thing")), "{r}");
    let log = s.wait_access_lines(5);
    assert!(log.iter().all(|l| l.contains("POST /test.Echo/") && l.contains("HTTP/2.0\" 200 ")), "{log:?}");
}

/// A gRPC message frame: uncompressed flag, 4-byte length, the bytes.
fn message(b: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8];
    m.extend_from_slice(&(b.len() as u32).to_be_bytes());
    m.extend_from_slice(b);
    m
}

#[test]
fn an_http11_client_gets_the_trailers_after_the_chunked_body() {
    let o = Origin::start(None);
    let s = builder()
        .http(&format!(
            "server {{\n  listen 127.0.0.1:{{port}};\n  location / {{ grpc_pass 127.0.0.1:{}; }}\n}}",
            o.port
        ))
        .start();
    let body = message(b"hi");
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    let head = format!(
        "POST /test.Echo/Unary HTTP/1.1\r\nHost: t\r\nContent-Type: application/grpc\r\nTE: trailers\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).expect("send");
    c.write_all(&body).expect("send");
    let mut got = Vec::new();
    c.read_to_end(&mut got).expect("read");
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.to_ascii_lowercase().contains("transfer-encoding: chunked\r\n"), "{text}");
    assert!(text.to_ascii_lowercase().contains("content-type: application/grpc\r\n"), "{text}");
    let reply = message(b"echo:hi");
    let chunk = format!("{:x}\r\n", reply.len());
    let at = got.windows(4).position(|w| w == b"\r\n\r\n").expect("the head's end") + 4;
    assert_eq!(&got[at..at + chunk.len()], chunk.as_bytes(), "{text}");
    assert_eq!(&got[at + chunk.len()..at + chunk.len() + reply.len()], &reply[..]);
    let tail = String::from_utf8_lossy(&got[at + chunk.len() + reply.len()..]).to_string();
    assert!(tail.starts_with("\r\n0\r\n"), "{tail:?}");
    assert!(tail.contains("grpc-status: 0\r\n"), "{tail:?}");
    assert!(tail.contains("x-trailer: done\r\n"), "{tail:?}");
    assert!(tail.ends_with("\r\n\r\n"), "{tail:?}");
}

#[test]
fn an_origin_that_is_down_is_unavailable_to_the_client() {
    let dead = free_port();
    let s = h2c_server(&format!("grpc://127.0.0.1:{dead}"), "");
    let r = call(&format!("127.0.0.1:{}", s.port), "Unary", &["abc"], None);
    // nginx's 502 page: gRPC clients map the HTTP status to UNAVAILABLE.
    assert_eq!(r["code"], "UNAVAILABLE", "{r}");
    assert!(r["details"].as_str().unwrap_or("").contains("502"), "{r}");
    let log = s.wait_error_log("while connecting to upstream");
    assert!(log.contains("connect() failed (111: Connection refused) while connecting to upstream"), "{log}");
    assert!(log.contains(&format!("upstream: \"grpc://127.0.0.1:{dead}")), "{log}");
}

#[test]
fn grpcs_verifies_the_origin_certificate() {
    let dir = temp_dir("grpcs");
    let leaf = common::tls::issue(common::tls::KeyKind::Ecdsa, &["grpc.test"], false);
    let (cert, key, ca) = (dir.join("leaf.crt"), dir.join("leaf.key"), dir.join("ca.crt"));
    std::fs::write(&cert, &leaf.cert).expect("cert");
    std::fs::write(&key, &leaf.key).expect("key");
    std::fs::write(&ca, common::tls::ca_pem()).expect("ca");
    let o = Origin::start(Some((&cert, &key)));
    let http = format!(
        "grpc_ssl_verify on; grpc_ssl_trusted_certificate {ca};\n\
         server {{\n  listen 127.0.0.1:{{port0}} http2;\n\
           location / {{ grpc_pass grpcs://127.0.0.1:{p}; grpc_ssl_name grpc.test; grpc_ssl_server_name on; }}\n}}\n\
         server {{\n  listen 127.0.0.1:{{port1}} http2;\n\
           location / {{ grpc_pass grpcs://127.0.0.1:{p}; grpc_ssl_name other.test; }}\n}}",
        ca = ca.display(),
        p = o.port
    );
    let s = builder().ports(2).http(&http).start();
    let target = format!("127.0.0.1:{}", s.ports[0]);
    let r = call(&target, "Unary", &["tls"], None);
    assert_eq!((r["code"].as_str(), r["responses"][0].as_str()), (Some("OK"), Some("echo:tls")), "{r}");
    let r = call(&target, "ServerStream", &["2"], None);
    assert_eq!(r["responses"], serde_json::json!(["msg-0", "msg-1"]), "{r}");
    // A certificate for another name: the call never reaches the origin.
    let r = call(&format!("127.0.0.1:{}", s.ports[1]), "Unary", &["x"], None);
    assert_eq!(r["code"], "UNAVAILABLE", "{r}");
    assert!(r["details"].as_str().unwrap_or("").contains("502"), "{r}");
    let log = s.wait_error_log("SSL handshaking to upstream");
    assert!(log.contains("certificate does not match \"other.test\""), "{log}");
}

#[test]
fn keepalive_reuses_the_origin_connection() {
    let o = Origin::start(None);
    let s = builder()
        .ports(2)
        .http(&format!(
            "upstream kept {{ server 127.0.0.1:{p}; keepalive 2; }}\n\
             server {{ listen 127.0.0.1:{{port0}} http2; location / {{ grpc_pass kept; }} }}\n\
             server {{ listen 127.0.0.1:{{port1}} http2; location / {{ grpc_pass 127.0.0.1:{p}; }} }}",
            p = o.port
        ))
        .start();
    // The origin's view of the connection each call came on.
    let peers = |port: u16| -> Vec<String> {
        (0..3)
            .map(|i| {
                // A streaming call in between must leave the connection
                // reusable too.
                if i == 1 {
                    let r = call(&format!("127.0.0.1:{port}"), "ServerStream", &["2"], None);
                    assert_eq!(r["code"], "OK", "{r}");
                }
                let r = call(&format!("127.0.0.1:{port}"), "Unary", &["k"], None);
                assert_eq!(r["code"], "OK", "{r}");
                r["initial"]["x-peer"].as_str().unwrap_or("").to_string()
            })
            .collect()
    };
    let kept = peers(s.ports[0]);
    assert!(!kept[0].is_empty() && kept.iter().all(|p| *p == kept[0]), "one connection: {kept:?}");
    let fresh = peers(s.ports[1]);
    assert!(fresh[0] != fresh[1] && fresh[1] != fresh[2], "a connection per call: {fresh:?}");
    // The origin restarts: the idle connection it closed is not used, the
    // next call goes on a new one.
    let port = o.port;
    drop(o);
    let _o = Origin::start_on(port, None);
    let r = call(&format!("127.0.0.1:{}", s.ports[0]), "Unary", &["again"], None);
    assert_eq!((r["code"].as_str(), r["responses"][0].as_str()), (Some("OK"), Some("echo:again")), "{r}");
}

#[test]
fn a_prefix_location_answers_its_name_without_the_slash() {
    // As for proxy_pass: `/svc` is redirected to `/svc/`, arguments kept.
    let s =
        builder().http("server {\n  listen 127.0.0.1:{port};\n  location /svc/ { grpc_pass 127.0.0.1:1; }\n}").start();
    let r = s.get("/svc?x=1");
    assert_eq!(r.status, 301);
    let location = r.header("location").unwrap_or("");
    assert!(location.ends_with("/svc/?x=1"), "{location}");
}

/// Over HTTP/3 the origin's trailers (grpc-status) follow the DATA in a
/// HEADERS frame, as over HTTP/2 (nginx's grpc_trailers.t).
#[test]
fn an_http3_client_gets_the_trailers() {
    use common::tls::TlsFiles;
    if common::tls::skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let o = Origin::start(None);
    let s = builder()
        .tls_files()
        .http(&format!(
            "server {{\n  listen 127.0.0.1:{{port}} quic;\n  listen 127.0.0.1:{{port}} ssl;\n  \
             ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;\n  \
             location / {{ grpc_pass 127.0.0.1:{}; }}\n}}",
            o.port
        ))
        .start();
    let body = s.path("call.bin");
    std::fs::write(&body, message(b"hi")).expect("write the request");
    let run = common::h3::run(
        s.port,
        &[
            "--request",
            "POST",
            "/test.Echo/Unary",
            "--header",
            "content-type:application/grpc",
            "--header",
            "te:trailers",
            "--body-file",
            &body.display().to_string(),
        ],
    );
    let r = run.one();
    assert_eq!(r.status, 200, "{run:?}");
    assert_eq!(r.header("content-type"), Some("application/grpc"), "{run:?}");
    assert_eq!(r.length, message(b"echo:hi").len() as u64, "{run:?}");
    assert!(r.trailers.iter().any(|(k, v)| k == "grpc-status" && v == "0"), "{run:?}");
}

/// Calls made one at a time on one connection are answered at once:
/// HTTP/2 connections get TCP_NODELAY (nginx's `tcp_nodelay`, on by
/// default), so an answer written after a small frame does not wait for the
/// client's delayed ACK (40 ms on Linux). Before, about one call in four
/// took 40 ms more.
#[test]
fn calls_one_at_a_time_are_not_held_back() {
    let o = Origin::start(None);
    let s = h2c_server(&format!("grpc://127.0.0.1:{}", o.port), "");
    let dir = std::env::temp_dir().join(format!("sluice-grpc-seq-{}-{}", std::process::id(), s.port));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let msg = dir.join("msg");
    std::fs::write(&msg, message(b"seq")).expect("message file");
    let log = dir.join("log");
    let out = Command::new("h2load")
        .args(["-n", "200", "-c", "1", "-m", "1", "-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("-d")
        .arg(&msg)
        .arg(format!("--log-file={}", log.display()))
        .arg(format!("http://127.0.0.1:{}/test.Echo/Unary", s.port))
        .output()
        .expect("run h2load (nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("200 succeeded"), "{text}");
    // h2load's log: start time, status, duration in microseconds.
    let lines = std::fs::read_to_string(&log).expect("h2load's log");
    let durations: Vec<u64> =
        lines.lines().filter_map(|l| l.split('\t').nth(2).and_then(|d| d.trim().parse().ok())).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(durations.len(), 200, "{lines}");
    let slow = durations.iter().filter(|&&d| d >= 35_000).count();
    assert!(slow <= 5, "{slow} of 200 calls took 35 ms or more: {durations:?}");
}
