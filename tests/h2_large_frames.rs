//! HTTP/2 frames larger than the protocol's default 16 KiB. With buffers
//! raised past nginx's defaults sluice announces a larger
//! SETTINGS_MAX_FRAME_SIZE (nginx always announces 2^24-1), so a client may
//! send a request body of 60 KB in one DATA frame; sluice must take it,
//! padded or not, however the bytes arrive, without holding the frame
//! whole, skip a large frame of an unknown type, and still refuse control
//! frames of a size their type does not allow. Runs against nginx too
//! (SLUICE_TEST_NGINX=1).

mod common;

use std::time::{Duration, Instant};

use common::h2raw::{self, Event};
use common::origin::*;
use common::*;

fn server(origin: &Origin) -> TestServer {
    builder()
        .http(&sub(
            "server { listen 127.0.0.1:{port} http2; client_body_buffer_size 128k;\n  \
             http2_body_preread_size 128k;\n  \
             location / { proxy_pass http://127.0.0.1:%O%; } }",
            &[("%O%", origin.port)],
        ))
        .start()
}

fn body_origin() -> Origin {
    Origin::start(|r| {
        let sum: u64 = r.body.iter().enumerate().map(|(i, b)| (i as u64 + 1) * u64::from(*b)).sum();
        Reply::http(200, &["Content-Type: text/plain"], format!("{} bytes, sum {sum}\n", r.body.len()))
    })
}

fn expected(body: &[u8]) -> String {
    let sum: u64 = body.iter().enumerate().map(|(i, b)| (i as u64 + 1) * u64::from(*b)).sum();
    format!("{} bytes, sum {sum}\n", body.len())
}

/// Connects and returns the server's SETTINGS as (id, value) pairs.
fn open(port: u16) -> (h2raw::Conn, Vec<(u16, u32)>) {
    let mut c = h2raw::Conn::connect(port);
    let mut out = h2raw::PREFACE.to_vec();
    out.extend(h2raw::settings_frame(&[]));
    out.extend(h2raw::window_update_frame(0, (16 << 20) - 65535));
    c.send(&out);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match c.read_event(deadline) {
            Event::Frame(f) if f.kind == h2raw::SETTINGS && f.flags & h2raw::ACK == 0 => {
                c.send(h2raw::settings_ack_frame());
                let s = f
                    .payload
                    .chunks_exact(6)
                    .map(|p| (u16::from_be_bytes([p[0], p[1]]), u32::from_be_bytes([p[2], p[3], p[4], p[5]])))
                    .collect();
                return (c, s);
            }
            Event::Frame(_) => {}
            e => panic!("no SETTINGS: {e:?}"),
        }
    }
}

fn post_block(path: &str, len: usize) -> Vec<u8> {
    h2raw::request_block("POST", path, "localhost", &[("content-length", &len.to_string())])
}

#[test]
fn a_body_in_one_large_data_frame_reaches_the_origin() {
    let o = body_origin();
    let s = server(&o);
    let (mut c, settings) = open(s.port);
    let max = settings.iter().find(|(id, _)| *id == h2raw::SETTINGS_MAX_FRAME_SIZE).map(|(_, v)| *v);
    assert!(max.is_some_and(|m| m >= 128 * 1024), "SETTINGS_MAX_FRAME_SIZE for raised buffers: {settings:?}");

    // 60,000 bytes in one frame, within the 64 KiB stream window.
    let body = pseudo_random(60_000, 5);
    let r = c.try_request(&post_block("/one", body.len()), Some(&body)).expect("response");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), expected(&body));

    // Padded: 200 bytes of padding after 50,000 of data.
    let body = pseudo_random(50_000, 6);
    let mut payload = vec![200u8];
    payload.extend_from_slice(&body);
    payload.extend_from_slice(&[0u8; 200]);
    let id = c.next_stream;
    c.next_stream += 2;
    let mut out = h2raw::header_frames(id, &post_block("/padded", body.len()), false, 16384);
    out.extend(h2raw::frame(h2raw::DATA, h2raw::PADDED | h2raw::END_STREAM, id, &payload));
    c.send(&out);
    let r = c.read_response(id).expect("padded response");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), expected(&body));

    // The same frame arriving in small pieces with pauses.
    let body = pseudo_random(40_000, 7);
    let id = c.next_stream;
    c.next_stream += 2;
    let mut out = h2raw::header_frames(id, &post_block("/pieces", body.len()), false, 16384);
    out.extend(h2raw::data_frame(id, &body, true));
    for piece in out.chunks(7_001) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = c.read_response(id).expect("response to a frame sent in pieces");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), expected(&body));
    assert_eq!(o.count(), 3);
}

#[test]
fn a_large_unknown_frame_is_skipped_and_a_large_ping_refused() {
    let o = body_origin();
    let s = server(&o);
    let (mut c, _) = open(s.port);
    // An extension frame type nobody knows, 20,000 bytes: ignored.
    c.send(h2raw::frame(0xfa, 0, 0, &vec![0x16; 20_000]));
    let r = c.get("/after-unknown");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), "0 bytes, sum 0\n");

    // PING is 8 bytes: 20,000 is a connection error FRAME_SIZE_ERROR.
    c.send(h2raw::frame(h2raw::PING, 0, 0, &vec![0; 20_000]));
    let deadline = Instant::now() + Duration::from_secs(5);
    let code = loop {
        match c.read_event(deadline) {
            Event::Frame(f) if f.kind == h2raw::GOAWAY => break f.error_code(),
            Event::Frame(_) => {}
            e => panic!("no GOAWAY after a 20,000-byte PING: {e:?}"),
        }
    };
    assert_eq!(code, Some(h2raw::FRAME_SIZE_ERROR));
}

/// A large DATA frame is passed on as it arrives, not held until whole:
/// with `proxy_request_buffering off` the origin has the first half of a
/// frame's bytes while the client still holds back the second.
#[test]
fn a_large_frame_streams_to_the_origin_before_it_is_whole() {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let oport = listener.local_addr().expect("addr").port();
    let got = Arc::new(AtomicUsize::new(0));
    let seen = got.clone();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = listener.accept() else { return };
        let mut buf = Vec::new();
        let mut tmp = [0u8; 8192];
        let head_end = loop {
            let Ok(n) = c.read(&mut tmp) else { return };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&tmp[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        seen.store(buf.len() - head_end, Ordering::SeqCst);
        while seen.load(Ordering::SeqCst) < 60_000 {
            match c.read(&mut tmp) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    seen.fetch_add(n, Ordering::SeqCst);
                }
            }
        }
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nwhole");
    });
    let s = builder()
        .http(&sub(
            "server { listen 127.0.0.1:{port} http2; http2_body_preread_size 128k;\n  \
             location / { proxy_pass http://127.0.0.1:%O%; proxy_request_buffering off;\n    \
             proxy_http_version 1.1; } }",
            &[("%O%", oport)],
        ))
        .start();
    let (mut c, _) = open(s.port);
    let body = pseudo_random(60_000, 8);
    let mut out = h2raw::header_frames(1, &post_block("/stream", body.len()), false, 16384);
    let frame = h2raw::data_frame(1, &body, true);
    let half = out.len() + 9 + 30_000;
    out.extend(frame);
    c.send(&out[..half]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.load(Ordering::SeqCst) < 20_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let early = got.load(Ordering::SeqCst);
    assert!(early >= 20_000, "the origin had {early} bytes of the frame's first 30,000");
    c.send(&out[half..]);
    c.next_stream = 3;
    let r = c.read_response(1).expect("response");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"whole");
    assert_eq!(got.load(Ordering::SeqCst), 60_000);
}
