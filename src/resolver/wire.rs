//! DNS messages (RFC 1035) as far as a forwarding client needs them: a
//! recursive query for one name's A or AAAA records, and the answer's
//! addresses with their smallest TTL. The answer is bytes from the network,
//! so the reader checks every length and offset, follows compression
//! pointers only backwards and a bounded number of times, and takes only
//! an answer to the query it sent (same id, same question).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const A: u16 = 1;
pub const AAAA: u16 = 28;
const CNAME: u16 = 5;
const CLASS_IN: u16 = 1;

/// Why an answer gives no addresses, in nginx's words and numbers
/// (`could not be resolved (3: Host not found)`).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Failure {
    FormatError,
    ServerFailure,
    HostNotFound,
    Unimplemented,
    Refused,
    /// Not an answer to our question, truncated or malformed.
    Malformed,
}

impl Failure {
    pub fn nginx_text(self) -> &'static str {
        match self {
            Failure::FormatError => "1: Format error",
            Failure::ServerFailure => "2: Server failure",
            Failure::HostNotFound => "3: Host not found",
            Failure::Unimplemented => "4: Unimplemented",
            Failure::Refused => "5: Operation refused",
            Failure::Malformed => "1: Format error",
        }
    }
}

/// A query for `name` (dotted, no trailing dot needed); None when the name
/// cannot be a DNS name (empty label, label over 63 bytes, over 253 bytes).
pub fn query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&CLASS_IN.to_be_bytes());
    Some(q)
}

/// The addresses of type `qtype` in an answer to [`query`]`(id, name,
/// qtype)`, and the smallest TTL among them (seconds). An answer with no
/// such record (a name with only the other family) is `Ok` and empty.
pub fn parse_answer(msg: &[u8], id: u16, name: &str, qtype: u16) -> Result<(Vec<IpAddr>, u32), Failure> {
    let r = Reader { msg };
    if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id {
        return Err(Failure::Malformed);
    }
    let (flags_hi, flags_lo) = (msg[2], msg[3]);
    // QR set, a standard query's answer, not truncated.
    if flags_hi & 0x80 == 0 || flags_hi & 0x78 != 0 || flags_hi & 0x02 != 0 {
        return Err(Failure::Malformed);
    }
    match flags_lo & 0x0f {
        0 => {}
        1 => return Err(Failure::FormatError),
        2 => return Err(Failure::ServerFailure),
        3 => return Err(Failure::HostNotFound),
        4 => return Err(Failure::Unimplemented),
        5 => return Err(Failure::Refused),
        _ => return Err(Failure::Malformed),
    }
    let qd = r.u16(4)?;
    let an = r.u16(6)?;
    if qd != 1 {
        return Err(Failure::Malformed);
    }
    // The question must be ours.
    let mut at = 12;
    let (qname, next) = r.name(at)?;
    let want = name.strip_suffix('.').unwrap_or(name);
    if !qname.eq_ignore_ascii_case(want) || r.u16(next)? != qtype || r.u16(next + 2)? != CLASS_IN {
        return Err(Failure::Malformed);
    }
    at = next + 4;
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    for _ in 0..an {
        let (_, next) = r.name(at)?;
        let rtype = r.u16(next)?;
        let class = r.u16(next + 2)?;
        let rttl = r.u32(next + 4)?;
        let len = r.u16(next + 8)? as usize;
        let data = r.slice(next + 10, len)?;
        at = next + 10 + len;
        if class != CLASS_IN || rtype == CNAME {
            continue;
        }
        let ip = match (rtype, data.len()) {
            (A, 4) if qtype == A => IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
            (AAAA, 16) if qtype == AAAA => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                IpAddr::V6(Ipv6Addr::from(b))
            }
            _ => continue,
        };
        // RFC 2181: a TTL with the top bit set is zero.
        ttl = ttl.min(if rttl > i32::MAX as u32 { 0 } else { rttl });
        if !addrs.contains(&ip) {
            addrs.push(ip);
        }
    }
    if addrs.is_empty() {
        ttl = 0;
    }
    Ok((addrs, ttl))
}

struct Reader<'a> {
    msg: &'a [u8],
}

impl Reader<'_> {
    fn slice(&self, at: usize, len: usize) -> Result<&[u8], Failure> {
        self.msg.get(at..at.checked_add(len).ok_or(Failure::Malformed)?).ok_or(Failure::Malformed)
    }
    fn u16(&self, at: usize) -> Result<u16, Failure> {
        let b = self.slice(at, 2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: usize) -> Result<u32, Failure> {
        let b = self.slice(at, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The dotted name at `at` and the offset after it (after the first
    /// pointer when compressed). Pointers must point backwards, at most
    /// 64 of them.
    fn name(&self, mut at: usize) -> Result<(String, usize), Failure> {
        let mut out = String::new();
        let mut end = None;
        let mut jumps = 0;
        loop {
            let len = *self.msg.get(at).ok_or(Failure::Malformed)? as usize;
            match len & 0xc0 {
                0x00 if len == 0 => {
                    return Ok((out, end.unwrap_or(at + 1)));
                }
                0x00 => {
                    let label = self.slice(at + 1, len)?;
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&String::from_utf8_lossy(label));
                    if out.len() > 255 {
                        return Err(Failure::Malformed);
                    }
                    at += 1 + len;
                }
                0xc0 => {
                    let target = ((len & 0x3f) << 8) | *self.msg.get(at + 1).ok_or(Failure::Malformed)? as usize;
                    jumps += 1;
                    if target >= at || jumps > 64 {
                        return Err(Failure::Malformed);
                    }
                    end.get_or_insert(at + 2);
                    at = target;
                }
                _ => return Err(Failure::Malformed),
            }
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// An answer to `query(id, name, qtype)` with `records` (type, ttl,
    /// data) whose names point back at the question; also used by the
    /// resolver's tests and the fuzz corpus.
    pub fn answer(id: u16, name: &str, qtype: u16, rcode: u8, records: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
        let mut m = query(id, name, qtype).expect("name");
        m[2] = 0x81;
        m[3] = 0x80 | rcode;
        m[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (t, ttl, data) in records {
            m.extend_from_slice(&[0xc0, 12]);
            m.extend_from_slice(&t.to_be_bytes());
            m.extend_from_slice(&CLASS_IN.to_be_bytes());
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&(data.len() as u16).to_be_bytes());
            m.extend_from_slice(data);
        }
        m
    }

    #[test]
    fn queries_and_answers() {
        let q = query(0x1234, "app.example.test", A).unwrap();
        assert_eq!(&q[..4], &[0x12, 0x34, 0x01, 0x00]);
        assert_eq!(&q[12..], b"\x03app\x07example\x04test\x00\x00\x01\x00\x01");
        assert!(query(1, "a..b", A).is_none() && query(1, "", A).is_none());
        assert!(query(1, &"x".repeat(64), A).is_none());

        let m = answer(7, "app.test", A, 0, &[(A, 300, vec![127, 0, 0, 1]), (A, 60, vec![127, 0, 0, 2])]);
        let (ips, ttl) = parse_answer(&m, 7, "app.test", A).unwrap();
        assert_eq!(ips, vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 2])]);
        assert_eq!(ttl, 60);
        // A CNAME first, then the address; names compared without case.
        let m = answer(7, "App.Test", A, 0, &[(CNAME, 10, b"\x01x\x00".to_vec()), (A, 30, vec![10, 0, 0, 1])]);
        assert_eq!(parse_answer(&m, 7, "app.test", A).unwrap().0, vec![IpAddr::from([10, 0, 0, 1])]);
        let mut v6 = vec![0u8; 16];
        v6[15] = 1;
        let m = answer(9, "app.test", AAAA, 0, &[(AAAA, 5, v6)]);
        assert_eq!(parse_answer(&m, 9, "app.test", AAAA).unwrap().0, vec!["::1".parse::<IpAddr>().unwrap()]);
        // Failures and someone else's answers.
        assert_eq!(parse_answer(&answer(7, "app.test", A, 3, &[]), 7, "app.test", A), Err(Failure::HostNotFound));
        assert_eq!(parse_answer(&answer(7, "app.test", A, 2, &[]), 7, "app.test", A), Err(Failure::ServerFailure));
        assert_eq!(parse_answer(&m, 8, "app.test", AAAA), Err(Failure::Malformed));
        assert_eq!(parse_answer(&m, 9, "other.test", AAAA), Err(Failure::Malformed));
        assert_eq!(parse_answer(&m[..m.len() - 1], 9, "app.test", AAAA), Err(Failure::Malformed));
        // A pointer loop.
        let mut bad = answer(7, "app.test", A, 0, &[(A, 1, vec![1, 2, 3, 4])]);
        let at = bad.len() - 16;
        bad[at] = 0xc0;
        bad[at + 1] = at as u8;
        assert_eq!(parse_answer(&bad, 7, "app.test", A), Err(Failure::Malformed));
        // Empty: a name with records of the other family only.
        assert_eq!(parse_answer(&answer(7, "app.test", A, 0, &[]), 7, "app.test", A), Ok((vec![], 0)));
    }
}
