//! nginx's access phase: `allow`/`deny` (ngx_http_access_module),
//! `auth_basic`/`auth_basic_user_file` (ngx_http_auth_basic_module) and
//! `satisfy` (ngx_http_core_module), plus `valid_referers` from
//! ngx_http_referer_module, whose `$invalid_referer` the rewrite phase reads.
//!
//! The phase runs from `handler::run_location` for every location a
//! request reaches (after the rewrite phases, before `try_files` and the
//! content handler, proxying included), again after each internal
//! redirect, error pages too, as nginx runs it for every main request.
//!
//! The handlers run in nginx's order, access rules first, then basic
//! authentication, and their answers combine as
//! `ngx_http_core_access_phase` and `ngx_http_core_post_access_phase`
//! combine them:
//! - `satisfy all`: the first handler that refuses ends the request with
//!   its status (a `deny` is 403 without asking for a password);
//! - `satisfy any`: the first handler that admits the request ends the
//!   phase; when none does, the refusal remembered is 401 if any handler
//!   asked for credentials, else 403 (logged as `access forbidden by rule`
//!   only then). A handler that fails (500) ends the request at once.
//!
//! `rules` parses and matches addresses, `basic` decodes the Authorization
//! header and finds the user in the password file, `crypt` checks the
//! password against the stored hash, `referer` is `valid_referers`.

pub mod auth_request;
pub mod basic;
pub mod crypt;
pub mod referer;
/// nginx's allow/deny lists, shared with the stream family.
pub use crate::access_rules as rules;
pub mod secure_link;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, LMT, LOC, MANY, R, SRV, Set, cmd, list, multi};
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

/// One level's settings (`LocConf::access`), inherited as nginx merges
/// them: a level with an `allow` or `deny` of its own replaces the whole
/// inherited rule list ([`AccessConf::own_rules`] tells the setters
/// whether the list in hand is this level's), the other settings are
/// plain values a level may override.
#[derive(Clone, Debug, Default)]
pub struct AccessConf {
    pub rules: Arc<rules::Rules>,
    /// The rules were set at this level (reset by `config::build::inherit`).
    pub own_rules: bool,
    /// `satisfy any`.
    pub satisfy_any: bool,
    /// `auth_basic REALM` (None: not set; the value `off`, literal or
    /// from variables, turns the check off at run time as in nginx).
    pub realm: Option<Arc<Template>>,
    pub user_file: Option<Arc<UserFile>>,
    pub referers: Option<Arc<referer::ValidReferers>>,
    /// `auth_request`, `auth_request_set`.
    pub auth_request: auth_request::AuthRequestConf,
    /// `secure_link`, `secure_link_md5`, `secure_link_secret`.
    pub secure_link: secure_link::SecureLinkConf,
    /// `auth_delay`: a 401 from this phase is held back this long, so
    /// a wrong password costs as much time as a right one is worth.
    pub auth_delay: std::time::Duration,
}

/// `auth_basic_user_file`: the path, with variables or not; a relative
/// one is resolved against the configuration's directory (nginx's
/// `conf_prefix`), at load time or, with variables, per request.
#[derive(Debug)]
pub struct UserFile {
    pub path: Template,
    pub conf_dir: PathBuf,
}

pub static DIRECTIVES: &[Cmd] = &[
    multi(cmd("allow", HSL | LMT, 1, 1, Set::Loc(allow))),
    multi(cmd("deny", HSL | LMT, 1, 1, Set::Loc(deny))),
    cmd("satisfy", HSL, 1, 1, Set::Loc(satisfy)),
    cmd("auth_delay", HSL, 1, 1, Set::Loc(auth_delay)),
    cmd("auth_basic", HSL | LMT, 1, 1, Set::Loc(auth_basic)),
    cmd("auth_basic_user_file", HSL | LMT, 1, 1, Set::Loc(auth_basic_user_file)),
    list(cmd("valid_referers", SRV | LOC, 1, MANY, Set::Loc(referer::valid_referers)), referer::reset),
    // nginx's hash sizing for the names; sluice's tables need none.
    cmd("referer_hash_max_size", SRV | LOC, 1, 1, Set::Noop),
    cmd("referer_hash_bucket_size", SRV | LOC, 1, 1, Set::Noop),
    cmd("secure_link", HSL, 1, 1, Set::Loc(secure_link::secure_link)),
    cmd("secure_link_md5", HSL, 1, 1, Set::Loc(secure_link::secure_link_md5)),
    cmd("secure_link_secret", HSL, 1, 1, Set::Loc(secure_link::secure_link_secret)),
];

fn allow(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    rule(c, d, ctx, false)
}

fn deny(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    rule(c, d, ctx, true)
}

fn rule(c: &mut LocConf, d: &Directive, ctx: &mut Ctx, deny: bool) -> R {
    let text = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    let parsed = rules::parse(text).ok_or_else(|| ConfError::at(format!("invalid parameter \"{text}\""), &d.span))?;
    if parsed.low_bits_set {
        ctx.warnings.push(ConfError::at(format!("low address bits of {text} are meaningless"), &d.span).to_string());
    }
    let a = &mut c.access;
    if !a.own_rules {
        a.rules = Arc::default();
        a.own_rules = true;
    }
    Arc::make_mut(&mut a.rules).push(parsed.target, deny);
    Ok(())
}

fn auth_delay(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    c.access.auth_delay = crate::config::value::parse_time(v)
        .ok_or_else(|| ConfError::at("\"auth_delay\" directive invalid value", &d.span))?;
    Ok(())
}

fn satisfy(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.access.satisfy_any = match d.args.first().map(|w| w.text.as_str()).unwrap_or("") {
        "all" => false,
        "any" => true,
        v => return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span)),
    };
    Ok(())
}

fn compile(d: &Directive) -> Result<Template, ConfError> {
    let text = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

fn auth_basic(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.access.realm = Some(Arc::new(compile(d)?));
    Ok(())
}

fn auth_basic_user_file(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let mut path = compile(d)?;
    if let Some(lit) = path.as_literal() {
        // A fixed path is made absolute once.
        let full = ctx.conf_path(&String::from_utf8_lossy(lit));
        path = Template::literal(&full.to_string_lossy());
    }
    c.access.user_file = Some(Arc::new(UserFile { path, conf_dir: ctx.conf_dir.clone() }));
    Ok(())
}

/// What one access handler decided (nginx's handler return codes).
enum Verdict {
    Declined,
    /// `auth_request` must ask its location first.
    Pending,
    Admit,
    Refuse(Response<'static>),
    /// 500 and the like: the request ends whatever `satisfy` says.
    Fail(u16),
}

/// The access phase for the location in `ctx.conf`: None lets the request
/// go on, else the response (403, 401 with `WWW-Authenticate`, 500) that
/// ends it, before error_page and the filters.
pub fn phase<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Response<'c>> {
    let conf = &ctx.conf.access;
    // Subrequests skip the access phase, as in nginx.
    if ctx.subrequest || conf.rules.is_empty() && conf.realm.is_none() && conf.auth_request.uri.is_none() {
        return None;
    }
    let any = conf.satisfy_any;
    // nginx's r->access_code under `satisfy any`: a 401 is kept over a
    // later 403, a 403 is replaced by a later 401.
    let mut refused: Option<Response<'static>> = None;
    for handler in [rules_handler as fn(&ReqCtx<'_, '_>, bool) -> Verdict, basic::handler, auth_handler] {
        match handler(ctx, any) {
            Verdict::Declined => {}
            Verdict::Pending => {
                // The connection layer runs the subrequest, then resumes.
                ctx.auth = auth_request::State::Pending;
                return Some(Response::new(200));
            }
            Verdict::Admit if any => return None,
            Verdict::Admit => {}
            Verdict::Fail(status) => return Some(crate::http::handler::error(ctx, status)),
            Verdict::Refuse(r) if !any => return Some(refusal(ctx, r)),
            Verdict::Refuse(r) => {
                if refused.as_ref().is_none_or(|p| p.status != 401) {
                    refused = Some(r);
                }
            }
        }
    }
    let r = refused?;
    if r.status == 403 {
        log_req!(ctx, Level::Error, "access forbidden by rule");
    }
    Some(refusal(ctx, r))
}

/// The phase's refusal; a 401 waits out `auth_delay` first (the caller
/// sees [`crate::http::handler::suspended`] and sleeps before answering).
fn refusal<'c>(ctx: &mut ReqCtx<'c, '_>, r: Response<'static>) -> Response<'c> {
    let delay = ctx.conf.access.auth_delay;
    if r.status == 401 && !delay.is_zero() {
        log_req!(ctx, Level::Info, "delaying unauthorized request");
        ctx.auth_delay = Some(delay);
    }
    with_error_body(ctx, r)
}

/// A handler's refusal as nginx's generated error page, keeping the
/// headers the handler set (`WWW-Authenticate`).
fn with_error_body<'c>(ctx: &ReqCtx<'c, '_>, r: Response<'static>) -> Response<'c> {
    let mut page = crate::http::handler::error(ctx, r.status);
    page.headers.extend(r.headers);
    page
}

/// ngx_http_auth_request_handler: the stored answer of the subrequest.
fn auth_handler(ctx: &ReqCtx<'_, '_>, _any: bool) -> Verdict {
    match auth_request::handler(ctx) {
        auth_request::Verdict::Declined => Verdict::Declined,
        auth_request::Verdict::Pending => Verdict::Pending,
        auth_request::Verdict::Admit => Verdict::Admit,
        auth_request::Verdict::Refuse(r) => Verdict::Refuse(r),
        auth_request::Verdict::Fail => Verdict::Fail(500),
    }
}

/// ngx_http_access_handler: the client address against the level's rules.
fn rules_handler(ctx: &ReqCtx<'_, '_>, any: bool) -> Verdict {
    let verdict = if ctx.client_is_unix() {
        ctx.conf.access.rules.check_unix()
    } else {
        ctx.conf.access.rules.check(ctx.client().ip())
    };
    match verdict {
        None => Verdict::Declined,
        Some(false) => Verdict::Admit,
        Some(true) => {
            // Under `satisfy any` the post-access phase logs it, if no
            // other handler admits the request.
            if !any {
                log_req!(ctx, Level::Error, "access forbidden by rule");
            }
            Verdict::Refuse(Response::new(403))
        }
    }
}

/// A 401 asking for credentials in `realm`, as
/// ngx_http_auth_basic_set_realm builds it (the realm is not escaped).
fn unauthorized(realm: &[u8]) -> Verdict {
    let mut v = Vec::with_capacity(realm.len() + 14);
    v.extend_from_slice(b"Basic realm=\"");
    v.extend_from_slice(realm);
    v.push(b'"');
    let mut r = Response::new(401);
    r.headers.push((Cow::Borrowed("WWW-Authenticate"), FieldValue::Heap(v)));
    Verdict::Refuse(r)
}
