//! A scripted FastCGI application (tests/fastcgi.rs, tests/cache_rules.rs):
//! it answers each connection with the exact records a test gives, so
//! framing nginx and sluice must cope with (short, long, split bodies) can
//! be produced at will.

use std::time::Duration;

/// A FastCGI application on loopback TCP that reads each request (to its
/// empty STDIN record) and answers with the bytes `reply` gives for the
/// request's number, then closes.
pub fn raw_app(reply: impl Fn(usize) -> Vec<u8> + Send + 'static) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (n, c) in l.incoming().enumerate() {
            let Ok(mut c) = c else { return };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            // Records until the empty STDIN.
            loop {
                let mut h = [0u8; 8];
                if std::io::Read::read_exact(&mut c, &mut h).is_err() {
                    break;
                }
                let len = u16::from_be_bytes([h[4], h[5]]) as usize + h[6] as usize;
                let mut skip = vec![0u8; len];
                if std::io::Read::read_exact(&mut c, &mut skip).is_err() {
                    break;
                }
                if h[1] == 5 && h[4] == 0 && h[5] == 0 {
                    break;
                }
            }
            let _ = std::io::Write::write_all(&mut c, &reply(n));
        }
    });
    port
}

pub fn rec(kind: u8, content: &[u8]) -> Vec<u8> {
    let mut v = vec![1, kind, 0, 1, (content.len() >> 8) as u8, content.len() as u8, 0, 0];
    v.extend_from_slice(content);
    v
}

pub fn end_request() -> Vec<u8> {
    rec(3, &[0; 8])
}
