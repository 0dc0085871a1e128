//! Runs a level's script for a request, as nginx's script engine does in
//! `ngx_http_rewrite_handler`.

use std::borrow::Cow;

use super::{Cond, FileTest, Flag, If, Op, Rewrite, Script, SetOp, SetTarget};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::Response;
use crate::http::uri::{escape_args, quoted_or_plus, unescape_redirect};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::{Template, Var, VarSource};

pub enum Outcome<'c> {
    /// On to the next phase (nginx's NGX_DECLINED), the URI possibly
    /// rewritten.
    Declined,
    /// The request is answered: `return`, a redirecting `rewrite`, or an
    /// error.
    Respond(Response<'c>),
}

enum Flow<'c> {
    Next,
    /// `last`, `break`, or the `break` directive: the level's script ends.
    Exit,
    Respond(Response<'c>),
}

/// Runs `script` with the settings in `ctx.conf` (the server's for the
/// server level, the matched location's otherwise); a location `if` whose
/// condition holds switches `ctx.conf` to its own settings.
pub fn run<'c>(ctx: &mut ReqCtx<'c, '_>, script: &'c Script) -> Outcome<'c> {
    let mut e = Engine { log: ctx.conf.rewrite.log, quote: true, quoted_uri: None };
    match e.ops(ctx, &script.ops) {
        Flow::Respond(r) => Outcome::Respond(r),
        Flow::Next | Flow::Exit => Outcome::Declined,
    }
}

struct Engine {
    /// `rewrite_log` of the level the script started in.
    log: bool,
    /// nginx's `e->quote`: set until a `rewrite` matched. Captures in a
    /// `set` or `if` value are then escaped like those in a rewritten query.
    quote: bool,
    /// The client's URI had `%` or `+` (computed on first need).
    quoted_uri: Option<bool>,
}

/// Renders a value, escaping `$1`..`$9` with NGX_ESCAPE_ARGS when `escape`.
struct Escaping<'s> {
    inner: &'s dyn VarSource,
    escape: bool,
}

impl VarSource for Escaping<'_> {
    fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
        if self.escape && matches!(var, Var::Capture(_)) {
            let mut raw = Vec::new();
            self.inner.write_var(var, &mut raw);
            escape_args(&raw, out);
        } else {
            self.inner.write_var(var, out);
        }
    }
}

fn render(ctx: &ReqCtx<'_, '_>, t: &Template, escape: bool) -> Vec<u8> {
    let vars = Vars::request(ctx);
    t.render_to_vec(&Escaping { inner: &vars, escape })
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// The path of the request target (an absolute-form target's after its
/// authority), what nginx's parser flags `quoted_uri` and `plus_in_uri` on.
fn target_path(target: &[u8]) -> &[u8] {
    if target.first() == Some(&b'/') {
        return target;
    }
    let rest = match target.windows(3).position(|w| w == b"://") {
        Some(i) => &target[i + 3..],
        None => return target,
    };
    rest.iter().position(|&b| b == b'/').map_or(&b"/"[..], |i| &rest[i..])
}

/// Stores the captures of a `rewrite` or `if` regex that matched: they
/// replace any earlier ones, and its named groups become variables.
fn record(ctx: &mut ReqCtx<'_, '_>, caps: Vec<Vec<u8>>, re: &crate::pattern::Regex) {
    ctx.captured(re);
    for (i, n) in re.names() {
        let v = caps.get(*i).cloned().unwrap_or_default();
        ctx.named.retain(|(k, _)| k != n);
        ctx.named.push((n.clone(), v));
    }
    ctx.captures = caps;
}

/// A regex that did not match: nginx forgets the captures (`$1` is empty).
fn reset_captures(ctx: &mut ReqCtx<'_, '_>) {
    ctx.captures.clear();
    ctx.captures.push(Vec::new());
}

impl Engine {
    fn quoted_uri(&mut self, ctx: &ReqCtx<'_, '_>) -> bool {
        *self.quoted_uri.get_or_insert_with(|| {
            let (path, _) = crate::http::uri::split_target(target_path(ctx.req.target()));
            quoted_or_plus(path)
        })
    }

    /// Whether captures in a `set`/`if` value are escaped now.
    fn escape_values(&mut self, ctx: &ReqCtx<'_, '_>) -> bool {
        self.quote && self.quoted_uri(ctx)
    }

    fn ops<'c>(&mut self, ctx: &mut ReqCtx<'c, '_>, ops: &'c [Op]) -> Flow<'c> {
        for op in ops {
            let flow = match op {
                Op::Rewrite(r) => self.rewrite(ctx, r),
                Op::Return(r) => Flow::Respond(crate::http::handler::ret::respond(ctx, r)),
                Op::Set(s) => {
                    self.set(ctx, s);
                    Flow::Next
                }
                Op::Break => {
                    // After a rewrite without a flag, `break` makes it one
                    // with `break`.
                    if ctx.uri_changed {
                        ctx.valid_location = false;
                        ctx.uri_changed = false;
                    }
                    Flow::Exit
                }
                Op::If(i) => self.if_block(ctx, i),
            };
            if !matches!(flow, Flow::Next) {
                return flow;
            }
        }
        Flow::Next
    }

    fn rewrite<'c>(&mut self, ctx: &mut ReqCtx<'c, '_>, r: &'c Rewrite) -> Flow<'c> {
        let Some(caps) = r.regex.capture_values(&ctx.req.path) else {
            if self.log {
                log_req!(ctx, Level::Notice, "\"{}\" does not match \"{}\"", r.pattern, lossy(&ctx.req.path));
            }
            reset_captures(ctx);
            return Flow::Next;
        };
        if self.log {
            log_req!(ctx, Level::Notice, "\"{}\" matches \"{}\"", r.pattern, lossy(&ctx.req.path));
        }
        record(ctx, caps, &r.regex);
        ctx.unparsed_uri_valid = false;
        if r.flag == Flag::Break {
            ctx.valid_location = false;
            ctx.uri_changed = false;
        } else {
            ctx.uri_changed = true;
        }
        // Captures are escaped where the client's escaping matters: in a
        // redirect and in the new query string.
        let quoted = self.quoted_uri(ctx);
        if let Flag::Redirect(code) = r.flag {
            let mut location = unescape_redirect(&render(ctx, &r.uri, quoted));
            if r.add_args
                && let Some(a) = ctx.req.args.as_deref().filter(|a| !a.is_empty())
            {
                location.push(if r.has_query { b'&' } else { b'?' });
                location.extend_from_slice(a);
            }
            if self.log {
                log_req!(ctx, Level::Notice, "rewritten redirect: \"{}\"", lossy(&location));
            }
            return Flow::Respond(crate::http::handler::ret::redirect(ctx, code, &location));
        }
        let uri = render(ctx, &r.uri, false);
        let old_args = ctx.req.args.as_deref().filter(|a| !a.is_empty());
        let args = match &r.args {
            Some(t) => {
                let mut a = render(ctx, t, quoted);
                if r.add_args
                    && let Some(old) = old_args
                {
                    a.push(b'&');
                    a.extend_from_slice(old);
                }
                Some(a)
            }
            None if r.add_args => old_args.map(<[u8]>::to_vec),
            None => None,
        };
        let args = args.filter(|a| !a.is_empty());
        if self.log {
            log_req!(
                ctx,
                Level::Notice,
                "rewritten data: \"{}\", args: \"{}\"",
                lossy(&uri),
                lossy(args.as_deref().unwrap_or_default())
            );
        }
        self.quote = false;
        if uri.is_empty() {
            log_req!(ctx, Level::Error, "the rewritten URI has a zero length");
            return Flow::Respond(crate::http::handler::error(ctx, 500));
        }
        ctx.req.path = Cow::Owned(uri);
        ctx.req.args = args.map(Cow::Owned);
        ctx.filename = None;
        if r.flag == Flag::None { Flow::Next } else { Flow::Exit }
    }

    fn set(&mut self, ctx: &mut ReqCtx<'_, '_>, s: &SetOp) {
        let escape = self.escape_values(ctx);
        let value = render(ctx, &s.value, escape);
        match s.target {
            SetTarget::Slot(slot) => ctx.set_var(slot, value),
            SetTarget::Args => {
                ctx.req.args = if value.is_empty() { None } else { Some(Cow::Owned(value)) };
                ctx.unparsed_uri_valid = false;
            }
        }
    }

    fn if_block<'c>(&mut self, ctx: &mut ReqCtx<'c, '_>, i: &'c If) -> Flow<'c> {
        let holds = match &i.cond {
            Cond::Value(var) => {
                let v = render(ctx, var, false);
                !v.is_empty() && v != b"0"
            }
            Cond::Equal { var, value, negate } => {
                let a = render(ctx, var, false);
                let escape = self.escape_values(ctx);
                (a == render(ctx, value, escape)) != *negate
            }
            Cond::Regex { var, regex, pattern, negate } => {
                let subject = render(ctx, var, false);
                if let Some(caps) = regex.capture_values(&subject) {
                    if self.log {
                        log_req!(ctx, Level::Notice, "\"{}\" matches \"{}\"", pattern, lossy(&subject));
                    }
                    record(ctx, caps, regex);
                    !*negate
                } else {
                    if self.log {
                        log_req!(ctx, Level::Notice, "\"{}\" does not match \"{}\"", pattern, lossy(&subject));
                    }
                    reset_captures(ctx);
                    *negate
                }
            }
            Cond::File { path, test, negate } => {
                let escape = self.escape_values(ctx);
                let p = render(ctx, path, escape);
                file_test(ctx, &p, *test) != *negate
            }
        };
        if !holds {
            return Flow::Next;
        }
        if let Some(conf) = &i.conf {
            let had = ctx.handler_lost || crate::http::proxy::has_handler(ctx.conf);
            ctx.conf = conf;
            ctx.handler_lost = had && !crate::http::proxy::has_handler(conf);
        }
        self.ops(ctx, &i.body)
    }
}

/// `-f`, `-d`, `-e`, `-x` as nginx tests them (stat, following symlinks):
/// a path that cannot be examined fails every test, and an error other
/// than "does not exist" is logged.
/// Under `disable_symlinks` the path is opened as the static handler
/// opens it, so a refused link fails the test (nginx's script file code
/// goes through the same open).
fn file_test(ctx: &ReqCtx<'_, '_>, path: &[u8], test: FileTest) -> bool {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let os = std::ffi::OsStr::from_bytes(path);
    if ctx.conf.symlinks.policy != crate::http::handler::symlinks::Policy::Off {
        let Ok(f) = crate::http::handler::open_cache::open_for(ctx, std::path::Path::new(os)) else {
            return false;
        };
        let mode = f.file.as_ref().and_then(|h| h.metadata().ok()).map_or(0, |m| m.permissions().mode());
        return match test {
            FileTest::File => !f.is_dir,
            FileTest::Dir => f.is_dir,
            FileTest::Exists => true,
            FileTest::Exec => mode & 0o100 != 0,
        };
    }
    match std::fs::metadata(os) {
        Ok(m) => match test {
            FileTest::File => m.is_file(),
            FileTest::Dir => m.is_dir(),
            FileTest::Exists => m.is_file() || m.is_dir(),
            FileTest::Exec => m.permissions().mode() & 0o100 != 0,
        },
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            if !matches!(errno, libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) {
                log_req!(
                    ctx,
                    Level::Crit,
                    "stat() \"{}\" failed ({}: {})",
                    lossy(path),
                    errno,
                    crate::process::signal::strerror(errno)
                );
            }
            false
        }
    }
}
