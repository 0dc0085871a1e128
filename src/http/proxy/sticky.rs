//! The HTTP half of `sticky` (`crate::upstream::sticky` has the
//! directive, the peer ids and the choice): what a request asks for, read
//! from its cookie, variables or the learn table before the first pick;
//! and, once a peer answered, the cookie method's `Set-Cookie` and the
//! learn method's new session (recorded at the response head with
//! `header`, else when the origin has sent the whole body: the
//! `Release`).

use std::sync::Arc;

use crate::config::proxy::{PeerConf, Upstream};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::Response;
use crate::upstream::sticky::{CookieConf, Expires, SameSite, Sticky, learn, peer_id};
use crate::variables::Template;

/// One request's sticky state.
#[derive(Default)]
pub struct Want {
    /// The peer id asked for (empty: none).
    pub id: Vec<u8>,
    /// `learn`: the `lookup=` value (empty: none).
    looked_up: Vec<u8>,
}

/// The first non-empty value of `ts`.
fn first(ts: &[Template], v: &Vars<'_, '_, '_>) -> Vec<u8> {
    ts.iter().map(|t| t.render_to_vec(v)).find(|s| !s.is_empty()).unwrap_or_default()
}

/// What the request asks for.
pub fn want(ctx: &ReqCtx<'_, '_>, u: &Upstream) -> Want {
    let Some(s) = &u.sticky else { return Want::default() };
    match &**s {
        Sticky::Cookie(c) => {
            let id = crate::http::handler::request_cookie(&ctx.req, &c.name).unwrap_or_default();
            Want { id: id.to_vec(), looked_up: Vec::new() }
        }
        Sticky::Route(vars) => Want { id: first(vars, &Vars::request(ctx)), looked_up: Vec::new() },
        Sticky::Learn(l) => {
            let looked_up = first(&l.lookup, &Vars::request(ctx));
            let id = l.table.lookup(&looked_up, crate::clock::unix_ms());
            Want { id: id.map(|i| i.as_bytes().to_vec()).unwrap_or_default(), looked_up }
        }
    }
}

/// A peer answered with `resp` (its head, before any filter): the cookie
/// method adds its `Set-Cookie`; the learn method returns the session to
/// record (now with `header`, which this does; else the caller keeps it
/// until the response is done).
pub fn answered(
    ctx: &ReqCtx<'_, '_>,
    u: &Upstream,
    peer: &PeerConf,
    want: &Want,
    resp: &mut Response<'_>,
) -> Option<learn::Pending> {
    let s = u.sticky.as_ref()?;
    match &**s {
        Sticky::Cookie(c) => {
            let value = set_cookie(ctx, c, &peer_id(peer));
            resp.headers.push(("Set-Cookie".into(), value.into_bytes().into()));
            None
        }
        Sticky::Route(_) => None,
        Sticky::Learn(l) => {
            let created = first(&l.create, &Vars { resp: Some(resp), ..Vars::request(ctx) });
            let pending = learn::Pending {
                table: l.table.clone(),
                created,
                looked_up: want.looked_up.clone(),
                id: peer_id(peer),
            };
            if l.header {
                pending.commit();
                return None;
            }
            Some(pending)
        }
    }
}

/// The `Set-Cookie` value: `NAME=ID` and the configured attributes, in
/// NGINX Plus's order and spelling.
fn set_cookie(ctx: &ReqCtx<'_, '_>, c: &CookieConf, id: &Arc<str>) -> String {
    let mut s = format!("{}={}", c.name, id);
    match c.expires {
        Some(Expires::Max) => s.push_str("; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000"),
        Some(Expires::Secs(n)) => {
            let at = crate::clock::now_secs().saturating_add(n);
            let mut t = Vec::new();
            crate::http::date::cookie_time(i64::try_from(at).unwrap_or(i64::MAX), &mut t);
            s.push_str(&format!("; expires={}; max-age={n}", String::from_utf8_lossy(&t)));
        }
        None => {}
    }
    if let Some(d) = &c.domain {
        let mut d = d.render_to_vec(&Vars::request(ctx));
        // A variable's control bytes would break the header.
        d.retain(|&b| b >= 0x20 && b != 0x7f);
        if !d.is_empty() {
            s.push_str("; domain=");
            s.push_str(&String::from_utf8_lossy(&d));
        }
    }
    if let Some(p) = &c.path {
        s.push_str("; path=");
        s.push_str(p);
    }
    if c.secure {
        s.push_str("; secure");
    }
    if c.httponly {
        s.push_str("; httponly");
    }
    let samesite = match &c.samesite {
        None => None,
        Some(SameSite::Strict) => Some("strict"),
        Some(SameSite::Lax) => Some("lax"),
        Some(SameSite::None) => Some("none"),
        Some(SameSite::Var(t)) => {
            let v = t.render_to_vec(&Vars::request(ctx));
            match v.as_slice() {
                b"" => None,
                v if v.eq_ignore_ascii_case(b"lax") => Some("lax"),
                v if v.eq_ignore_ascii_case(b"none") => Some("none"),
                _ => Some("strict"),
            }
        }
    };
    if let Some(v) = samesite {
        s.push_str("; samesite=");
        s.push_str(v);
    }
    s
}
