//! What an ACME server sends back (RFC 8555 section 7): the HTTP/1.1
//! response (head, then a body by Content-Length, chunked or to the end),
//! and the JSON documents in it (directory, order, authorization with its
//! challenges, problem). Every byte here comes from the network, so the
//! parsers are bounded, never panic, and are fuzzed (`acme_response`).

use serde_json::Value;

/// The largest response read: a certificate chain is a few KB, a
/// directory or order less; a server sending more is refused.
pub const MAX_RESPONSE: usize = 1 << 20;

/// A response: status, the headers the client uses, and the body.
#[derive(Debug, Default)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub nonce: Option<String>,
    /// `Retry-After` in seconds (a date is turned into the seconds until
    /// it).
    pub retry_after: Option<u64>,
    pub content_type: Option<String>,
    /// `Link: <URL>;rel="alternate"` targets (RFC 8555 section 7.4.2: the
    /// other chains a certificate is offered with).
    pub alternates: Vec<String>,
    pub body: Vec<u8>,
}

/// Parses a whole response read to the end of the connection (the client
/// sends `Connection: close`).
pub fn parse_answer(buf: &[u8]) -> Result<Answer, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("ACME server closed the connection prematurely"),
        Err(_) => return Err("ACME server sent invalid response"),
    };
    let mut a = Answer { status: resp.code.unwrap_or(0), ..Answer::default() };
    let mut length = None;
    let mut chunked = false;
    let text = |v: &[u8]| String::from_utf8_lossy(v).trim().to_string();
    for h in resp.headers.iter() {
        let n = h.name;
        if n.eq_ignore_ascii_case("location") {
            a.location = Some(text(h.value));
        } else if n.eq_ignore_ascii_case("replay-nonce") {
            a.nonce = Some(text(h.value)).filter(|v| valid_nonce(v));
        } else if n.eq_ignore_ascii_case("retry-after") {
            a.retry_after = retry_after(&text(h.value), chrono::Utc::now().timestamp());
        } else if n.eq_ignore_ascii_case("content-type") {
            a.content_type = Some(text(h.value).to_ascii_lowercase());
        } else if n.eq_ignore_ascii_case("content-length") {
            length = Some(text(h.value).parse::<usize>().map_err(|_| "ACME server sent invalid Content-Length")?);
        } else if n.eq_ignore_ascii_case("link") {
            a.alternates.extend(alternate_links(&text(h.value)));
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            chunked = text(h.value).eq_ignore_ascii_case("chunked");
        }
    }
    let rest = &buf[head_len..];
    a.body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n).ok_or("ACME server closed the connection prematurely")?.to_vec()
    } else {
        rest.to_vec()
    };
    Ok(a)
}

/// A `Retry-After` value (RFC 9110 10.2.3): seconds, or an HTTP date
/// (Pebble sends either), as seconds from `now`.
fn retry_after(v: &str, now: i64) -> Option<u64> {
    if let Ok(n) = v.parse() {
        return Some(n);
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?.timestamp();
    Some((at - now).max(0) as u64)
}

/// The targets of a `Link` field's `rel="alternate"` values (a field may
/// carry several, comma-separated; a URL holds no `>`).
fn alternate_links(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = v;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else { break };
        let url = &rest[open + 1..open + close];
        let after = &rest[open + close + 1..];
        let params = after.split('<').next().unwrap_or("");
        let alternate = params.split(';').any(|p| {
            let p = p.trim().trim_end_matches(',').trim();
            p.strip_prefix("rel=").is_some_and(|r| {
                r.trim_matches('"').split_ascii_whitespace().any(|r| r.eq_ignore_ascii_case("alternate"))
            })
        });
        if alternate && !url.is_empty() {
            out.push(url.to_string());
        }
        rest = after;
    }
    out
}

/// A nonce is base64url (RFC 8555 section 6.5.1).
fn valid_nonce(v: &str) -> bool {
    !v.is_empty() && v.len() <= 256 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, &'static str> {
    const BAD: &str = "ACME server sent invalid chunked response";
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").ok_or(BAD)?;
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| BAD)?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let n = usize::from_str_radix(hex, 16).map_err(|_| BAD)?;
        b = &b[eol + 2..];
        if n == 0 {
            return Ok(out);
        }
        if n > MAX_RESPONSE - out.len() {
            return Err(BAD);
        }
        let data = b.get(..n).ok_or(BAD)?;
        out.extend_from_slice(data);
        b = b.get(n..).ok_or(BAD)?;
        b = b.strip_prefix(b"\r\n").ok_or(BAD)?;
    }
}

/// RFC 8555 section 7.1.1.
#[derive(Debug, Clone, PartialEq)]
pub struct Directory {
    pub new_nonce: String,
    pub new_account: String,
    pub new_order: String,
    pub terms_of_service: Option<String>,
    /// The profiles the server offers (meta.profiles' names).
    pub profiles: Vec<String>,
    /// meta.externalAccountRequired.
    pub eab_required: bool,
    /// renewalInfo (RFC 9773), if the server offers renewal information.
    pub renewal_info: Option<String>,
}

/// A renewalInfo answer (RFC 9773 section 4.2): the window, as Unix times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RenewalWindow {
    pub start: i64,
    pub end: i64,
}

/// An RFC 7807 problem document, as the log names it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Problem {
    pub kind: String,
    pub detail: String,
}

impl Problem {
    pub fn is(&self, short: &str) -> bool {
        self.kind.strip_prefix("urn:ietf:params:acme:error:") == Some(short)
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.detail.is_empty() { write!(f, "{}", self.kind) } else { write!(f, "{}: {}", self.kind, self.detail) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    pub status: String,
    pub authorizations: Vec<String>,
    pub finalize: String,
    pub certificate: Option<String>,
    pub error: Option<Problem>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Challenge {
    pub kind: String,
    pub url: String,
    pub token: String,
    pub status: String,
    pub error: Option<Problem>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Authorization {
    pub status: String,
    pub identifier: String,
    pub challenges: Vec<Challenge>,
}

fn json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice::<Value>(body).map_err(|e| format!("invalid JSON from ACME server ({e})"))
}

fn string(v: &Value, key: &str) -> Result<String, String> {
    v.get(key).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("no \"{key}\" in ACME response"))
}

fn opt_string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn problem_of(v: &Value) -> Option<Problem> {
    let o = v.as_object()?;
    Some(Problem {
        kind: o.get("type").and_then(Value::as_str).unwrap_or("about:blank").to_string(),
        detail: o.get("detail").and_then(Value::as_str).unwrap_or("").to_string(),
    })
}

pub fn directory(body: &[u8]) -> Result<Directory, String> {
    let v = json(body)?;
    Ok(Directory {
        new_nonce: string(&v, "newNonce")?,
        new_account: string(&v, "newAccount")?,
        new_order: string(&v, "newOrder")?,
        terms_of_service: v.get("meta").and_then(|m| opt_string(m, "termsOfService")),
        profiles: v
            .get("meta")
            .and_then(|m| m.get("profiles"))
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default(),
        eab_required: v
            .get("meta")
            .and_then(|m| m.get("externalAccountRequired"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        renewal_info: opt_string(&v, "renewalInfo"),
    })
}

/// A renewalInfo document: `suggestedWindow` with RFC 3339 `start` and
/// `end`; a window that ends before it starts is invalid (section 4.2).
pub fn renewal_window(body: &[u8]) -> Result<RenewalWindow, String> {
    let v = json(body)?;
    let w = v.get("suggestedWindow").ok_or("no \"suggestedWindow\" in ACME renewal information")?;
    let time = |key: &str| -> Result<i64, String> {
        let t = string(w, key)?;
        chrono::DateTime::parse_from_rfc3339(&t)
            .map(|d| d.timestamp())
            .map_err(|_| format!("invalid \"{key}\" in ACME renewal information"))
    };
    let (start, end) = (time("start")?, time("end")?);
    if end < start {
        return Err("invalid window in ACME renewal information".into());
    }
    Ok(RenewalWindow { start, end })
}

/// A problem document (any body that is not one yields a generic one).
pub fn problem(status: u16, body: &[u8]) -> Problem {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| problem_of(&v))
        .unwrap_or_else(|| Problem { kind: format!("HTTP {status}"), detail: String::new() })
}

pub fn order(body: &[u8]) -> Result<Order, String> {
    let v = json(body)?;
    let authorizations = v
        .get("authorizations")
        .and_then(Value::as_array)
        .ok_or("no \"authorizations\" in ACME order")?
        .iter()
        .map(|a| a.as_str().map(str::to_string).ok_or("invalid \"authorizations\" in ACME order"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Order {
        status: string(&v, "status")?,
        authorizations,
        finalize: string(&v, "finalize")?,
        certificate: opt_string(&v, "certificate"),
        error: v.get("error").and_then(problem_of),
    })
}

pub fn authorization(body: &[u8]) -> Result<Authorization, String> {
    let v = json(body)?;
    let identifier =
        v.get("identifier").map(|i| string(i, "value")).ok_or("no \"identifier\" in ACME authorization")??;
    let mut challenges = Vec::new();
    for c in v.get("challenges").and_then(Value::as_array).ok_or("no \"challenges\" in ACME authorization")? {
        challenges.push(Challenge {
            kind: string(c, "type")?,
            url: string(c, "url")?,
            token: opt_string(c, "token").unwrap_or_default(),
            status: opt_string(c, "status").unwrap_or_default(),
            error: c.get("error").and_then(problem_of),
        });
    }
    Ok(Authorization { status: string(&v, "status")?, identifier, challenges })
}

/// A token is base64url (RFC 8555 section 8.1), so it is safe in a path
/// and in the key authorization.
pub fn valid_token(t: &str) -> bool {
    valid_nonce(t) && t.len() >= 16
}

/// Every parser over one input, for the fuzz target: none may panic, and
/// what they accept holds their invariants.
pub fn fuzz(data: &[u8]) {
    if let Ok(a) = parse_answer(data) {
        assert!(a.body.len() <= data.len());
        if let Some(n) = &a.nonce {
            assert!(valid_nonce(n));
        }
    }
    let _ = directory(data);
    let _ = order(data);
    if let Ok(w) = renewal_window(data) {
        assert!(w.start <= w.end);
    }
    for u in alternate_links(&String::from_utf8_lossy(data)) {
        assert!(!u.is_empty() && !u.contains('>'));
    }
    if let Ok(a) = authorization(data) {
        for c in &a.challenges {
            let _ = valid_token(&c.token);
        }
    }
    let p = problem(400, data);
    let _ = p.is("badNonce");
    let _ = p.to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_with_chunked_body() {
        let r = b"HTTP/1.1 201 Created\r\nReplay-Nonce: abc_-1\r\nLocation: https://x/acct/1\r\n\
                  Transfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n2\r\n\":\r\n2\r\n1}\r\n0\r\n\r\n";
        let a = parse_answer(r).unwrap();
        assert_eq!(a.status, 201);
        assert_eq!(a.nonce.as_deref(), Some("abc_-1"));
        assert_eq!(a.location.as_deref(), Some("https://x/acct/1"));
        assert_eq!(a.body, b"{\"a\":1}");
    }

    #[test]
    fn answer_truncated_is_an_error() {
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").is_err());
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Le").is_err());
    }

    #[test]
    fn documents() {
        let d =
            directory(br#"{"newNonce":"n","newAccount":"a","newOrder":"o","meta":{"termsOfService":"t"}}"#).unwrap();
        assert_eq!(d.terms_of_service.as_deref(), Some("t"));
        let o = order(br#"{"status":"pending","authorizations":["z"],"finalize":"f"}"#).unwrap();
        assert_eq!(o.authorizations, vec!["z".to_string()]);
        assert!(order(br#"{"status":"pending","authorizations":[1],"finalize":"f"}"#).is_err());
        let p = problem(400, br#"{"type":"urn:ietf:params:acme:error:badNonce","detail":"stale"}"#);
        assert!(p.is("badNonce"));
        assert_eq!(problem(500, b"<html>").kind, "HTTP 500");
    }

    #[test]
    fn alternate_chains_and_renewal_windows() {
        let r = b"HTTP/1.1 200 OK\r\nLink: <https://ca/dir>;rel=\"index\"\r\n\
                  Link: <https://ca/cert/1/1>;rel=\"alternate\", <https://ca/cert/1/2> ; rel=alternate\r\n\
                  Content-Length: 0\r\n\r\n";
        let a = parse_answer(r).unwrap();
        assert_eq!(a.alternates, vec!["https://ca/cert/1/1".to_string(), "https://ca/cert/1/2".to_string()]);
        let w = renewal_window(
            br#"{"suggestedWindow":{"start":"2026-11-30T10:00:00Z","end":"2026-11-30T11:00:00+01:00"}}"#,
        )
        .unwrap();
        assert_eq!(w.end - w.start, 0);
        assert_eq!(w.start, 1_796_032_800);
        assert!(
            renewal_window(br#"{"suggestedWindow":{"start":"2026-11-30T10:00:00Z","end":"2026-11-29T10:00:00Z"}}"#)
                .is_err()
        );
        assert!(renewal_window(br#"{"suggestedWindow":{"start":"yesterday","end":"2026-11-29T10:00:00Z"}}"#).is_err());
        assert_eq!(retry_after("7", 0), Some(7));
        assert_eq!(retry_after("Mon, 30 Nov 2026 10:00:05 GMT", 1_796_032_800), Some(5));
        assert_eq!(retry_after("Mon, 30 Nov 2026 09:00:00 GMT", 1_796_032_800), Some(0));
        assert_eq!(retry_after("soon", 0), None);
        let d =
            directory(br#"{"newNonce":"n","newAccount":"a","newOrder":"o","renewalInfo":"https://ca/ari"}"#).unwrap();
        assert_eq!(d.renewal_info.as_deref(), Some("https://ca/ari"));
    }
}
