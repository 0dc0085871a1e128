//! DNS messages (RFC 1035) as far as a forwarding client needs them: a
//! recursive query for one name's A, AAAA, SRV (RFC 2782) or PTR records, and
//! the answer's records with their smallest TTL, or the name a CNAME points
//! to when the server gave no record of the type asked. The answer is bytes
//! from the network, so the reader checks every length and offset, follows
//! compression pointers only backwards and a bounded number of times, and
//! takes only an answer to the query it sent (same id, same question). A
//! truncated answer is told apart, so the caller can ask again over TCP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const A: u16 = 1;
pub const AAAA: u16 = 28;
pub const SRV: u16 = 33;
pub const CNAME: u16 = 5;
pub const PTR: u16 = 12;
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
    /// Not an answer to our question, or malformed.
    Malformed,
    /// The answer did not fit (TC set): ask again over TCP.
    Truncated,
    /// No server answered in time.
    TimedOut,
    /// A server could not be reached (ICMP port unreachable, connection refused).
    Unreachable,
}

impl Failure {
    pub fn nginx_text(self) -> &'static str {
        match self {
            Failure::FormatError => "1: Format error",
            Failure::ServerFailure => "2: Server failure",
            Failure::HostNotFound => "3: Host not found",
            Failure::Unimplemented => "4: Unimplemented",
            Failure::Refused => "5: Operation refused",
            Failure::Malformed | Failure::Truncated => "1: Format error",
            Failure::TimedOut => "110: Operation timed out",
            Failure::Unreachable => "111: Connection refused",
        }
    }
}

/// One SRV record: where a service runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// The host, dotted, without the root's trailing dot.
    pub target: String,
}

/// What an answer holds for the question asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Records {
    /// A or AAAA questions: the addresses in answer order, duplicates kept
    /// (nginx makes a peer of each, so a name listed twice is tried twice).
    pub addrs: Vec<IpAddr>,
    /// SRV questions: every record, duplicates kept (nginx makes a peer of
    /// each).
    pub srvs: Vec<Srv>,
    /// PTR questions: the names, in answer order (an empty RDATA is
    /// malformed, as nginx has it).
    pub names: Vec<String>,
    /// The name a CNAME record gave, when no record of the type asked came
    /// with it (the resolver then asks about that name).
    pub cname: Option<String>,
    /// The smallest TTL of the records taken and of the CNAMEs that led to
    /// them (seconds; an expired alias expires its addresses too, as in
    /// nginx); 0 when none.
    pub ttl: u32,
}

/// A query for `name` (dotted, no trailing dot needed); None when the name
/// cannot be sent (empty label, label over 63 bytes, over 255 bytes). The
/// 255 is what an answer's name may hold ([`Reader::name`]): nginx asks
/// about any name a CNAME gave, four 63-byte labels included.
pub fn query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 255 {
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
    match parse_records(msg, id, name, qtype) {
        Err(Failure::Truncated) => Err(Failure::Malformed),
        Err(f) => Err(f),
        Ok(r) => Ok((r.addrs, r.ttl)),
    }
}

/// The records of type `qtype` (A, AAAA or SRV) in an answer to
/// [`query`]`(id, name, qtype)`: see [`Records`].
pub fn parse_records(msg: &[u8], id: u16, name: &str, qtype: u16) -> Result<Records, Failure> {
    let r = Reader { msg };
    if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id {
        return Err(Failure::Malformed);
    }
    let (flags_hi, flags_lo) = (msg[2], msg[3]);
    // QR set, a standard query's answer.
    if flags_hi & 0x80 == 0 || flags_hi & 0x78 != 0 {
        return Err(Failure::Malformed);
    }
    let rcode = match flags_lo & 0x0f {
        0 => None,
        1 => Some(Failure::FormatError),
        2 => Some(Failure::ServerFailure),
        3 => Some(Failure::HostNotFound),
        4 => Some(Failure::Unimplemented),
        5 => Some(Failure::Refused),
        _ => Some(Failure::Malformed),
    };
    let qd = r.u16(4)?;
    if qd != 1 {
        // A refusal may come without the question (some servers answer
        // FORMERR or SERVFAIL so); the id still had to match.
        return Err(match (qd, rcode) {
            (0, Some(f)) => f,
            _ => Failure::Malformed,
        });
    }
    // The question must be ours.
    let (qname, next) = r.name(12)?;
    let want = name.strip_suffix('.').unwrap_or(name);
    if !qname.eq_ignore_ascii_case(want) || r.u16(next)? != qtype || r.u16(next + 2)? != CLASS_IN {
        return Err(Failure::Malformed);
    }
    if flags_hi & 0x02 != 0 {
        return Err(Failure::Truncated);
    }
    if let Some(f) = rcode {
        return Err(f);
    }
    let an = r.u16(6)?;
    let mut at = next + 4;
    let mut out = Records::default();
    let mut ttl = u32::MAX;
    let mut cname = None;
    let mut cname_ttl = u32::MAX;
    for _ in 0..an {
        let (_, next) = r.name(at)?;
        let rtype = r.u16(next)?;
        let class = r.u16(next + 2)?;
        let rttl = r.u32(next + 4)?;
        let len = r.u16(next + 8)? as usize;
        let data_at = next + 10;
        let data = r.slice(data_at, len)?;
        at = data_at + len;
        if class != CLASS_IN {
            continue;
        }
        // RFC 2181: a TTL with the top bit set is zero.
        let rttl = if rttl > i32::MAX as u32 { 0 } else { rttl };
        match (rtype, data.len()) {
            (CNAME, _) => {
                let (target, end) = r.name(data_at)?;
                if end > at {
                    return Err(Failure::Malformed);
                }
                cname_ttl = cname_ttl.min(rttl);
                cname.get_or_insert(target);
            }
            (A, 4) if qtype == A => {
                let ip = IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
                ttl = ttl.min(rttl);
                out.addrs.push(ip);
            }
            (AAAA, 16) if qtype == AAAA => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                let ip = IpAddr::V6(Ipv6Addr::from(b));
                ttl = ttl.min(rttl);
                out.addrs.push(ip);
            }
            (PTR, _) if qtype == PTR => {
                if data.is_empty() {
                    return Err(Failure::Malformed);
                }
                let (target, end) = r.name(data_at)?;
                if end > at || target.is_empty() {
                    return Err(Failure::Malformed);
                }
                ttl = ttl.min(rttl);
                out.names.push(target);
            }
            (SRV, 7..) if qtype == SRV => {
                let (target, end) = r.name(data_at + 6)?;
                if end > at {
                    // The target runs past its record.
                    return Err(Failure::Malformed);
                }
                if target.is_empty() {
                    // "." (RFC 2782): no such service here.
                    continue;
                }
                ttl = ttl.min(rttl);
                out.srvs.push(Srv {
                    priority: u16::from_be_bytes([data[0], data[1]]),
                    weight: u16::from_be_bytes([data[2], data[3]]),
                    port: u16::from_be_bytes([data[4], data[5]]),
                    target,
                });
            }
            _ => {}
        }
    }
    if out.addrs.is_empty() && out.srvs.is_empty() && out.names.is_empty() {
        out.cname = cname;
        ttl = if out.cname.is_some() { cname_ttl } else { 0 };
    } else {
        ttl = ttl.min(cname_ttl);
    }
    out.ttl = if ttl == u32::MAX { 0 } else { ttl };
    Ok(out)
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

    fn dns_name(n: &str) -> Vec<u8> {
        let mut v = Vec::new();
        for l in n.split('.') {
            v.push(l.len() as u8);
            v.extend_from_slice(l.as_bytes());
        }
        v.push(0);
        v
    }

    #[test]
    fn ptr_records() {
        let q = "1.0.0.127.in-addr.arpa";
        let m = answer(7, q, PTR, 0, &[(PTR, 60, dns_name("a.example.net"))]);
        let r = parse_records(&m, 7, q, PTR).unwrap();
        assert_eq!(r.names, vec!["a.example.net".to_string()]);
        assert_eq!((r.ttl, r.addrs.len(), r.cname.is_none()), (60, 0, true));
        // nginx refuses an empty RDATA; a PTR in an A answer is ignored.
        assert_eq!(parse_records(&answer(7, q, PTR, 0, &[(PTR, 60, vec![])]), 7, q, PTR), Err(Failure::Malformed));
        let m = answer(7, "x.test", A, 0, &[(PTR, 60, dns_name("a.example.net"))]);
        assert!(parse_records(&m, 7, "x.test", A).unwrap().names.is_empty());
        // Only a CNAME: followed by the caller.
        let m = answer(7, q, PTR, 0, &[(CNAME, 60, dns_name("1.1.0.0.127.in-addr.arpa"))]);
        assert_eq!(parse_records(&m, 7, q, PTR).unwrap().cname.as_deref(), Some("1.1.0.0.127.in-addr.arpa"));
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
        // A CNAME first, then the address; names compared without case; the
        // alias's shorter TTL is the answer's.
        let m = answer(7, "App.Test", A, 0, &[(CNAME, 10, b"\x01x\x00".to_vec()), (A, 30, vec![10, 0, 0, 1])]);
        assert_eq!(parse_answer(&m, 7, "app.test", A).unwrap(), (vec![IpAddr::from([10, 0, 0, 1])], 10));
        // A name listed twice stays twice (a peer each, as in nginx).
        let m = answer(7, "app.test", A, 0, &[(A, 30, vec![10, 0, 0, 2]), (A, 30, vec![10, 0, 0, 2])]);
        assert_eq!(parse_answer(&m, 7, "app.test", A).unwrap().0, vec![IpAddr::from([10, 0, 0, 2]); 2]);
        // A chain: the first alias is followed, with the smallest TTL of the
        // chain (a CNAME to a CNAME in one answer, no address).
        let m = answer(7, "app.test", A, 0, &[(CNAME, 40, dns_name("b.test")), (CNAME, 20, dns_name("c.test"))]);
        let r = parse_records(&m, 7, "app.test", A).unwrap();
        assert_eq!((r.cname.as_deref(), r.ttl), (Some("b.test"), 20));
        // Four 63-byte labels (255 bytes): asked about, and read back.
        let long = vec!["a".repeat(63); 4].join(".");
        let m = answer(7, "app.test", A, 0, &[(CNAME, 40, dns_name(&long))]);
        let r = parse_records(&m, 7, "app.test", A).unwrap();
        assert_eq!(r.cname.as_deref(), Some(long.as_str()));
        assert!(query(1, &long, A).is_some() && query(1, &format!("{long}a"), A).is_none());
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

    fn srv_data(priority: u16, weight: u16, port: u16, target: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&priority.to_be_bytes());
        d.extend_from_slice(&weight.to_be_bytes());
        d.extend_from_slice(&port.to_be_bytes());
        d.extend_from_slice(target);
        d
    }

    #[test]
    fn srv_records() {
        let n = "_http._tcp.app.test";
        // Two records (one target compressed back into the question), the
        // smaller TTL, duplicates kept.
        let m = answer(
            3,
            n,
            SRV,
            0,
            &[
                (SRV, 60, srv_data(1, 5, 8080, b"\x01b\xc0\x17")),
                (SRV, 30, srv_data(2, 0, 8081, b"\x01c\x00")),
                (SRV, 90, srv_data(2, 0, 8081, b"\x01c\x00")),
            ],
        );
        let r = parse_records(&m, 3, n, SRV).unwrap();
        assert_eq!(r.ttl, 30);
        assert_eq!(r.srvs.len(), 3);
        assert_eq!(r.srvs[0], Srv { priority: 1, weight: 5, port: 8080, target: "b.app.test".into() });
        assert_eq!(r.srvs[1], Srv { priority: 2, weight: 0, port: 8081, target: "c".into() });
        assert!(r.addrs.is_empty() && r.cname.is_none());
        // "." is no service there; a record too short or a target past its
        // record is malformed.
        let m = answer(3, n, SRV, 0, &[(SRV, 5, srv_data(0, 0, 0, b"\x00"))]);
        assert_eq!(parse_records(&m, 3, n, SRV).unwrap().srvs, vec![]);
        let m = answer(3, n, SRV, 0, &[(SRV, 5, vec![0, 1, 0, 2, 0])]);
        assert_eq!(parse_records(&m, 3, n, SRV).unwrap().srvs, vec![]);
        let mut m = answer(3, n, SRV, 0, &[(SRV, 5, srv_data(0, 0, 1, b"\x05abcde\x00"))]);
        let len_at = m.len() - 13 - 2;
        m[len_at + 1] = 8;
        assert!(parse_records(&m, 3, n, SRV).is_err());
        // An SRV record in an answer to A is not taken; an A record in an
        // answer to SRV neither.
        let m = answer(3, "app.test", A, 0, &[(SRV, 5, srv_data(0, 0, 1, b"\x01x\x00"))]);
        assert_eq!(parse_records(&m, 3, "app.test", A).unwrap(), Records::default());
        let m = answer(3, n, SRV, 0, &[(A, 5, vec![1, 2, 3, 4])]);
        assert_eq!(parse_records(&m, 3, n, SRV).unwrap(), Records::default());
        // A CNAME alone is handed back to be followed.
        let m = answer(3, n, SRV, 0, &[(CNAME, 7, b"\x01y\x00".to_vec())]);
        let r = parse_records(&m, 3, n, SRV).unwrap();
        assert_eq!((r.cname.as_deref(), r.ttl), (Some("y"), 7));
        // Truncated: told apart, so the caller asks over TCP.
        let mut m = answer(3, n, SRV, 0, &[]);
        m[2] |= 0x02;
        assert_eq!(parse_records(&m, 3, n, SRV), Err(Failure::Truncated));
        assert_eq!(parse_answer(&m, 3, n, SRV), Err(Failure::Malformed));
    }
}
