//! `secure_link`, `secure_link_md5`, `secure_link_secret` and the
//! `$secure_link`, `$secure_link_expires` variables
//! (ngx_http_secure_link_module): links that only work with a hash made
//! from a secret, and optionally only until a time. The module decides
//! nothing by itself; the configuration reads the variable, usually
//! `if ($secure_link = "") { return 403; }`.
//!
//! * With `secure_link CHECKSUM[,EXPIRES]` and `secure_link_md5 STRING`,
//!   `$secure_link` is empty (not found) unless CHECKSUM is the base64url
//!   MD5 of STRING, then `1`, or `0` once EXPIRES (Unix seconds) passed.
//!   `$secure_link_expires` is EXPIRES as given.
//! * With `secure_link_secret WORD` (the old form), a URI `/p/HASH/link`
//!   is valid when HASH is the hex MD5 of `link` then WORD; `$secure_link`
//!   is then `link` (the rest of the raw request URI, arguments included).
//!
//! The two forms cannot be mixed at one level (nginx's message); a level
//! with one form does not inherit the other, as nginx merges them.

use std::sync::Arc;

use md5::Digest;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::R;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::variables::Template;

#[derive(Clone, Debug, Default)]
pub struct SecureLinkConf {
    pub checksum: Option<Arc<Template>>,
    pub md5: Option<Arc<Template>>,
    pub secret: Option<Arc<[u8]>>,
    /// The forms set at this level (reset for each new level).
    pub own_link: bool,
    pub own_secret: bool,
}

const MIXED: &str = "\"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\"";

fn template(d: &Directive) -> Result<Arc<Template>, ConfError> {
    Template::compile(&d.args[0].text).map(Arc::new).map_err(|e| ConfError::at(e, &d.span))
}

/// The new form at this level: the old one is neither inherited nor
/// allowed beside it.
fn new_form<'c>(c: &'c mut LocConf, d: &Directive) -> Result<&'c mut SecureLinkConf, ConfError> {
    let s = &mut c.access.secure_link;
    if s.own_secret {
        return Err(ConfError::at(MIXED, &d.span));
    }
    s.own_link = true;
    s.secret = None;
    Ok(s)
}

pub fn secure_link(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let t = template(d)?;
    new_form(c, d)?.checksum = Some(t);
    Ok(())
}

pub fn secure_link_md5(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let t = template(d)?;
    new_form(c, d)?.md5 = Some(t);
    Ok(())
}

pub fn secure_link_secret(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let s = &mut c.access.secure_link;
    if s.own_link {
        return Err(ConfError::at(MIXED, &d.span));
    }
    *s = SecureLinkConf {
        secret: Some(Arc::from(d.args[0].text.as_bytes())),
        own_secret: true,
        ..SecureLinkConf::default()
    };
    Ok(())
}

/// `$secure_link`: None where nginx's variable is not found.
pub fn value(ctx: &ReqCtx<'_, '_>) -> Option<Vec<u8>> {
    let conf = &ctx.conf.access.secure_link;
    if let Some(secret) = &conf.secret {
        return old_form(ctx.req.target(), secret).map(<[u8]>::to_vec);
    }
    let (checksum, md5) = (conf.checksum.as_ref()?, conf.md5.as_ref()?);
    let vars = Vars::request(ctx);
    let mut given = Vec::new();
    checksum.render(&vars, &mut given);
    let (hash, expires) = split_expires(&given)?;
    if hash.len() > 24 {
        return None;
    }
    let hash = crate::http::access::basic::decode_base64url(hash)?;
    let mut text = Vec::new();
    md5.render(&vars, &mut text);
    if hash[..] != md5::Md5::digest(&text)[..] {
        return None;
    }
    let expired = expires.is_some_and(|t| t < crate::clock::unix_now());
    Some(if expired { b"0".to_vec() } else { b"1".to_vec() })
}

/// `$secure_link_expires`: the time after the comma of `secure_link`'s
/// value, when it is a positive number.
pub fn expires(ctx: &ReqCtx<'_, '_>) -> Option<Vec<u8>> {
    let conf = &ctx.conf.access.secure_link;
    let checksum = conf.checksum.as_ref().filter(|_| conf.secret.is_none())?;
    let mut given = Vec::new();
    checksum.render(&Vars::request(ctx), &mut given);
    let comma = given.iter().position(|&b| b == b',')?;
    split_expires(&given)?.1?;
    Some(given[comma + 1..].to_vec())
}

/// The checksum, and the time after a comma: None (not found) when a
/// comma is followed by anything but a positive number (nginx's
/// `ngx_atotm` result must be above 0).
fn split_expires(v: &[u8]) -> Option<(&[u8], Option<u64>)> {
    let Some(comma) = v.iter().position(|&b| b == b',') else { return Some((v, None)) };
    let t = &v[comma + 1..];
    if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(t).ok()?.parse().ok().filter(|&n| n > 0 && n <= i64::MAX as u64)?;
    Some((&v[..comma], Some(n)))
}

/// The old form on the raw request target `/p/HASH/link`: `link` when HASH
/// (32 hex digits, either case) is the MD5 of `link` then the secret.
fn old_form<'t>(target: &'t [u8], secret: &[u8]) -> Option<&'t [u8]> {
    let rest = target.get(1..)?;
    let start = rest.iter().position(|&b| b == b'/')? + 1;
    let after = &rest[start..];
    let end = after.iter().position(|&b| b == b'/')?;
    let (hex, link) = (&after[..end], &after[end + 1..]);
    if hex.len() != 32 || link.is_empty() {
        return None;
    }
    let mut h = md5::Md5::new();
    h.update(link);
    h.update(secret);
    let want = h.finalize();
    let ok = hex
        .chunks(2)
        .zip(want.iter())
        .all(|(pair, &byte)| std::str::from_utf8(pair).ok().and_then(|p| u8::from_str_radix(p, 16).ok()) == Some(byte));
    ok.then_some(link)
}

/// For the `authorization` fuzz target: the checksum split and the old
/// form's path scan on arbitrary bytes; what they return lies inside the
/// input.
pub fn fuzz(data: &[u8]) {
    if let Some((hash, t)) = split_expires(data) {
        assert!(data.starts_with(hash));
        assert!(t.is_none_or(|t| t > 0));
    }
    if let Some(link) = old_form(data, b"secret") {
        assert!(!link.is_empty() && data.ends_with(link));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_part_is_a_positive_number_or_nothing() {
        assert_eq!(split_expires(b"abc"), Some((&b"abc"[..], None)));
        assert_eq!(split_expires(b"abc,2147483647"), Some((&b"abc"[..], Some(2147483647))));
        for bad in [&b"abc,"[..], b"abc,0", b"abc,-5", b"abc,1x", b"abc,1,2", b"abc, 5"] {
            assert_eq!(split_expires(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    /// The hex MD5 of `link` then the secret (`echo -n linksecret | md5sum`).
    #[test]
    fn old_form_checks_the_hex_md5_of_link_and_secret() {
        let hash: String = md5::Md5::digest(b"some/file.txt?a=1s3cr3t").iter().map(|b| format!("{b:02x}")).collect();
        let target = format!("/p/{hash}/some/file.txt?a=1");
        assert_eq!(old_form(target.as_bytes(), b"s3cr3t"), Some(&b"some/file.txt?a=1"[..]));
        assert_eq!(old_form(target.to_uppercase().as_bytes(), b"s3cr3t"), None, "the link's case changed");
        let upper_hex = format!("/p/{}/some/file.txt?a=1", hash.to_uppercase());
        assert_eq!(old_form(upper_hex.as_bytes(), b"s3cr3t"), Some(&b"some/file.txt?a=1"[..]));
        assert_eq!(old_form(target.as_bytes(), b"other"), None);
        assert_eq!(old_form(format!("/p/{hash}/").as_bytes(), b"s3cr3t"), None, "empty link");
        assert_eq!(old_form(format!("/p/{}/x", &hash[1..]).as_bytes(), b"s3cr3t"), None, "31 digits");
        assert_eq!(old_form(b"/nohash", b"s3cr3t"), None);
    }
}
