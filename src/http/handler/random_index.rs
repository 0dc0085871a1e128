//! nginx's random_index module: a request for a directory (URI ending in
//! `/`) goes, by internal redirect, to a file of that directory picked at
//! random. It runs before the index module, as in nginx's content phase;
//! a directory with no file to pick is left to the index module and
//! `autoindex`.

use super::ctx::ReqCtx;
use super::static_file::map_path;
use super::{Step, error};
use crate::config::parser::Directive;
use crate::config::table::{Cmd, LOC, R, Set, cmd};
use crate::http::request::Method;
use crate::log::error::Level;
use crate::log_req;

pub static DIRECTIVES: &[Cmd] = &[cmd("random_index", LOC, 1, 1, Set::Loc(random_index))];

fn random_index(c: &mut crate::config::model::LocConf, d: &Directive, _: &mut crate::config::build::Ctx) -> R {
    c.random_index = crate::config::set_main::flag(d)?;
    Ok(())
}

/// The redirect to a random file of the request's directory; None when
/// the module declines (off, another method, nothing to pick).
pub fn pick<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Step<'c>> {
    if !ctx.conf.random_index || !matches!(ctx.req.method(), Method::Get | Method::Head | Method::Post) {
        return None;
    }
    let mut dir = Vec::new();
    map_path(ctx, &ctx.req.path, &mut dir);
    // nginx opens the directory without the URI's final slash.
    if dir.len() > 1 && dir.last() == Some(&b'/') {
        dir.pop();
    }
    let shown = String::from_utf8_lossy(&dir).into_owned();
    let entries = match std::fs::read_dir(bytes_path(&dir)) {
        Ok(e) => e,
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            let (level, status) = match errno {
                libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG => (Level::Error, 404),
                libc::EACCES => (Level::Error, 403),
                _ => (Level::Crit, 500),
            };
            let text = crate::process::signal::strerror(errno);
            log_req!(ctx, level, "opendir() \"{}\" failed ({}: {})", shown, errno, text);
            return Some(Step::Done(error(ctx, status)));
        }
    };
    let mut names: Vec<Vec<u8>> = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                let text = crate::process::signal::strerror(errno);
                log_req!(ctx, Level::Crit, "readdir() \"{}\" failed ({}: {})", shown, errno, text);
                return Some(Step::Done(error(ctx, 500)));
            }
        };
        let name = std::os::unix::ffi::OsStrExt::as_bytes(entry.file_name().as_os_str()).to_vec();
        if name.first() == Some(&b'.') {
            continue;
        }
        // Regular files only, a symbolic link by what it points to (a
        // dangling one is skipped).
        let is_file = match entry.file_type() {
            Ok(t) if t.is_symlink() => std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()),
            Ok(t) => t.is_file(),
            Err(_) => false,
        };
        if is_file {
            names.push(name);
        }
    }
    if names.is_empty() {
        return None;
    }
    let chosen = &names[random_below(names.len())];
    let mut uri = ctx.req.path.to_vec();
    uri.extend_from_slice(chosen);
    Some(Step::Redirect(uri, ctx.req.args.as_deref().map(<[u8]>::to_vec)))
}

/// A uniform-enough index below `n` (n is a directory's file count).
fn random_below(n: usize) -> usize {
    let mut b = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        b = (nanos as u64).to_le_bytes();
    }
    ((u128::from(u64::from_le_bytes(b)) * n as u128) >> 64) as usize
}

fn bytes_path(b: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_below_stays_in_range_and_spreads() {
        let mut seen = [0u32; 3];
        for _ in 0..300 {
            let i = super::random_below(3);
            assert!(i < 3);
            seen[i] += 1;
        }
        assert!(seen.iter().all(|&c| c > 30), "{seen:?}");
        assert_eq!(super::random_below(1), 0);
    }
}
