//! Content negotiation on Accept-Encoding (RFC 9110 §12.5.3): which of the
//! encodings the server can apply the client takes, by its q-values, with
//! the server's preference breaking ties.
//!
//! Pure functions over bytes, total on any input (a fuzz target calls
//! [`negotiate`] directly):
//! - a coding listed with `q=0` is refused, and so is one with a malformed
//!   q-value (as nginx's `ngx_http_gzip_quantity` treats it);
//! - `*` stands for every coding not listed by name;
//! - `x-gzip` is `gzip` (RFC 9110 §8.4.1.3);
//! - an explicitly listed `identity` with a higher q than every acceptable
//!   coding wins: the response stays as it is. `identity;q=0` refuses the
//!   unencoded form, which only means a coding is taken when one is
//!   acceptable (sluice, like nginx, never answers 406);
//! - the first occurrence of a coding counts; names are case-insensitive;
//!   parameters other than `q` are ignored.

/// The content codings sluice produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    Br,
    Zstd,
}

impl Coding {
    pub const ALL: [Coding; 3] = [Coding::Gzip, Coding::Br, Coding::Zstd];

    /// The token in Content-Encoding.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The precompressed sibling's suffix (`*_static`).
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Gzip => ".gz",
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
        }
    }

    /// A coding token, case-insensitively; `x-gzip` is `gzip`.
    pub fn from_name(t: &[u8]) -> Option<Coding> {
        if t.eq_ignore_ascii_case(b"gzip") || t.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if t.eq_ignore_ascii_case(b"br") {
            Some(Coding::Br)
        } else if t.eq_ignore_ascii_case(b"zstd") {
            Some(Coding::Zstd)
        } else {
            None
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What an Accept-Encoding (one or several field lines) says, as q-values
/// in thousandths (0..=1000); None where a coding is not named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    codings: [Option<u16>; 3],
    star: Option<u16>,
    identity: Option<u16>,
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b, rest @ ..] = s
        && is_ows(*b)
    {
        s = rest;
    }
    while let [rest @ .., b] = s
        && is_ows(*b)
    {
        s = rest;
    }
    s
}

/// RFC 9110's qvalue: `0[.ddd]` or `1[.000]`; None when malformed.
pub fn parse_qvalue(v: &[u8]) -> Option<u16> {
    let (first, rest) = v.split_first()?;
    let int = match first {
        b'0' => 0u16,
        b'1' => 1000,
        _ => return None,
    };
    if rest.is_empty() {
        return Some(int);
    }
    let frac = rest.strip_prefix(b".")?;
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| (d - b'0') as u16);
    }
    if int == 1000 && thousandths != 0 {
        return None;
    }
    Some(int + thousandths)
}

impl Accepted {
    /// Parses one field line; call again for each further Accept-Encoding
    /// line (they form one list).
    pub fn add(&mut self, value: &[u8]) {
        for member in value.split(|&b| b == b',') {
            let mut parts = member.split(|&b| b == b';');
            let token = trim(parts.next().unwrap_or(b""));
            if token.is_empty() {
                continue;
            }
            let mut q = 1000u16;
            for p in parts {
                let p = trim(p);
                let Some(eq) = p.iter().position(|&b| b == b'=') else { continue };
                let (name, val) = (trim(&p[..eq]), trim(&p[eq + 1..]));
                if name.eq_ignore_ascii_case(b"q") {
                    // A weight that is not a qvalue refuses the coding.
                    q = parse_qvalue(val).unwrap_or(0);
                }
            }
            let slot = if token == b"*" {
                &mut self.star
            } else if token.eq_ignore_ascii_case(b"identity") {
                &mut self.identity
            } else if let Some(c) = Coding::from_name(token) {
                &mut self.codings[c.index()]
            } else {
                continue;
            };
            if slot.is_none() {
                *slot = Some(q);
            }
        }
    }

    pub fn parse(value: &[u8]) -> Accepted {
        let mut a = Accepted::default();
        a.add(value);
        a
    }

    /// The weight the client gives `c`: its own, else `*`'s, else none.
    pub fn q(&self, c: Coding) -> u16 {
        self.codings[c.index()].or(self.star).unwrap_or(0)
    }

    /// The encodings of `offered` (in the server's order of preference)
    /// that the client takes, best first: by q-value, ties in `offered`'s
    /// order. Empty when none is acceptable or an explicit `identity`
    /// outweighs them all.
    pub fn rank(&self, offered: &[Coding]) -> Vec<Coding> {
        let mut v: Vec<(u16, usize, Coding)> =
            offered.iter().enumerate().map(|(i, &c)| (self.q(c), i, c)).filter(|&(q, _, _)| q > 0).collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if let (Some(id), Some(best)) = (self.identity, v.first())
            && id > best.0
        {
            return Vec::new();
        }
        v.into_iter().map(|(_, _, c)| c).collect()
    }

    /// The single best encoding, as [`Accepted::rank`] orders them.
    pub fn choose(&self, offered: &[Coding]) -> Option<Coding> {
        self.rank(offered).first().copied()
    }
}

/// The encoding to answer an `Accept-Encoding: header` with, among
/// `offered` (the server's order of preference); None: no coding.
pub fn negotiate(header: &[u8], offered: &[Coding]) -> Option<Coding> {
    Accepted::parse(header).choose(offered)
}

#[cfg(test)]
mod tests {
    use super::Coding::*;
    use super::*;

    const ALL: &[Coding] = &[Zstd, Br, Gzip];

    fn n(h: &str) -> Option<Coding> {
        negotiate(h.as_bytes(), ALL)
    }

    #[test]
    fn browsers() {
        assert_eq!(n("gzip, deflate, br, zstd"), Some(Zstd));
        assert_eq!(n("gzip, deflate, br"), Some(Br));
        assert_eq!(n("gzip,deflate"), Some(Gzip));
        assert_eq!(n("deflate"), None);
        assert_eq!(n(""), None);
        assert_eq!(negotiate(b"gzip, br", &[Gzip, Br]), Some(Gzip), "server order breaks ties");
        assert_eq!(negotiate(b"gzip, br", &[Gzip]), Some(Gzip));
        assert_eq!(negotiate(b"br", &[Gzip]), None);
    }

    #[test]
    fn q_values() {
        assert_eq!(n("gzip;q=1, br;q=0.5"), Some(Gzip));
        assert_eq!(n("gzip;q=0.5, br;q=0.8, zstd;q=0.1"), Some(Br));
        assert_eq!(n("gzip; q=0.001"), Some(Gzip));
        assert_eq!(n("gzip;q=0"), None);
        assert_eq!(n("gzip;q=0.000"), None);
        assert_eq!(n("gzip;Q=0, br"), Some(Br));
        assert_eq!(n("gzip ; q = 0.5"), Some(Gzip));
        assert_eq!(n("br;q=0.5, gzip;q=0.50"), Some(Br), "equal weights: server order");
        assert_eq!(n("gzip;level=9"), Some(Gzip), "other parameters ignored");
        // Malformed weights refuse, as nginx's gzip_quantity does.
        for bad in ["gzip;q=2", "gzip;q=1.5", "gzip;q=0.1234", "gzip;q=", "gzip;q=x", "gzip;q=.5", "gzip;q=-1"] {
            assert_eq!(n(bad), None, "{bad}");
        }
        assert_eq!(parse_qvalue(b"1.000"), Some(1000));
        assert_eq!(parse_qvalue(b"0.5"), Some(500));
        assert_eq!(parse_qvalue(b"0.05"), Some(50));
        assert_eq!(parse_qvalue(b"1."), Some(1000));
    }

    #[test]
    fn star_and_identity() {
        assert_eq!(n("*"), Some(Zstd));
        assert_eq!(n("*;q=0"), None);
        assert_eq!(n("gzip;q=0, *"), Some(Zstd));
        assert_eq!(negotiate(b"gzip;q=0, *", &[Gzip]), None, "named refusal beats *");
        assert_eq!(n("br, *;q=0"), Some(Br));
        assert_eq!(n("*;q=0.5, gzip"), Some(Gzip));
        assert_eq!(n("identity;q=0, gzip"), Some(Gzip));
        assert_eq!(n("identity;q=0"), None, "nothing acceptable: unencoded all the same");
        assert_eq!(n("identity"), None);
        assert_eq!(n("gzip;q=0.5, identity"), None, "identity explicitly preferred");
        assert_eq!(n("gzip;q=0.5, identity;q=0.5"), Some(Gzip));
        assert_eq!(n("gzip;q=0.5"), Some(Gzip), "an unlisted identity does not compete");
    }

    #[test]
    fn tokens() {
        assert_eq!(n("GZIP"), Some(Gzip));
        assert_eq!(n("x-gzip"), Some(Gzip));
        assert_eq!(n("Br"), Some(Br));
        assert_eq!(n("ZSTD"), Some(Zstd));
        assert_eq!(n("gzipx, xgzip, brr, zst"), None);
        assert_eq!(n(" ,, gzip ,"), Some(Gzip));
        assert_eq!(n("\tgzip\t"), Some(Gzip));
        assert_eq!(n("gzip;q=0, gzip"), None, "the first occurrence counts");
        let mut a = Accepted::default();
        a.add(b"gzip;q=0.2");
        a.add(b"br;q=0.9");
        assert_eq!(a.rank(ALL), vec![Br, Gzip], "several field lines form one list");
    }

    #[test]
    fn total_on_garbage() {
        for h in [&b";;;"[..], b"q=1", b";q=1", b"\xff\xfe;q=\xff", b"*;q", b"gzip;=", b"gzip;q==1", b",;,;"] {
            let _ = negotiate(h, ALL);
        }
    }
}
