//! `try_files file ... fallback`: the first existing candidate becomes the
//! URI served by this location; otherwise the fallback (URI, named location
//! or `=code`) runs.

use std::borrow::Cow;

use super::ctx::{ReqCtx, Vars};
use super::static_file::map_path;
use super::{Step, error};
use crate::config::model::{TryFallback, TryFiles};

/// None: a candidate exists and the request continues in this location.
pub fn run<'c>(ctx: &mut ReqCtx<'c, '_>, tf: &'c TryFiles) -> Option<Step<'c>> {
    if !tf.files.is_empty() && super::static_file::alias_refused(ctx) {
        return Some(Step::Done(error(ctx, 500)));
    }
    for (t, want_dir) in &tf.files {
        // A directory candidate (`$uri/`) was stored without its slash, and
        // the URI stays without it, as in nginx: `/dir` then gets the 301.
        let want_dir = *want_dir;
        let value = t.render_to_vec(&Vars::request(ctx));
        let mut path = Vec::new();
        // An alias in a regex location is the whole path for a request, but
        // try_files appends its candidate to it, and the URI from then on.
        ctx.add_uri_to_alias |= ctx.conf.root.alias_len == Some(usize::MAX);
        map_path(ctx, &value, &mut path);
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&path));
        if let Ok(f) = super::open_cache::open_for(ctx, p)
            && f.is_dir == want_dir
        {
            // The path info split off the URI before it becomes the
            // script name (`try_files $fastcgi_script_name`).
            if ctx.conf.fastcgi.split_path_info.is_some() {
                let info = crate::http::fastcgi::path_info(ctx);
                if !info.is_empty() {
                    ctx.fastcgi_path_info = Some((crate::http::fastcgi::script_name(ctx), info));
                }
            }
            ctx.req.path = Cow::Owned(value);
            ctx.filename = Some(path);
            return None;
        }
    }
    Some(match &tf.fallback {
        TryFallback::Code(c) => Step::Done(error(ctx, *c)),
        TryFallback::Named(n) => Step::Named(n),
        TryFallback::Uri(t) => {
            let v = t.render_to_vec(&Vars::request(ctx));
            split_uri(v)
        }
    })
}

/// An internal-redirect target may carry arguments after `?`.
pub fn split_uri<'c>(mut v: Vec<u8>) -> Step<'c> {
    match v.iter().position(|&b| b == b'?') {
        Some(q) => {
            let args = v[q + 1..].to_vec();
            v.truncate(q);
            Step::Redirect(v, Some(args))
        }
        None => Step::Redirect(v, None),
    }
}
