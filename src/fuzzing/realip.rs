//! The client-address parsers of a server behind a balancer: the PROXY
//! protocol header (`connection/proxy_protocol`) and the forwarded-address
//! walk of the realip module (`X-Forwarded-For` and friends).

use std::net::SocketAddr;

use crate::cidr::Cidr;
use crate::http::connection::proxy_protocol::{self, Parsed};

/// PROXY header: never panics; a header found is found whatever follows
/// it and at every split (each shorter prefix asks for more); the
/// addresses of a v1 header hold only what nginx allows there.
pub fn proxy_protocol(data: &[u8]) {
    let whole = proxy_protocol::parse(data);
    match &whole {
        Parsed::Done { len, addrs } => {
            assert!(*len <= data.len() && *len > 0, "{len} of {}", data.len());
            assert_eq!(proxy_protocol::parse(&data[..*len]), whole, "the bytes after the header changed it");
            for cut in [0, 1, 5, 6, 11, 12, 15, 16, *len / 2, len.saturating_sub(1)] {
                if cut < *len && cut > 0 {
                    assert_eq!(proxy_protocol::parse(&data[..cut]), Parsed::Need, "prefix {cut} of {len}");
                }
            }
            // The TLV reader (`$proxy_protocol_tlv_*`) stays inside the
            // header for every name it knows and for numbered types.
            if let Some(a) = addrs {
                for name in ["alpn", "authority", "unique_id", "ssl", "netns", "0x3", "0xff", "ssl_verify", "ssl_cn"] {
                    if let Some(v) = a.tlv(name) {
                        assert!(v.len() <= *len, "{name}: {} of {len}", v.len());
                    }
                }
            }
            if let (Some(a), true) = (addrs, data.starts_with(b"PROXY ")) {
                for t in [&a.src_addr, &a.dst_addr] {
                    assert!(t.bytes().all(|c| c == b'.' || c == b':' || c.is_ascii_hexdigit()), "{t:?}");
                }
            }
        }
        Parsed::Need => assert!(data.len() < proxy_protocol::V2_MAX, "still asking for more at {}", data.len()),
        Parsed::Invalid(msg) => assert!(!msg.is_empty()),
    }
}

/// The forwarded-address walk: never panics; what it returns came from
/// the values (an address printed from one of them parses back to
/// itself), and without trust nothing changes.
pub fn forwarded(data: &[u8]) {
    let values: Vec<&[u8]> = data.split(|&b| b == b'\n').take(8).collect();
    let trusted: Vec<Cidr> =
        ["127.0.0.0/8", "10.0.0.0/8", "::1"].iter().filter_map(|s| Cidr::parse(s)).map(|p| p.cidr).collect();
    let peer: SocketAddr = ([127, 0, 0, 1], 40000).into();
    let outsider: SocketAddr = ([192, 0, 2, 1], 40000).into();
    assert_eq!(crate::http::realip::forwarded(outsider, &values, &trusted, true), None);
    for recursive in [false, true] {
        if let Some(a) = crate::http::realip::forwarded(peer, &values, &trusted, recursive) {
            let text = if a.port() == 0 { a.ip().to_string() } else { a.to_string() };
            assert_eq!(crate::http::realip::parse_addr_port(text.as_bytes()), Some(a), "{text}");
        }
    }
    if let Some(a) = crate::http::realip::parse_addr_port(data) {
        assert!(data.len() >= 2 && a.ip().to_string().len() <= data.len() + 16);
    }
}

/// A DNS answer to `resolver`'s question (its id taken from the input):
/// never panics; addresses only of the family asked for, SRV records only
/// to an SRV question and each with a target, PTR names only to a PTR
/// question and never empty, a CNAME only when nothing
/// of the type asked came, with a TTL that fits nginx's signed 32 bits;
/// bytes after our own question parse too.
pub fn dns_answer(data: &[u8]) {
    use crate::resolver::wire;
    let id = if data.len() >= 2 { u16::from_be_bytes([data[0], data[1]]) } else { 0x0141 };
    for (qtype, name) in [
        (wire::A, "app.test"),
        (wire::AAAA, "app.test"),
        (wire::SRV, "_http._tcp.app.test"),
        (wire::PTR, "1.0.0.127.in-addr.arpa"),
    ] {
        if let Ok(r) = wire::parse_records(data, id, name, qtype) {
            assert!(r.ttl <= i32::MAX as u32);
            assert!(r.addrs.iter().all(|a| a.is_ipv4() == (qtype == wire::A)), "{:?}", r.addrs);
            assert!(qtype != wire::SRV || r.addrs.is_empty());
            assert!(qtype == wire::SRV || r.srvs.is_empty());
            assert!(qtype == wire::PTR || r.names.is_empty());
            assert!(qtype != wire::PTR || r.addrs.is_empty());
            assert!(r.srvs.iter().all(|s| !s.target.is_empty() && s.target.len() <= 255));
            assert!(r.names.iter().all(|n| !n.is_empty() && n.len() <= 255));
            assert!(r.cname.is_none() || (r.addrs.is_empty() && r.srvs.is_empty() && r.names.is_empty()));
        }
        let mut own = wire::query(id, name, qtype).unwrap_or_default();
        if own.len() > 3 {
            own[2] |= 0x80;
            own.extend_from_slice(data);
            let _ = wire::parse_records(&own, id, name, qtype);
        }
    }
    for qtype in [wire::A, wire::AAAA] {
        if let Ok((addrs, ttl)) = wire::parse_answer(data, id, "app.test", qtype) {
            assert!(ttl <= i32::MAX as u32);
            assert!(addrs.iter().all(|a| a.is_ipv4() == (qtype == wire::A)), "{addrs:?}");
            assert_eq!(u16::from_be_bytes([data[0], data[1]]), id);
        }
        // As the resolver sees its own answers too.
        let mut own = wire::query(id, "app.test", qtype).unwrap_or_default();
        if own.len() > 3 {
            own[2] |= 0x80;
            own.extend_from_slice(data);
            let _ = wire::parse_answer(&own, id, "app.test", qtype);
        }
    }
}
