//! nginx's userid module (ngx_http_userid_filter_module): a cookie that
//! identifies the client. `userid on` (or `v1`) gives a client that did
//! not send one a `Set-Cookie` with a new identifier; `userid log` only
//! reads it (`$uid_got`). The identifier is 16 bytes, sent as base64: four
//! 32-bit words, the service (by default the server's IPv4 address, the
//! last four bytes of an IPv6 one, 0 on a unix socket), the time, a value
//! drawn when the worker starts (microseconds and pid) and a per-worker
//! sequence. `on` writes the words in network byte order, `v1` in the
//! host's (nginx's two cookie versions); `$uid_got` and `$uid_set` print
//! them as nginx does, `NAME=` and four words of eight hex digits read in
//! the host's order.
//!
//! The header filter ([`apply`], after `add_header` as in nginx's filter
//! order) runs for the client's request only. `$uid_reset` (a `map` or
//! `set` may define it; empty otherwise) set to anything but empty or `0`
//! replaces the cookie the client sent, and `log` also logs the old one.
//! The cookie is read by [`cookie`], the fuzzed part.

pub mod cookie;

use std::sync::atomic::{AtomicU32, Ordering};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::set_main::arg;
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("userid", HSL, 1, 1, Set::Loc(userid)),
    cmd("userid_service", HSL, 1, 1, Set::Loc(userid_service)),
    cmd("userid_name", HSL, 1, 1, Set::Loc(userid_name)),
    cmd("userid_domain", HSL, 1, 1, Set::Loc(userid_domain)),
    cmd("userid_path", HSL, 1, 1, Set::Loc(userid_path)),
    cmd("userid_expires", HSL, 1, 1, Set::Loc(userid_expires)),
    cmd("userid_p3p", HSL, 1, 1, Set::Loc(userid_p3p)),
    cmd("userid_mark", HSL, 1, 1, Set::Loc(userid_mark)),
    cmd("userid_flags", HSL, 1, 4, Set::Loc(userid_flags)),
];

/// `userid off|log|v1|on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Off,
    Log,
    V1,
    On,
}

/// nginx's "max" expiry: 31 Dec 2037 23:55:55 GMT.
const MAX_EXPIRES: i64 = 2_145_916_555;

/// The location's userid settings (inherited whole, as nginx merges them).
#[derive(Clone, Debug)]
pub struct UseridConf {
    pub mode: Mode,
    /// `userid_service`: the first word; None: the server's address.
    pub service: Option<u32>,
    pub name: String,
    /// `; domain=X`, or empty (`none`, the default).
    pub domain: String,
    /// `; path=X` (`; path=/` by default).
    pub path: String,
    /// Seconds from now; 0: a session cookie; [`MAX_EXPIRES`]: `max`.
    pub expires: i64,
    /// `P3P` header value, or empty.
    pub p3p: String,
    /// `userid_mark`: 0 for `off`.
    pub mark: u8,
    /// `userid_flags`: the attributes written after the path.
    pub flags: Flags,
    /// `$uid_reset` as the configuration defines it (a `map`, a `set`
    /// variable, else empty), compiled where `userid` is set.
    pub reset: Option<std::sync::Arc<Template>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub secure: bool,
    pub httponly: bool,
    /// "strict", "lax" or "none".
    pub samesite: Option<&'static str>,
}

impl Default for UseridConf {
    fn default() -> Self {
        UseridConf {
            mode: Mode::Off,
            service: None,
            name: "uid".into(),
            domain: String::new(),
            path: "; path=/".into(),
            expires: 0,
            p3p: String::new(),
            mark: 0,
            flags: Flags::default(),
            reset: None,
        }
    }
}

fn userid(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.mode = match arg(d, 0) {
        "off" => Mode::Off,
        "log" => Mode::Log,
        "v1" => Mode::V1,
        "on" => Mode::On,
        v => {
            return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span));
        }
    };
    // Maps and `set` variables are known before any server is built.
    c.userid.reset = Template::compile("$uid_reset").ok().map(std::sync::Arc::new);
    Ok(())
}

fn userid_service(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = crate::config::value::parse_number(arg(d, 0))
        .ok_or_else(|| ConfError::at("\"userid_service\" directive invalid number", &d.span))?;
    // nginx keeps an integer and stores it in a 32-bit word.
    c.userid.service = Some(n as u32);
    Ok(())
}

fn userid_name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.name = arg(d, 0).to_string();
    Ok(())
}

fn userid_domain(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.domain = match arg(d, 0) {
        "none" => String::new(),
        v => format!("; domain={v}"),
    };
    Ok(())
}

fn userid_path(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.path = format!("; path={}", arg(d, 0));
    Ok(())
}

fn userid_expires(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.expires = match arg(d, 0) {
        "max" => MAX_EXPIRES,
        "off" => 0,
        v => crate::config::value::parse_time(v)
            .map(|t| t.as_secs() as i64)
            .ok_or_else(|| ConfError::at("\"userid_expires\" directive invalid value", &d.span))?,
    };
    Ok(())
}

fn userid_p3p(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.userid.p3p = match arg(d, 0) {
        "none" => String::new(),
        v => v.to_string(),
    };
    Ok(())
}

fn userid_mark(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.userid.mark = match v.as_bytes() {
        b"off" => 0,
        [m] if m.is_ascii_alphanumeric() || *m == b'=' => *m,
        _ => {
            return Err(ConfError::at(
                "\"userid_mark\" directive value must be \"off\" or a single letter, digit or \"=\"",
                &d.span,
            ));
        }
    };
    Ok(())
}

fn userid_flags(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut f = Flags::default();
    for w in &d.args {
        match w.text.as_str() {
            "off" => f = Flags::default(),
            "secure" => f.secure = true,
            "httponly" => f.httponly = true,
            "samesite=strict" => f.samesite = Some("strict"),
            "samesite=lax" => f.samesite = Some("lax"),
            "samesite=none" => f.samesite = Some("none"),
            v => return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span)),
        }
    }
    c.userid.flags = f;
    Ok(())
}

/// The request's identifiers: what the client sent and what is set.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// The cookie's identifier; all zero when none was read.
    pub got: [u8; 16],
    /// The cookie's value as sent (for the mark and to send it back).
    pub value: Vec<u8>,
    /// The identifier to set; all zero until made.
    pub set: [u8; 16],
    /// `$uid_reset` replaced the client's identifier.
    pub reset: bool,
}

/// nginx tests the last word for "there is one".
fn present(uid: &[u8; 16]) -> bool {
    uid[12..] != [0, 0, 0, 0]
}

/// The request's state, reading the cookie on first use (and logging a
/// bad one once, as nginx's per-request context does).
fn state<'s>(ctx: &'s ReqCtx<'_, '_>) -> std::cell::RefMut<'s, State> {
    let mut slot = ctx.userid.borrow_mut();
    if slot.is_none() {
        let headers: Vec<&[u8]> =
            ctx.req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie")).map(|(_, v)| v).collect();
        let mut s = State::default();
        match cookie::read(&headers, ctx.conf.userid.name.as_bytes()) {
            cookie::Found::None => {}
            cookie::Found::TooShort { header } => log_req!(
                ctx,
                Level::Error,
                "client sent too short userid cookie \"{}\"",
                String::from_utf8_lossy(header)
            ),
            cookie::Found::Invalid { header } => {
                log_req!(ctx, Level::Error, "client sent invalid userid cookie \"{}\"", String::from_utf8_lossy(header))
            }
            cookie::Found::Got { uid, value } => {
                s.got = uid;
                s.value = value.to_vec();
            }
        }
        *slot = Some(s);
    }
    std::cell::RefMut::map(slot, |s| s.get_or_insert_with(State::default))
}

/// The worker's start value: the most significant part of the
/// microseconds that fits 16 bits, and the pid.
fn start_value() -> u32 {
    static START: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        let usec =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_micros();
        ((usec / 20) << 16) | std::process::id()
    })
}

static SEQ_V1: AtomicU32 = AtomicU32::new(1);
static SEQ_V2: AtomicU32 = AtomicU32::new(0x0303_0302);

/// nginx's `ngx_http_userid_create_uid`: the identifier to set, unless
/// the client's stands (then `set` stays zero, or is the client's when
/// only its mark differs).
fn create(ctx: &ReqCtx<'_, '_>, s: &mut State) {
    let conf = &ctx.conf.userid;
    if present(&s.set) {
        return;
    }
    if present(&s.got) {
        let reset = conf.reset.as_ref().map(|t| t.render_to_vec(&crate::http::handler::ctx::Vars::request(ctx)));
        let reset = reset.unwrap_or_default();
        if reset.is_empty() || reset == b"0" {
            let marked = s.value.len() > 23 && s.value[22] == conf.mark && s.value[23] == b'=';
            if conf.mark != 0 && !marked {
                s.set = s.got;
            }
            return;
        }
        s.reset = true;
        if reset == b"log" {
            let mut words = Vec::with_capacity(32);
            cookie::hex_words(&s.got, &mut words);
            log_req!(
                ctx,
                Level::Notice,
                "userid cookie \"{}={}\" was reset",
                conf.name,
                String::from_utf8_lossy(&words)
            );
        }
    }
    let now = (crate::clock::unix_ms() / 1000) as u32;
    if conf.mode == Mode::V1 {
        let seq = SEQ_V1.fetch_add(0x100, Ordering::Relaxed);
        for (i, w) in [conf.service.unwrap_or(0), now, start_value(), seq].into_iter().enumerate() {
            s.set[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        return;
    }
    let first = match conf.service {
        Some(n) => n.to_be_bytes(),
        None if ctx.conn.unix.is_some() => [0; 4],
        None => match ctx.conn.local.ip() {
            std::net::IpAddr::V4(a) => a.octets(),
            std::net::IpAddr::V6(a) => {
                let o = a.octets();
                [o[12], o[13], o[14], o[15]]
            }
        },
    };
    // nginx's sequence starts again from its first value once it wraps.
    let seq = SEQ_V2
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
            let next = q.wrapping_add(0x100);
            Some(if next < 0x0303_0302 { 0x0303_0302 } else { next })
        })
        .unwrap_or(0x0303_0302);
    s.set[..4].copy_from_slice(&first);
    s.set[4..8].copy_from_slice(&now.to_be_bytes());
    s.set[8..12].copy_from_slice(&start_value().to_be_bytes());
    s.set[12..].copy_from_slice(&seq.to_be_bytes());
}

/// `$uid_got`: the client's identifier (not with `userid off`).
pub fn got_var(ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
    let conf = &ctx.conf.userid;
    if conf.mode == Mode::Off {
        return;
    }
    let s = state(ctx);
    if present(&s.got) {
        write_var(&conf.name, &s.got, out);
    }
}

/// `$uid_set`: the identifier this response sets (`on` and `v1` only).
pub fn set_var(ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
    let conf = &ctx.conf.userid;
    if conf.mode < Mode::V1 {
        return;
    }
    let mut s = state(ctx);
    create(ctx, &mut s);
    if present(&s.set) {
        write_var(&conf.name, &s.set, out);
    }
}

fn write_var(name: &str, uid: &[u8; 16], out: &mut Vec<u8>) {
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    cookie::hex_words(uid, out);
}

/// The header filter: `Set-Cookie` (and `P3P`) for a client whose
/// identifier is to be set.
pub fn apply(ctx: &mut ReqCtx<'_, '_>, resp: &mut Response<'_>) {
    let conf = &ctx.conf.userid;
    if ctx.subrequest || conf.mode < Mode::V1 {
        return;
    }
    let mut s = state(ctx);
    create(ctx, &mut s);
    if !present(&s.set) {
        return;
    }
    let mut v = Vec::with_capacity(conf.name.len() + 100);
    v.extend_from_slice(conf.name.as_bytes());
    v.push(b'=');
    if !present(&s.got) || s.reset {
        let at = v.len();
        encode(&s.set, &mut v);
        if conf.mark != 0 {
            v[at + 22] = conf.mark;
        }
    } else {
        v.extend_from_slice(&s.value[..22]);
        v.push(conf.mark);
        v.push(b'=');
    }
    drop(s);
    if conf.expires == MAX_EXPIRES {
        v.extend_from_slice(b"; expires=Thu, 31-Dec-37 23:55:55 GMT");
    } else if conf.expires != 0 {
        v.extend_from_slice(b"; expires=");
        crate::http::date::cookie_time((crate::clock::unix_ms() / 1000) as i64 + conf.expires, &mut v);
    }
    v.extend_from_slice(conf.domain.as_bytes());
    v.extend_from_slice(conf.path.as_bytes());
    if conf.flags.secure {
        v.extend_from_slice(b"; secure");
    }
    if conf.flags.httponly {
        v.extend_from_slice(b"; httponly");
    }
    if let Some(s) = conf.flags.samesite {
        v.extend_from_slice(b"; samesite=");
        v.extend_from_slice(s.as_bytes());
    }
    resp.headers.push(("Set-Cookie".into(), v.into()));
    if !conf.p3p.is_empty() {
        resp.headers.push(("P3P".into(), conf.p3p.as_bytes().to_vec().into()));
    }
}

/// Standard base64 with padding: 24 characters for 16 bytes.
pub fn encode(src: &[u8; 16], out: &mut Vec<u8>) {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for ch in src.chunks(3) {
        let b = [ch[0], *ch.get(1).unwrap_or(&0), *ch.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63]);
        out.push(A[(n >> 12) as usize & 63]);
        out.push(if ch.len() > 1 { A[(n >> 6) as usize & 63] } else { b'=' });
        out.push(if ch.len() > 2 { A[n as usize & 63] } else { b'=' });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_through_the_cookie_reader() {
        let uid: [u8; 16] = *b"\x7f\0\0\x01abcdefgh\x03\x03\x03\x02";
        let mut v = b"uid=".to_vec();
        encode(&uid, &mut v);
        assert_eq!(v.len(), 4 + 24);
        assert!(v.ends_with(b"=="));
        let cookie::Found::Got { uid: back, .. } = cookie::read(&[&v[..]], b"uid") else { panic!() };
        assert_eq!(back, uid);
    }

    #[test]
    fn presence_is_the_last_word() {
        assert!(!present(&[1; 12].iter().chain(&[0; 4]).copied().collect::<Vec<_>>().try_into().unwrap()));
        assert!(present(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
    }
}
