//! The application's answer: STDOUT starts with CGI header lines (RFC 3875
//! 6.3: `Status:`, `Location:`, `Content-Type:` and the rest, passed on as
//! response headers) and goes on with the body; STDERR lines go to the
//! error log as nginx writes them; END_REQUEST ends the response.
//! [`Reader`] reads the head for the upstream core, [`Body`] frames the
//! rest for `crate::http::proxy::body::UpstreamBody`.

use std::borrow::Cow;
use std::sync::Arc;

use super::record::{self, Decoder, Event};
use crate::config::proxy::UpstreamConf;
use crate::http::fastcgi::conf::FastcgiConf;
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::body::BodyError;
use crate::http::proxy::response_head::{Framing, HeadError, ResponseHead};
use crate::log::error::{ErrorLog, Level};
use crate::log_to;

/// Where STDERR goes: the request's error log, with nginx's context.
#[derive(Debug)]
pub struct Stderr {
    log: Arc<ErrorLog>,
    conn: u64,
    /// `client: ..., upstream: ..., host: ...`.
    suffix: String,
    /// `fastcgi_catch_stderr`.
    catch: Vec<Vec<u8>>,
}

impl Stderr {
    /// Logs one STDERR record (nginx: `[error]`, trailing CR, LF, dots and
    /// spaces cut); true when it holds a `fastcgi_catch_stderr` string.
    fn write(&self, data: &[u8], phase: &str) -> bool {
        let text = record::stderr_text(data);
        log_to!(
            self.log,
            Level::Error,
            "*{} FastCGI sent in stderr: \"{}\" while {}, {}",
            self.conn,
            String::from_utf8_lossy(text),
            phase,
            self.suffix
        );
        self.catch.iter().any(|c| !c.is_empty() && memchr::memmem::find(data, c).is_some())
    }
}

/// Reads records until STDOUT holds the whole CGI head.
pub struct Reader {
    dec: Decoder,
    stdout: Vec<u8>,
    /// How much STDOUT there was when the empty STDOUT record that closes
    /// the stream came (the first one): a head that ends past it was cut
    /// off, however the records were split into reads.
    closed_at: Option<usize>,
    stderr: Stderr,
    head_request: bool,
    keep_conn: bool,
    ignore: crate::http::cache::conf::Ignore,
}

impl Reader {
    /// `suffix` is the error log's context for this peer.
    pub fn new(ctx: &ReqCtx<'_, '_>, suffix: String, head_request: bool, keep_conn: bool) -> Reader {
        Reader::detached(ctx.conf.error_log.clone(), ctx.conn.id, &ctx.conf.fastcgi, suffix, head_request, keep_conn)
    }

    /// A reader from its parts rather than a request's context: what
    /// [`Reader::new`] builds, and what the fuzzing target
    /// (`crate::fuzzing::fastcgi`) uses, having no request.
    pub fn detached(
        log: Arc<ErrorLog>,
        conn: u64,
        conf: &FastcgiConf,
        suffix: String,
        head_request: bool,
        keep_conn: bool,
    ) -> Reader {
        Reader {
            dec: Decoder::default(),
            stdout: Vec::new(),
            closed_at: None,
            stderr: Stderr { log, conn, suffix, catch: conf.catch_stderr.clone() },
            head_request,
            keep_conn,
            ignore: conf.up.cache.ignore,
        }
    }

    /// Takes the records in `buf` (what it uses is drained); Ok(None) while
    /// more are needed. `conf.buffer_size` bounds the head.
    pub fn parse(&mut self, buf: &mut Vec<u8>, conf: &UpstreamConf) -> Result<Option<ResponseHead>, HeadError> {
        let mut used = 0;
        let r = self.parse_from(buf, &mut used, conf);
        buf.drain(..used);
        r
    }

    /// [`Reader::parse`] on `buf[*used..]`, counting what it uses. Records
    /// are read up to the one whose STDOUT ends the head, no further: what
    /// follows (the body, a STDERR line, a broken record) belongs to the
    /// body, as in nginx, and so is judged the same whether it came in the
    /// head's read or a later one.
    fn parse_from(
        &mut self,
        buf: &[u8],
        used: &mut usize,
        conf: &UpstreamConf,
    ) -> Result<Option<ResponseHead>, HeadError> {
        loop {
            let (mut caught, mut ended) = (false, false);
            let (stdout, stderr, closed_at) = (&mut self.stdout, &self.stderr, &mut self.closed_at);
            let n = self
                .dec
                .feed(&buf[*used..], &mut |e| {
                    match e {
                        Event::Stdout([]) => {
                            if closed_at.is_none() {
                                *closed_at = Some(stdout.len());
                            }
                        }
                        Event::Stdout(b) => {
                            let from = stdout.len().saturating_sub(2);
                            stdout.extend_from_slice(b);
                            // Stop where the head may have ended.
                            return !may_end_head(stdout, from);
                        }
                        Event::Stderr(b) => caught |= stderr.write(b, "reading response header from upstream"),
                        Event::End => ended = true,
                    }
                    true
                })
                .map_err(|e| HeadError::Protocol(e.to_string()))?;
            *used += n;
            let more = *used < buf.len() && !self.dec.is_done();
            if caught {
                // Logged with the stderr line; nginx adds nothing.
                return Err(HeadError::Protocol(String::new()));
            }
            let limit = conf.buffer_size.max(1024);
            let closed_before = |len: usize| self.closed_at.is_some_and(|at| at < len);
            let found = self.head(conf)?;
            // The head must fit in `fastcgi_buffer_size`, as in nginx, also
            // when it came whole in one read: otherwise whether a head just
            // over the limit passes would depend on how it was split into
            // reads (one that stopped at the limit refuses it, below).
            if found.as_ref().is_some_and(|(len, _)| *len > limit) {
                return Err(HeadError::Invalid("upstream sent too big header"));
            }
            // An empty STDOUT record before the head's end closed the
            // stream, whether later STDOUT came in the same read or not.
            let found = found.filter(|(len, _)| !closed_before(*len));
            let Some((head_len, mut head)) = found else {
                // nginx's words for the stream ending before the head did:
                // an empty STDOUT, or END_REQUEST (a record it did not
                // expect).
                if self.closed_at.is_some() {
                    return Err(HeadError::Invalid("upstream prematurely closed FastCGI stdout"));
                }
                if ended {
                    return Err(HeadError::Invalid("upstream sent unexpected FastCGI record: 3"));
                }
                if self.stdout.len() >= limit {
                    return Err(HeadError::Invalid("upstream sent too big header"));
                }
                if more {
                    continue;
                }
                return Ok(None);
            };
            if self.head_request || matches!(head.status, 204 | 304) || head.status < 200 {
                // Answered at once, as nginx does, rather than after the
                // application has produced a body nobody reads; what
                // follows the head is not read, so the connection is not
                // reused (nginx's "new connection after HEAD").
                self.stdout.clear();
                return Ok(Some(self.finish_bodiless(head)));
            }
            let pending = self.stdout.split_off(head_len);
            let declared = head.framing_len();
            head.keep_alive = self.keep_conn;
            head.framing = Framing::FastCgi(Box::new(Body {
                dec: std::mem::take(&mut self.dec),
                pending,
                stderr: Stderr {
                    log: self.stderr.log.clone(),
                    conn: self.stderr.conn,
                    suffix: std::mem::take(&mut self.stderr.suffix),
                    catch: std::mem::take(&mut self.stderr.catch),
                },
                declared,
                passed: 0,
                ended,
                warned: false,
            }));
            return Ok(Some(head));
        }
    }

    fn finish_bodiless(&mut self, mut h: ResponseHead) -> ResponseHead {
        let declared = if self.head_request { h.framing_len() } else { None };
        h.framing = Framing::None(declared);
        h.keep_alive = false;
        h
    }

    /// The CGI head, once STDOUT holds all of it: its length and meaning.
    fn head(&self, conf: &UpstreamConf) -> Result<Option<(usize, ResponseHead)>, HeadError> {
        cgi_head(&self.stdout, conf, self.ignore)
    }
}

/// A CGI head at the start of `buf` (uwsgi's answer without a status
/// line): its length and meaning, None while it has not ended.
pub fn parse_cgi_head(buf: &[u8], conf: &UpstreamConf) -> Result<Option<(usize, ResponseHead)>, HeadError> {
    cgi_head(buf, conf, conf.cache.ignore)
}

fn cgi_head(
    buf: &[u8],
    conf: &UpstreamConf,
    ignore: crate::http::cache::conf::Ignore,
) -> Result<Option<(usize, ResponseHead)>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut many;
    let mut parsed = httparse::parse_headers(buf, &mut slots);
    if matches!(parsed, Err(httparse::Error::TooManyHeaders)) {
        many = vec![httparse::EMPTY_HEADER; buf.len() / 4 + 1];
        parsed = httparse::parse_headers(buf, &mut many);
    }
    let (len, fields) = match parsed {
        Ok(httparse::Status::Complete((len, fields))) => (len, fields),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HeadError::Invalid("upstream sent invalid header")),
    };
    interpret(fields, conf, ignore).map(|h| Some((len, h)))
}

/// Whether STDOUT, grown from `from` bytes (less two, for a line end
/// that spans pieces), may now hold a whole CGI head: it starts with an
/// empty line or holds one. Cheaper than parsing the head at every piece;
/// where it says yes, the head is parsed.
fn may_end_head(stdout: &[u8], from: usize) -> bool {
    let tail = &stdout[from.min(stdout.len())..];
    stdout.starts_with(b"\n")
        || stdout.starts_with(b"\r\n")
        || memchr::memmem::find(tail, b"\n\n").is_some()
        || memchr::memmem::find(tail, b"\n\r\n").is_some()
}

/// Fields nginx's FastCGI module does not pass on (its hide list, and
/// those the core replaces: framing, connection, date, server).
const NOT_PASSED: &[&str] = &[
    "status",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "date",
    "server",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// The CGI head's meaning: the status from `Status:` (else 302 with a
/// `Location:`, else 200), as nginx's ngx_http_fastcgi_process_header.
fn interpret(
    fields: &[httparse::Header<'_>],
    conf: &UpstreamConf,
    ignore: crate::http::cache::conf::Ignore,
) -> Result<ResponseHead, HeadError> {
    let mut status = None;
    let mut location = false;
    let mut length = None;
    let mut content_type = None;
    let mut accel_buffering = None;
    let mut accel_expires = None;
    let mut accel_limit_rate = None;
    let mut accel_redirect = None;
    let mut accel_charset = None;
    let mut headers = Vec::with_capacity(fields.len());
    for f in fields {
        let name = f.name;
        let v = f.value;
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if is("status") {
            let digits = v.get(..3).filter(|d| d.iter().all(u8::is_ascii_digit));
            let code = digits.map(|d| d.iter().fold(0u16, |n, b| n * 10 + (b - b'0') as u16));
            match code {
                Some(c) if (100..=999).contains(&c) => status = Some(c),
                _ => {
                    return Err(HeadError::Protocol(format!(
                        "upstream sent invalid status \"{}\"",
                        String::from_utf8_lossy(v)
                    )));
                }
            }
        } else if is("location") {
            location = true;
        } else if is("content-length") {
            let n = std::str::from_utf8(v).ok().filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
            match n.and_then(|t| t.parse::<u64>().ok()) {
                Some(n) => length = Some(n),
                None => return Err(HeadError::Invalid("upstream sent invalid \"Content-Length\" header")),
            }
        } else if is("content-type") {
            content_type = Some(Cow::Owned(String::from_utf8_lossy(v).into_owned()));
        } else if is("x-accel-buffering") && !ignore.x_accel_buffering {
            if v.eq_ignore_ascii_case(b"yes") {
                accel_buffering = Some(true);
            } else if v.eq_ignore_ascii_case(b"no") {
                accel_buffering = Some(false);
            }
        } else if is("x-accel-expires") && !ignore.x_accel_expires {
            // nginx acts on the first one; a duplicate is ignored.
            if accel_expires.is_none() {
                accel_expires = Some(v.to_vec());
            }
        } else if is("x-accel-redirect") {
            accel_redirect = Some(v.to_vec());
        } else if is("x-accel-charset") {
            accel_charset = Some(v.to_vec());
        } else if is("x-accel-limit-rate") {
            accel_limit_rate = crate::http::proxy::response_head::limit_rate(v).or(accel_limit_rate);
        }
        let listed = |list: &[String]| list.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name.as_bytes()));
        let default_hidden = NOT_PASSED.iter().any(|n| is(n)) && !is("content-type");
        let hidden = is("content-type")
            || default_hidden && !listed(&conf.pass_headers)
            || listed(&conf.hide_headers)
            || is("status") && listed(&conf.pass_headers);
        if !hidden {
            headers.push((Cow::Owned(name.to_string()), FieldValue::copy_from(v)));
        }
    }
    let status = status.unwrap_or(if location { 302 } else { 200 });
    Ok(ResponseHead {
        status,
        headers,
        content_type,
        // The declared length until the body's framing is set.
        framing: match length {
            Some(n) => Framing::Length(n),
            None => Framing::None(None),
        },
        keep_alive: false,
        head_len: 0,
        accel_buffering,
        accel_expires,
        accel_limit_rate,
        accel_redirect,
        accel_charset,
    })
}

impl ResponseHead {
    /// The length a head declared (set by [`interpret`] as its framing).
    fn framing_len(&self) -> Option<u64> {
        match self.framing {
            Framing::Length(n) => Some(n),
            _ => None,
        }
    }
}

/// The body: the rest of STDOUT, until END_REQUEST.
#[derive(Debug)]
pub struct Body {
    dec: Decoder,
    /// STDOUT read with the head, after it.
    pending: Vec<u8>,
    stderr: Stderr,
    /// The script's Content-Length: the client is told it, and gets no
    /// more than it.
    declared: Option<u64>,
    passed: u64,
    ended: bool,
    warned: bool,
}

impl Body {
    pub fn declared_len(&self) -> Option<u64> {
        self.declared
    }

    /// END_REQUEST was read and everything before it passed on.
    pub fn is_done(&self) -> bool {
        self.ended && self.pending.is_empty()
    }

    /// Passes on what `input` (raw records) and the head's leftover hold;
    /// returns how much of `input` was used.
    pub fn decode(&mut self, input: &[u8], sink: &mut dyn FnMut(&[u8])) -> Result<usize, BodyError> {
        if !self.pending.is_empty() {
            let p = std::mem::take(&mut self.pending);
            self.pass(&p, sink);
        }
        if self.ended {
            // END_REQUEST came with the head: the body is what came with
            // it, and a short one is as truncated as when END_REQUEST
            // comes in a later read (else the client, told the script's
            // Content-Length, would wait for bytes that never come while
            // the connection goes on to its next response).
            return if self.short() { Err(BodyError::Truncated) } else { Ok(0) };
        }
        let mut caught = false;
        let mut ended = false;
        let mut out: Vec<&[u8]> = Vec::new();
        let stderr = &self.stderr;
        let fed = self.dec.feed(input, &mut |e| {
            match e {
                // Borrowed from `input`: collected, then passed on.
                Event::Stdout(b) => out.push(b),
                Event::Stderr(b) => caught |= stderr.write(b, "reading upstream"),
                Event::End => ended = true,
            }
            true
        });
        // STDOUT before a broken record goes out too: the client gets the
        // same (truncated) body whether the broken record came in the same
        // read or a later one.
        for piece in out {
            self.pass(piece, sink);
        }
        let used = fed.map_err(|e| BodyError::Protocol(e.to_string()))?;
        if caught {
            return Err(BodyError::Protocol(String::new()));
        }
        if ended {
            self.ended = true;
            if self.short() {
                return Err(BodyError::Truncated);
            }
        }
        Ok(used)
    }

    /// Less STDOUT passed on than the script's Content-Length.
    fn short(&self) -> bool {
        self.declared.is_some_and(|d| self.passed < d)
    }

    /// Passes on `data`, up to the declared length.
    fn pass(&mut self, data: &[u8], sink: &mut dyn FnMut(&[u8])) {
        let room = self.declared.map_or(u64::MAX, |d| d - self.passed.min(d));
        let n = (data.len() as u64).min(room) as usize;
        if n > 0 {
            sink(&data[..n]);
            self.passed += n as u64;
        }
        if n < data.len() && !self.warned {
            self.warned = true;
            log_to!(
                self.stderr.log,
                Level::Warn,
                "*{} upstream sent more data than specified in \"Content-Length\" header while reading upstream, {}",
                self.stderr.conn,
                self.stderr.suffix
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &[u8]) -> Result<ResponseHead, HeadError> {
        let mut slots = [httparse::EMPTY_HEADER; 16];
        let Ok(httparse::Status::Complete((_, fields))) = httparse::parse_headers(text, &mut slots) else {
            panic!("not a complete head: {:?}", String::from_utf8_lossy(text));
        };
        interpret(fields, &UpstreamConf::default(), crate::http::cache::conf::Ignore::default())
    }

    fn names(h: &ResponseHead) -> Vec<String> {
        h.headers.iter().map(|(n, v)| format!("{}: {}", n, String::from_utf8_lossy(v))).collect()
    }

    #[test]
    fn status_location_and_fields() {
        let h = head(b"Status: 404 Not Found\r\nContent-Type: text/html\r\nX-A: 1\r\n\r\n").expect("valid");
        assert_eq!(h.status, 404);
        assert_eq!(h.content_type.as_deref(), Some("text/html"));
        assert_eq!(names(&h), ["X-A: 1"]);
        let h = head(b"Location: /x\r\n\r\n").expect("valid");
        assert_eq!((h.status, names(&h)), (302, vec!["Location: /x".to_string()]));
        let h = head(b"Location: http://a/\r\nStatus: 301\r\n\r\n").expect("valid");
        assert_eq!(h.status, 301);
        let h = head(b"Set-Cookie: a=1\nSet-Cookie: b=2\nX-Accel-Buffering: no\nServer: php\n\n").expect("valid");
        assert_eq!((h.status, names(&h)), (200, vec!["Set-Cookie: a=1".to_string(), "Set-Cookie: b=2".into()]));
        assert_eq!(h.accel_buffering, Some(false));
        let h = head(b"Content-Length: 12\r\n\r\n").expect("valid");
        assert_eq!(h.framing_len(), Some(12));
    }

    #[test]
    fn refuses_bad_status_and_length() {
        for bad in
            [&b"Status: abc\r\n\r\n"[..], b"Status: 99\r\n\r\n", b"Status: \r\n\r\n", b"Content-Length: -1\r\n\r\n"]
        {
            assert!(head(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // nginx reads the first three bytes (ngx_atoi(data, 3)).
        assert_eq!(head(b"Status: 2000\r\n\r\n").expect("valid").status, 200);
    }
}
