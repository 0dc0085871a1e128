//! `limit_conn`: how many requests of one key are being processed at once
//! (ngx_http_limit_conn_module.c). nginx counts a request from its
//! preaccess phase until its pool is freed, after the access log line;
//! sluice holds a [`Hold`] in the request's context for the same span, so
//! the count drops when the request is done, however it ends (answered,
//! the client gone, the connection task dropped by a shutdown).

use std::sync::Arc;

use super::conf::LimitConf;
use super::zone::{State, Table, now_ms};
use super::{ConnStatus, key_of};
use crate::http::handler::ctx::ReqCtx;
use crate::log::error::Level;
use crate::log_req;

/// A key's count of requests in progress (removed when it falls to 0).
pub struct Node {
    conn: u32,
}

impl State for Node {
    /// A count is never dropped: requests hold it.
    fn droppable(&self, _now: u64, _force: bool) -> bool {
        false
    }
    fn last_used(&self) -> u64 {
        0
    }
}

/// One request's place in a zone's count, given back on drop.
pub struct Hold {
    table: Arc<Table<Node>>,
    key: Box<[u8]>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut sh = self.table.shard(&self.key);
        let gone = match sh.map.get_mut(&self.key[..]) {
            Some(n) => {
                n.conn = n.conn.saturating_sub(1);
                n.conn == 0
            }
            None => false,
        };
        if gone {
            sh.remove(&self.key);
        }
    }
}

/// nginx's limit_conn handler: None to go on, or the refusal's status.
pub fn check(ctx: &mut ReqCtx<'_, '_>, lc: &LimitConf) -> Option<u16> {
    let now = now_ms();
    let mut key = Vec::new();
    for rule in &lc.conn {
        key.clear();
        key_of(ctx, &rule.zone.key, &mut key);
        if key.is_empty() {
            continue;
        }
        if key.len() > 255 {
            log_req!(
                ctx,
                Level::Error,
                "the value of the \"{}\" key is more than 255 bytes: \"{}\"",
                rule.zone.key_text,
                String::from_utf8_lossy(&key)
            );
            continue;
        }
        ctx.limit.conn_status = ConnStatus::Passed;
        let mut sh = rule.zone.table.shard(&key);
        let refused = match sh.get_or_insert(&key, now, || Node { conn: 0 }) {
            None => {
                drop(sh);
                log_req!(
                    ctx,
                    Level::Crit,
                    "ngx_slab_alloc() failed: no memory in limit_conn_zone \"{}\"",
                    rule.zone.name
                );
                true
            }
            Some(n) if n.conn >= rule.conn => {
                drop(sh);
                let dry = if lc.conn_dry_run { ", dry run," } else { "" };
                log_req!(ctx, lc.conn_log_level, "limiting connections{} by zone \"{}\"", dry, rule.zone.name);
                true
            }
            Some(n) => {
                n.conn += 1;
                false
            }
        };
        if refused {
            // nginx gives back what this request took in earlier zones.
            ctx.limit.holds.clear();
            if lc.conn_dry_run {
                ctx.limit.conn_status = ConnStatus::RejectedDryRun;
                return None;
            }
            ctx.limit.conn_status = ConnStatus::Rejected;
            return Some(lc.conn_status);
        }
        ctx.limit.holds.push(Hold { table: rule.zone.table.clone(), key: key.as_slice().into() });
    }
    None
}
