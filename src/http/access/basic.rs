//! `auth_basic`: the Authorization header decoded as
//! `ngx_http_auth_basic_user` decodes it (also what `$remote_user` shows),
//! the user looked up in the password file as
//! `ngx_http_auth_basic_handler` scans it, and the handler itself with
//! nginx's statuses and error-log lines.
//!
//! The file is read on every request, as nginx reads it: an edited file
//! takes effect at once, and a password file is a few lines.

use std::io::Read;
use std::path::PathBuf;

use super::{Verdict, unauthorized};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::log::error::Level;
use crate::log_req;
use crate::process::signal::os_error;

/// User and password of a Basic Authorization header.
#[derive(Debug, PartialEq, Eq)]
pub struct Credentials {
    pub user: Vec<u8>,
    pub password: Vec<u8>,
}

/// `Basic` (any case) then spaces then base64 of `user:password`, with a
/// non-empty user; None for anything else (nginx's NGX_DECLINED).
pub fn decode(header: &[u8]) -> Option<Credentials> {
    if header.len() < 6 || !header[..6].eq_ignore_ascii_case(b"Basic ") {
        return None;
    }
    let mut encoded = &header[6..];
    while let [b' ', rest @ ..] = encoded {
        encoded = rest;
    }
    if encoded.is_empty() {
        return None;
    }
    let auth = decode_base64(encoded)?;
    let colon = auth.iter().position(|&c| c == b':')?;
    if colon == 0 {
        return None;
    }
    Some(Credentials { user: auth[..colon].to_vec(), password: auth[colon + 1..].to_vec() })
}

/// ngx_decode_base64: the standard alphabet up to the first `=` (what
/// follows is ignored), a length that leaves no lone sextet, padding bits
/// not checked.
pub fn decode_base64(src: &[u8]) -> Option<Vec<u8>> {
    decode_alphabet(src, *b"+/")
}

/// ngx_decode_base64url: the same with `-` and `_` for `+` and `/`.
pub fn decode_base64url(src: &[u8]) -> Option<Vec<u8>> {
    decode_alphabet(src, *b"-_")
}

fn decode_alphabet(src: &[u8], [c62, c63]: [u8; 2]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u8> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            _ if c == c62 => 62,
            _ if c == c63 => 63,
            _ => return None,
        })
    };
    let len = src.iter().position(|&c| c == b'=').unwrap_or(src.len());
    let vals: Vec<u8> = src[..len].iter().map(|&c| val(c)).collect::<Option<_>>()?;
    if vals.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(vals.len() / 4 * 3 + 2);
    for ch in vals.chunks(4) {
        if ch.len() > 1 {
            out.push(ch[0] << 2 | ch[1] >> 4);
        }
        if ch.len() > 2 {
            out.push(ch[1] << 4 | ch[2] >> 2);
        }
        if ch.len() > 3 {
            out.push(ch[2] << 6 | ch[3]);
        }
    }
    Some(out)
}

/// The stored password of `user` in a password file's bytes, as nginx's
/// scanner finds it: the first line that starts with `user:` (lines
/// starting with `#` or CR are skipped; the password ends at CR, LF or
/// `:`, or at the end of the file). The scanner works on bytes, not lines:
/// a mismatch consumes the character, which may be the line's LF.
pub fn find_user<'f>(file: &'f [u8], user: &[u8]) -> Option<&'f [u8]> {
    enum St {
        Login(usize),
        Skip,
    }
    let mut st = St::Login(0);
    for (i, &c) in file.iter().enumerate() {
        match st {
            St::Login(login) => {
                if login == 0 {
                    if c == b'#' || c == b'\r' {
                        st = St::Skip;
                        continue;
                    }
                    if c == b'\n' {
                        continue;
                    }
                }
                // The user name is followed by ':' in nginx's buffer.
                let want = user.get(login).copied().unwrap_or(b':');
                if c != want {
                    st = St::Skip;
                } else if login == user.len() {
                    let rest = &file[i + 1..];
                    let end = rest.iter().position(|&b| matches!(b, b'\n' | b'\r' | b':')).unwrap_or(rest.len());
                    return Some(&rest[..end]);
                } else {
                    st = St::Login(login + 1);
                }
            }
            St::Skip => {
                if c == b'\n' {
                    st = St::Login(0);
                }
            }
        }
    }
    None
}

/// ngx_http_auth_basic_handler.
pub(super) fn handler(ctx: &ReqCtx<'_, '_>, _any: bool) -> Verdict {
    let conf = &ctx.conf.access;
    let (Some(realm_t), Some(file_t)) = (&conf.realm, &conf.user_file) else {
        return Verdict::Declined;
    };
    let realm = realm_t.render_to_vec(&Vars::request(ctx));
    if realm == b"off" {
        return Verdict::Declined;
    }
    let Some(cred) = ctx.req.header("authorization").and_then(decode) else {
        log_req!(ctx, Level::Info, "no user/password was provided for basic authentication");
        return unauthorized(&realm);
    };
    let path = user_file_path(ctx, file_t);
    let shown = path.display();
    let data = match std::fs::File::open(&path) {
        Ok(mut f) => {
            let mut data = Vec::new();
            if let Err(e) = f.read_to_end(&mut data) {
                log_req!(ctx, Level::Crit, "pread() \"{}\" failed ({})", shown, os_error(&e));
                return Verdict::Fail(500);
            }
            data
        }
        Err(e) => {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            let level = if missing { Level::Error } else { Level::Crit };
            log_req!(ctx, level, "open() \"{}\" failed ({})", shown, os_error(&e));
            if missing {
                return Verdict::Refuse(crate::http::response::Response::new(403));
            }
            return Verdict::Fail(500);
        }
    };
    let user = String::from_utf8_lossy(&cred.user);
    let Some(stored) = find_user(&data, &cred.user) else {
        log_req!(ctx, Level::Error, "user \"{}\" was not found in \"{}\"", user, shown);
        return unauthorized(&realm);
    };
    if super::crypt::verify(&cred.password, stored) {
        return Verdict::Admit;
    }
    log_req!(ctx, Level::Error, "user \"{}\": password mismatch", user);
    unauthorized(&realm)
}

/// The file for this request: a path with variables is resolved against
/// the configuration's directory when relative, as nginx's `conf_prefix`.
fn user_file_path(ctx: &ReqCtx<'_, '_>, f: &super::UserFile) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let bytes = f.path.render_to_vec(&Vars::request(ctx));
    // nginx works with a C string: the path ends at a NUL.
    let bytes = bytes.split(|&b| b == 0).next().unwrap_or_default();
    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(bytes));
    if p.is_absolute() { p.to_path_buf() } else { f.conf_dir.join(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_nginx() {
        let c = decode(b"Basic dXNlcjpwYXNz").unwrap();
        assert_eq!((c.user.as_slice(), c.password.as_slice()), (&b"user"[..], &b"pass"[..]));
        assert_eq!(decode(b"basic    dXNlcjpwYXNz").unwrap().user, b"user");
        // A colon in the password stays in it.
        assert_eq!(decode(b"Basic dTpwOnE=").unwrap().password, b"p:q");
        assert_eq!(decode(b"Basic dTpwOnE=garbage").unwrap().password, b"p:q");
        assert!(decode(b"Basic").is_none());
        assert!(decode(b"Basic ").is_none());
        assert!(decode(b"Bearer dXNlcjpwYXNz").is_none());
        assert!(decode(b"Basic OnBhc3M=").is_none(), "empty user");
        assert!(decode(b"Basic dXNlcg==").is_none(), "no colon");
        assert!(decode(b"Basic dXNl cjpw").is_none(), "space inside");
        assert!(decode(b"Basic dXNlc").is_none(), "lone sextet");
    }

    #[test]
    fn finds_users_like_nginx() {
        let f = b"# comment\n\nalice:{PLAIN}a\r\nbob:{PLAIN}b:comment\nbo:x\ncarol:{PLAIN}c";
        assert_eq!(find_user(f, b"alice"), Some(&b"{PLAIN}a"[..]));
        assert_eq!(find_user(f, b"bob"), Some(&b"{PLAIN}b"[..]));
        assert_eq!(find_user(f, b"bo"), Some(&b"x"[..]));
        assert_eq!(find_user(f, b"carol"), Some(&b"{PLAIN}c"[..]));
        assert_eq!(find_user(f, b"# comment"), None);
        assert_eq!(find_user(f, b"dave"), None);
        // A mismatch on the line's LF skips the next line too.
        assert_eq!(find_user(b"a\nab:x\nab:y\n", b"ab"), Some(&b"y"[..]));
    }
}
