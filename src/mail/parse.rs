//! The client command parsers of the three protocols (nginx's
//! `ngx_mail_parse.c`), over the bytes read so far: each call looks at the
//! buffer from its start and says whether a whole command is there, how
//! long it is, and what it holds, so a command split across reads or
//! pipelined with others parses the same. They are pure functions of the
//! bytes (fuzzed by `crate::fuzzing::mail_command`).

/// The longest argument list a command may have (nginx refuses more).
pub const MAX_ARGS: usize = 10;

#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Command {
    /// Bytes of the buffer the command took, line end included.
    pub consumed: usize,
    /// IMAP's tag (empty for POP3 and SMTP).
    pub tag: Vec<u8>,
    /// The command's name, upper-cased.
    pub name: Vec<u8>,
    pub args: Vec<Vec<u8>>,
    /// The whole line without its end (SMTP's `MAIL FROM` and `RCPT TO`
    /// are passed on as sent).
    pub line: Vec<u8>,
}

#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Parsed {
    /// Not a whole command yet.
    Need,
    /// IMAP: the command's `n`-th synchronizing literal (from 0) waits for
    /// the server's continuation before its bytes come.
    Literal(usize),
    Command(Command),
    /// A malformed command of `consumed` bytes (its tag, if one was read).
    Invalid {
        consumed: usize,
        tag: Vec<u8>,
    },
}

/// The end of the line starting at `from`: (index of its first end byte,
/// index after LF).
fn line_end(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let lf = memchr::memchr(b'\n', &buf[from..])? + from;
    let end = if lf > from && buf[lf - 1] == b'\r' { lf - 1 } else { lf };
    Some((end, lf + 1))
}

/// A continuation line of a SASL exchange (after `334 `/`+ `): the whole
/// line, trailing spaces cut, as one argument.
pub fn continuation(buf: &[u8]) -> Parsed {
    let Some((end, next)) = line_end(buf, 0) else { return Parsed::Need };
    let mut line = &buf[..end];
    while let [rest @ .., b' '] = line {
        line = rest;
    }
    Parsed::Command(Command {
        consumed: next,
        tag: Vec::new(),
        name: Vec::new(),
        args: vec![line.to_vec()],
        line: line.to_vec(),
    })
}

/// POP3 and SMTP: a command word, then arguments separated by spaces.
pub fn simple(buf: &[u8]) -> Parsed {
    let Some((end, next)) = line_end(buf, 0) else { return Parsed::Need };
    let line = &buf[..end];
    let mut words = line.split(|b| *b == b' ').filter(|w| !w.is_empty());
    let Some(name) = words.next() else { return Parsed::Invalid { consumed: next, tag: Vec::new() } };
    if !name.iter().all(|b| b.is_ascii_alphabetic()) || name.len() > 16 {
        return Parsed::Invalid { consumed: next, tag: Vec::new() };
    }
    let args: Vec<Vec<u8>> = words.map(|w| w.to_vec()).collect();
    if args.len() > MAX_ARGS {
        return Parsed::Invalid { consumed: next, tag: Vec::new() };
    }
    Parsed::Command(Command {
        consumed: next,
        tag: Vec::new(),
        name: name.to_ascii_uppercase(),
        args,
        line: line.to_vec(),
    })
}

/// IMAP: `tag SP command [SP argument]... CRLF`, an argument an atom, a
/// quoted string (`\\` and `\"` escapes) or a literal `{N}` / `{N+}`
/// followed by a line end and N bytes.
pub fn imap(buf: &[u8]) -> Parsed {
    // The tag.
    let mut i = 0;
    while i < buf.len() && !matches!(buf[i], b' ' | b'\r' | b'\n') {
        i += 1;
    }
    if i == buf.len() {
        return Parsed::Need;
    }
    let tag = buf[..i].to_vec();
    let invalid = |from: usize, tag: Vec<u8>| match line_end(buf, from) {
        Some((_, next)) => Parsed::Invalid { consumed: next, tag },
        None => Parsed::Need,
    };
    if tag.is_empty() || buf[i] != b' ' {
        return invalid(i, tag);
    }
    i += 1;
    // The command.
    let start = i;
    while i < buf.len() && buf[i].is_ascii_alphabetic() {
        i += 1;
    }
    if i == buf.len() {
        return Parsed::Need;
    }
    let name = buf[start..i].to_ascii_uppercase();
    if name.is_empty() || !matches!(buf[i], b' ' | b'\r' | b'\n') {
        return invalid(i, tag);
    }
    let mut args = Vec::new();
    let mut literals = 0;
    loop {
        if i == buf.len() {
            return Parsed::Need;
        }
        match buf[i] {
            b'\r' | b'\n' => {
                let Some((end, next)) = line_end(buf, i) else { return Parsed::Need };
                if end != i {
                    return invalid(i, tag);
                }
                return Parsed::Command(Command { consumed: next, tag, name, args, line: buf[..i].to_vec() });
            }
            b' ' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        if args.len() == MAX_ARGS {
            return invalid(i, tag);
        }
        match buf[i] {
            b'"' => {
                let mut v = Vec::new();
                i += 1;
                loop {
                    if i == buf.len() {
                        return Parsed::Need;
                    }
                    match buf[i] {
                        b'"' => break,
                        b'\r' | b'\n' => return invalid(i, tag),
                        b'\\' => {
                            if i + 1 == buf.len() {
                                return Parsed::Need;
                            }
                            if !matches!(buf[i + 1], b'\\' | b'"') {
                                return invalid(i, tag);
                            }
                            v.push(buf[i + 1]);
                            i += 2;
                        }
                        b => {
                            v.push(b);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if i < buf.len() && !matches!(buf[i], b' ' | b'\r' | b'\n') {
                    return invalid(i, tag);
                }
                args.push(v);
            }
            b'{' => {
                let mut j = i + 1;
                let mut n: usize = 0;
                while j < buf.len() && buf[j].is_ascii_digit() {
                    n = match n.checked_mul(10).and_then(|n| n.checked_add((buf[j] - b'0') as usize)) {
                        Some(n) if n <= 1 << 20 => n,
                        _ => return invalid(j, tag),
                    };
                    j += 1;
                }
                if j == buf.len() {
                    return Parsed::Need;
                }
                if j == i + 1 {
                    return invalid(j, tag);
                }
                let sync = buf[j] != b'+';
                if !sync {
                    j += 1;
                    if j == buf.len() {
                        return Parsed::Need;
                    }
                }
                if buf[j] != b'}' {
                    return invalid(j, tag);
                }
                j += 1;
                let Some((end, next)) = line_end(buf, j) else { return Parsed::Need };
                if end != j {
                    return invalid(j, tag);
                }
                if buf.len() - next < n {
                    return if sync { Parsed::Literal(literals) } else { Parsed::Need };
                }
                if sync {
                    literals += 1;
                }
                args.push(buf[next..next + n].to_vec());
                i = next + n;
            }
            _ => {
                let s = i;
                while i < buf.len() && !matches!(buf[i], b' ' | b'\r' | b'\n') {
                    i += 1;
                }
                args.push(buf[s..i].to_vec());
            }
        }
    }
}

/// nginx's base64 decoding (`ngx_decode_base64`): the standard alphabet,
/// padding optional, anything else refused.
pub fn decode_base64(src: &[u8]) -> Option<Vec<u8>> {
    let mut s = src;
    while let [rest @ .., b'='] = s {
        s = rest;
    }
    if s.len() % 4 == 1 {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (k, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * k);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}

pub fn encode_base64(src: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(src.len().div_ceil(3) * 4);
    for chunk in src.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `AUTH PLAIN`'s message: `authzid NUL login NUL password`, base64.
pub fn sasl_plain(arg: &[u8]) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    let plain = decode_base64(arg).ok_or("client sent invalid base64 encoding in AUTH PLAIN command")?;
    let first = memchr::memchr(0, &plain).ok_or("client sent invalid login in AUTH PLAIN command")?;
    let rest = &plain[first + 1..];
    let second = memchr::memchr(0, rest).ok_or("client sent invalid password in AUTH PLAIN command")?;
    Ok((rest[..second].to_vec(), rest[second + 1..].to_vec()))
}

/// `AUTH CRAM-MD5`'s answer: `login SP 32-hex-digest`, base64.
pub fn sasl_cram_md5(arg: &[u8]) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    let d = decode_base64(arg).ok_or("client sent invalid base64 encoding in AUTH CRAM-MD5 command")?;
    let sp = memchr::memchr(b' ', &d);
    match sp {
        Some(i) if d.len() - i - 1 == 32 => Ok((d[..i].to_vec(), d[i + 1..].to_vec())),
        _ => Err("client sent invalid CRAM-MD5 hash in AUTH CRAM-MD5 command"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(p: Parsed) -> Command {
        match p {
            Parsed::Command(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn imap_forms() {
        let c = cmd(imap(b"a01 LOGIN \"te\\\\\\\"st\" {3+}\r\nabc\r\nrest"));
        assert_eq!(c.tag, b"a01");
        assert_eq!(c.name, b"LOGIN");
        assert_eq!(c.args, vec![b"te\\\"st".to_vec(), b"abc".to_vec()]);
        assert_eq!(c.consumed, 32);
        assert_eq!(imap(b"a01 LOGIN {18}\r\n"), Parsed::Literal(0));
        assert_eq!(imap(b"a01 LOGIN {2}\r\nab {3}\r\n"), Parsed::Literal(1));
        assert_eq!(imap(b"a01 LOG"), Parsed::Need);
        assert_eq!(imap(b"a01 L0GIN x\r\n"), Parsed::Invalid { consumed: 13, tag: b"a01".to_vec() });
        let c = cmd(imap(b"a03 FOOBAR {10+}\r\ntest test \r\na04 NOOP\r\n"));
        assert_eq!(c.consumed, 30);
    }

    #[test]
    fn simple_and_sasl() {
        let c = cmd(simple(b"MAIL FROM:<a@b> SIZE=100\r\nRSET"));
        assert_eq!(c.name, b"MAIL");
        assert_eq!(c.line, b"MAIL FROM:<a@b> SIZE=100");
        assert_eq!(simple(b"HEL"), Parsed::Need);
        assert_eq!(encode_base64(b"Username:"), "VXNlcm5hbWU6");
        assert_eq!(decode_base64(b"VXNlcm5hbWU6").unwrap(), b"Username:");
        assert_eq!(decode_base64(b"YQ").unwrap(), b"a");
        assert!(decode_base64(b"Y").is_none());
        let (l, p) = sasl_plain(encode_base64(b"\0u\0p").as_bytes()).unwrap();
        assert_eq!((l.as_slice(), p.as_slice()), (&b"u"[..], &b"p"[..]));
    }
}
