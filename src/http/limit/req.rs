//! `limit_req`: nginx's leaky bucket (ngx_http_limit_req_module.c), per
//! key, in thousandths of a request. Each request adds 1000 to the key's
//! `excess`, which drains at the zone's rate (`rate` thousandths per
//! second) since the key's last request; a request that would leave more
//! than `burst` is refused, one that leaves more than `delay` waits until
//! the part above `delay` has drained.
//!
//! With several `limit_req` on a level, nginx looks every key up first and
//! writes only when none refuses (the last one is accounted at once, the
//! others afterwards), then delays by the longest wait any of them asks.
//! sluice does the same; between the two steps another worker may touch
//! the same key, as in nginx, where the zone's lock is also released
//! between them.

use std::time::Duration;

use super::conf::{LimitConf, ReqRule};
use super::zone::{State, now_ms};
use super::{ReqStatus, key_of};
use crate::http::handler::ctx::ReqCtx;
use crate::log::error::Level;
use crate::log_req;

/// A key's bucket.
pub struct Node {
    /// Thousandths of a request above the rate.
    excess: u64,
    /// `zone::now_ms` of the last accounted request; 0: never (a state
    /// made by a lookup that did not account).
    last: u64,
    /// The zone's rate, for the idle rule in [`State::droppable`].
    rate: u64,
}

impl State for Node {
    /// nginx drops a state idle for a minute whose bucket has drained; when
    /// the zone is full, the least recently used one.
    fn droppable(&self, now: u64, force: bool) -> bool {
        let ms = now.saturating_sub(self.last);
        force || (ms >= 60_000 && (self.excess as i128) - (self.rate as i128) * (ms as i128) / 1000 <= 0)
    }
    fn last_used(&self) -> u64 {
        self.last
    }
}

/// nginx's elapsed time: a clock that went back a little (another worker's
/// reading) counts as no time, one that went back far as 1 ms.
fn elapsed(now: u64, last: u64) -> i64 {
    if now >= last {
        (now - last).min(i64::MAX as u64) as i64
    } else if last - now > 60_000 {
        1
    } else {
        0
    }
}

/// The bucket after this request: drained since `last`, plus one request.
fn next_excess(n: &Node, rate: u64, ms: i64) -> u64 {
    if n.last == 0 {
        // nginx computes this from a `last` of 0, an uptime ago: empty.
        return 0;
    }
    let drained = (rate as i128) * (ms as i128) / 1000;
    (n.excess as i128 - drained + 1000).clamp(0, i64::MAX as i128) as u64
}

enum Lookup {
    /// Refused: the excess it would have been.
    Busy(u64),
    /// Accounted (the last limit): the new excess.
    Ok(u64),
    /// Passed, to be accounted once every limit agreed.
    Again,
    /// The zone is full of states in use.
    Error,
}

fn lookup(rule: &ReqRule, key: &[u8], account: bool, now: u64) -> Lookup {
    let rate = rule.zone.rate;
    let mut sh = rule.zone.table.shard(key);
    if let Some(n) = sh.map.get_mut(key) {
        let ms = elapsed(now, n.last);
        let excess = next_excess(n, rate, ms);
        if excess > rule.burst {
            return Lookup::Busy(excess);
        }
        if !account {
            return Lookup::Again;
        }
        n.excess = excess;
        if ms != 0 || n.last == 0 {
            n.last = now;
        }
        return Lookup::Ok(excess);
    }
    let last = if account { now } else { 0 };
    match sh.get_or_insert(key, now, || Node { excess: 0, last, rate }) {
        None => Lookup::Error,
        Some(_) if account => Lookup::Ok(0),
        Some(_) => Lookup::Again,
    }
}

/// Accounts a request that passed an earlier limit: its new excess.
fn account(rule: &ReqRule, key: &[u8], now: u64) -> u64 {
    let rate = rule.zone.rate;
    let mut sh = rule.zone.table.shard(key);
    let Some(n) = sh.get_or_insert(key, now, || Node { excess: 0, last: 0, rate }) else {
        return 0;
    };
    let ms = elapsed(now, n.last);
    let excess = next_excess(n, rate, ms);
    n.excess = excess;
    if ms != 0 || n.last == 0 {
        n.last = now;
    }
    excess
}

/// The wait `excess` asks for under `rule` (nginx: the part above `delay`
/// at the zone's rate).
fn wait_ms(rule: &ReqRule, excess: u64) -> u64 {
    if excess <= rule.delay { 0 } else { (excess - rule.delay).saturating_mul(1000) / rule.zone.rate }
}

/// What the limits decided for a request.
pub enum Verdict {
    Pass,
    Reject(u16),
    Delay(Duration),
}

thread_local! {
    /// The key being evaluated: rendered here so a key lookup allocates
    /// nothing once the buffer has grown.
    static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// nginx's limit_req handler for the request's location.
pub fn check(ctx: &mut ReqCtx<'_, '_>, lc: &LimitConf) -> Verdict {
    let rules = &lc.req;
    let now = now_ms();
    let mut rc = None;
    let mut excess = 0;
    let mut at = 0;
    // Keys of the limits that passed but are not accounted yet.
    let mut held: Vec<(usize, Box<[u8]>)> = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        at = i;
        let last = i + 1 == rules.len();
        let r = KEY.with(|k| {
            let mut k = k.borrow_mut();
            k.clear();
            key_of(ctx, &rule.zone.key, &mut k);
            if k.is_empty() {
                return None;
            }
            if k.len() > 65535 {
                log_req!(
                    ctx,
                    Level::Error,
                    "the value of the \"{}\" key is more than 65535 bytes: \"{}\"",
                    rule.zone.key_text,
                    String::from_utf8_lossy(&k)
                );
                return None;
            }
            let r = lookup(rule, &k, last, now);
            if matches!(r, Lookup::Again) {
                held.push((i, k.as_slice().into()));
            }
            Some(r)
        });
        let Some(r) = r else { continue };
        match r {
            Lookup::Again => rc = Some(Lookup::Again),
            other => {
                rc = Some(other);
                break;
            }
        }
    }
    let Some(rc) = rc else { return Verdict::Pass };
    let zone_name = |i: usize| rules[i].zone.name.as_str();
    let dry = if lc.req_dry_run { ", dry run" } else { "" };
    match rc {
        Lookup::Busy(_) | Lookup::Error => {
            if let Lookup::Busy(e) = rc {
                log_req!(
                    ctx,
                    lc.req_log_level,
                    "limiting requests{}, excess: {}.{:03} by zone \"{}\"",
                    dry,
                    e / 1000,
                    e % 1000,
                    zone_name(at)
                );
            } else {
                log_req!(ctx, Level::Alert, "could not allocate node in limit_req zone \"{}\"", zone_name(at));
            }
            if lc.req_dry_run {
                ctx.limit.req_status = ReqStatus::RejectedDryRun;
                return Verdict::Pass;
            }
            ctx.limit.req_status = ReqStatus::Rejected;
            Verdict::Reject(lc.req_status)
        }
        Lookup::Ok(_) | Lookup::Again => {
            // The limit whose wait is the longest, and its excess.
            if let Lookup::Ok(e) = rc {
                excess = e;
            }
            let mut max = wait_ms(&rules[at], excess);
            let mut by = at;
            for (i, key) in held.iter().rev() {
                let e = account(&rules[*i], key, now);
                let w = wait_ms(&rules[*i], e);
                if w > max {
                    (max, excess, by) = (w, e, *i);
                }
            }
            if max == 0 {
                ctx.limit.req_status = ReqStatus::Passed;
                return Verdict::Pass;
            }
            log_req!(
                ctx,
                delay_level(lc.req_log_level),
                "delaying request{}, excess: {}.{:03}, by zone \"{}\"",
                dry,
                excess / 1000,
                excess % 1000,
                zone_name(by)
            );
            if lc.req_dry_run {
                ctx.limit.req_status = ReqStatus::DelayedDryRun;
                return Verdict::Pass;
            }
            ctx.limit.req_status = ReqStatus::Delayed;
            Verdict::Delay(Duration::from_millis(max))
        }
    }
}

/// nginx logs delays one level below refusals (info stays info).
fn delay_level(l: Level) -> Level {
    match l {
        Level::Error => Level::Warn,
        Level::Warn => Level::Notice,
        _ => Level::Info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_drains_at_the_rate() {
        let n = Node { excess: 2000, last: 10, rate: 1000 };
        // 1 r/s, 500 ms later: 2000 - 500 + 1000.
        assert_eq!(next_excess(&n, 1000, 500), 2500);
        // Long idle: nginx clamps after adding this request, so empty.
        assert_eq!(next_excess(&n, 1000, 10_000), 0);
        assert_eq!(next_excess(&n, 1000, 2_500), 500);
        // Never accounted: empty.
        assert_eq!(next_excess(&Node { excess: 0, last: 0, rate: 1000 }, 1000, 5), 0);
        assert_eq!(elapsed(100, 50), 50);
        assert_eq!(elapsed(100, 150), 0);
        assert_eq!(elapsed(100, 70_000), 1);
    }

    #[test]
    fn delays_one_level_lower() {
        assert_eq!(delay_level(Level::Error), Level::Warn);
        assert_eq!(delay_level(Level::Warn), Level::Notice);
        assert_eq!(delay_level(Level::Notice), Level::Info);
        assert_eq!(delay_level(Level::Info), Level::Info);
    }
}
