//! `limit_rate` and `limit_rate_after`: the pace of a response's bytes to
//! the client, nginx's write-filter rule (ngx_http_write_filter_module.c).
//! A request may have sent `rate × (whole seconds since it started + 1)`
//! bytes beyond `limit_rate_after`; a write waits until it may, carries at
//! most that many bytes, and the next write waits the time those bytes
//! take at the rate. The rate is the location's (a size, variables
//! allowed, as nginx 1.17+), or what `set $limit_rate` gave the request.
//!
//! The connection writers ask a [`Pacer`] before each write (HTTP/1's
//! `flush`, HTTP/2's window wait), so every kind of body (memory, file,
//! origin, compressed) is paced the same; a paced HTTP/1 file goes through
//! the write buffer instead of sendfile.

use std::time::{Duration, Instant};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::value;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

/// A size as written: fixed, or with variables (evaluated per request).
#[derive(Clone, Debug)]
pub enum Size {
    Fixed(u64),
    Var(Template),
}

/// The per-level settings (`LocConf::limit.rate`).
#[derive(Clone, Debug, Default)]
pub struct RateConf {
    /// `limit_rate` (None or 0: no limit).
    pub rate: Option<Size>,
    pub after: Option<Size>,
    /// The slot of `$limit_rate` when some `set $limit_rate` exists
    /// (`rewrite::vars`), resolved once per configuration.
    pub set_slot: Option<usize>,
}

fn size(d: &Directive) -> Result<Size, ConfError> {
    let text = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    let t = Template::compile(text).map_err(|e| ConfError::at(e, &d.span))?;
    match t.as_literal() {
        Some(_) => value::parse_size(text)
            .map(Size::Fixed)
            .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span)),
        None => Ok(Size::Var(t)),
    }
}

pub fn limit_rate(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> Result<(), ConfError> {
    l.limit.rate.rate = Some(size(d)?);
    Ok(())
}

pub fn limit_rate_after(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> Result<(), ConfError> {
    l.limit.rate.after = Some(size(d)?);
    Ok(())
}

/// A size for this request: nginx logs a value that is not a size and
/// uses 0.
fn eval(ctx: &ReqCtx<'_, '_>, s: &Option<Size>) -> u64 {
    match s {
        None => 0,
        Some(Size::Fixed(n)) => *n,
        Some(Size::Var(t)) => {
            let v = t.render_to_vec(&Vars::request(ctx));
            parse_or_log(ctx, &v).unwrap_or(0)
        }
    }
}

fn parse_or_log(ctx: &ReqCtx<'_, '_>, v: &[u8]) -> Option<u64> {
    let n = std::str::from_utf8(v).ok().and_then(value::parse_size);
    if n.is_none() {
        log_req!(ctx, Level::Error, "invalid size \"{}\"", String::from_utf8_lossy(v));
    }
    n
}

/// The request's rate in bytes per second (0: none): `set $limit_rate`'s
/// value once set, else the location's `limit_rate`.
pub fn rate_of(ctx: &ReqCtx<'_, '_>) -> u64 {
    if let Some(n) = ctx.limit.accel_rate {
        return n;
    }
    let rc = &ctx.conf.limit.rate;
    if let Some(slot) = rc.set_slot {
        let set = ctx.vars.borrow().get(slot).and_then(|v| v.clone());
        if let Some(v) = set
            && let Some(n) = parse_or_log(ctx, &v)
        {
            return n;
        }
    }
    eval(ctx, &rc.rate)
}

/// The pace of one response; None when it has no rate.
pub fn pacer(ctx: &ReqCtx<'_, '_>, started: Instant) -> Option<Pacer> {
    let rc = &ctx.conf.limit.rate;
    if rc.rate.is_none() && rc.set_slot.is_none() && ctx.limit.accel_rate.is_none() {
        return None;
    }
    let rate = rate_of(ctx);
    if rate == 0 {
        return None;
    }
    Some(Pacer { rate, after: eval(ctx, &rc.after), started, sent: 0, next: None })
}

/// nginx's write-filter arithmetic for one response.
#[derive(Debug)]
pub struct Pacer {
    rate: u64,
    after: u64,
    started: Instant,
    /// Bytes written so far (HTTP/1: head included, as nginx's `c->sent`).
    sent: u64,
    /// The time the last write's bytes take at the rate.
    next: Option<Instant>,
}

impl Pacer {
    /// Waits until a write may go; how many bytes it may carry (at most
    /// `want`, at least 1).
    pub async fn grant(&mut self, want: usize) -> usize {
        if let Some(t) = self.next.take() {
            tokio::time::sleep_until(t.into()).await;
            // A new reading for what follows (worker tasks get one per
            // poll anyway, `clock::per_poll`).
            crate::clock::mono_stale();
        }
        loop {
            let secs = crate::clock::mono().saturating_duration_since(self.started).as_secs() + 1;
            let allowed = i128::from(self.rate) * i128::from(secs) - (i128::from(self.sent) - i128::from(self.after));
            if allowed > 0 {
                return allowed.min(want as i128).max(1) as usize;
            }
            let ms = (-allowed * 1000 / i128::from(self.rate) + 1).min(60_000) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            crate::clock::mono_stale();
        }
    }

    /// Records a write of `n` bytes: the next one waits for those beyond
    /// `limit_rate_after` at the rate.
    pub fn wrote(&mut self, n: usize) {
        let before = self.sent.saturating_sub(self.after);
        self.sent += n as u64;
        let now = self.sent.saturating_sub(self.after);
        let ms = (now - before).saturating_mul(1000) / self.rate;
        if ms > 0 {
            self.next = Some(crate::clock::mono() + Duration::from_millis(ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_followed_by_its_time_at_the_rate() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let mut p = Pacer { rate: 1000, after: 500, started: Instant::now(), sent: 0, next: None };
            // The first second's worth, plus what comes before the limit.
            assert_eq!(p.grant(10_000).await, 1500);
            p.wrote(1500);
            // 1000 bytes past `after`: a second before the next write.
            let t = Instant::now();
            let n = p.grant(10_000).await;
            assert!(t.elapsed() >= Duration::from_millis(900), "{:?}", t.elapsed());
            assert!(n <= 1000, "{n}");
        });
    }
}
