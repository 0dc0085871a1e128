//! nginx's sub filter (`sub_filter`, `sub_filter_once`,
//! `sub_filter_types`, `sub_filter_last_modified`): strings replaced in
//! response bodies as they stream, matched ignoring case as nginx matches
//! them. The search strings and the replacements are rendered once per
//! response (both may hold variables; a search string that renders empty
//! is left out, as nginx does); the body then goes through a [`Replacer`]
//! a piece at a time,
//! holding back only the bytes that could still begin a match, so memory
//! stays bounded for any body. It rides in the same streaming body as
//! compression (`compress::stream`), before the encoder, as nginx's sub
//! filter runs before gzip.

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, MANY, R, Set, cmd, list};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::{Body, Response};
use crate::variables::Template;

pub static DIRECTIVES: &[Cmd] = &[
    list(cmd("sub_filter", HSL, 2, 2, Set::Loc(sub_filter)), reset),
    cmd("sub_filter_once", HSL, 1, 1, Set::Loc(sub_filter_once)),
    cmd("sub_filter_types", HSL, 1, MANY, Set::Loc(sub_filter_types)),
    cmd("sub_filter_last_modified", HSL, 1, 1, Set::Loc(sub_filter_last_modified)),
];

#[derive(Clone, Debug)]
pub struct SubConf {
    /// Search strings (compiled from the lowercased text, as nginx
    /// lowercases the argument before compiling it) and their
    /// replacements, in config order.
    pub pairs: Arc<Vec<(Template, Template)>>,
    pub once: bool,
    /// Lowercase types (`text/html` always); `*` is any.
    pub types: Arc<Vec<String>>,
    pub last_modified: bool,
}

impl Default for SubConf {
    fn default() -> Self {
        SubConf { pairs: Arc::default(), once: true, types: Arc::new(vec!["text/html".into()]), last_modified: false }
    }
}

fn reset(c: &mut LocConf) {
    c.sub.pairs = Arc::default();
}

fn sub_filter(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let pat = d.args[0].text.as_str();
    if pat.is_empty() {
        return Err(ConfError::at("empty search pattern", &d.span));
    }
    // nginx keeps the search strings in a table indexed by one byte.
    if c.sub.pairs.len() == 255 {
        return Err(ConfError::at("number of search patterns exceeds 255", &d.span));
    }
    let pat = Template::compile(&pat.to_ascii_lowercase()).map_err(|e| ConfError::at(e, &d.span))?;
    let repl = Template::compile(&d.args[1].text).map_err(|e| ConfError::at(e, &d.span))?;
    let mut pairs = (*c.sub.pairs).clone();
    pairs.push((pat, repl));
    c.sub.pairs = Arc::new(pairs);
    Ok(())
}

fn sub_filter_once(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.sub.once = crate::config::set_main::flag(d)?;
    Ok(())
}

fn sub_filter_last_modified(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.sub.last_modified = crate::config::set_main::flag(d)?;
    Ok(())
}

fn sub_filter_types(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.sub.types = super::type_list(d);
    Ok(())
}

/// The header filter: starts replacing in `resp`'s body when the location
/// has strings to replace and the type is listed; the length becomes
/// unknown and, as nginx does, Last-Modified and ETag go (or the ETag is
/// weakened with `sub_filter_last_modified on`).
pub fn apply<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    let conf = &ctx.conf.sub;
    if conf.pairs.is_empty() || resp.body.is_empty() && !matches!(resp.body, Body::Upstream(_)) {
        return;
    }
    // A body the gunzip module decompresses takes the replacer after it.
    let gunzipped = matches!(&resp.body, Body::Compressed(z) if z.coding.is_none() && !z.has_sub());
    if !gunzipped
        && !matches!(
            resp.body,
            Body::Static(_) | Body::Owned(_) | Body::Shared(_) | Body::File { .. } | Body::Upstream(_)
        )
    {
        return;
    }
    // A response without a type is matched by `*` only, as nginx's
    // ngx_http_test_content_type.
    let ct = resp.content_type.as_deref().unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !super::type_listed(&conf.types, mime) {
        return;
    }
    let vars = Vars { resp: Some(resp), ..Vars::request(ctx) };
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(conf.pairs.len());
    for (pat, repl) in conf.pairs.iter() {
        let mut pat = match pat.as_literal() {
            Some(lit) => lit.to_vec(),
            None => pat.render_to_vec(&vars),
        };
        // A search string whose variables render empty takes no part;
        // when none is left the response passes untouched, headers too.
        if pat.is_empty() {
            continue;
        }
        pat.make_ascii_lowercase();
        pairs.push((pat, repl.render_to_vec(&vars)));
    }
    if pairs.is_empty() {
        return;
    }
    let replacer = Replacer::new(pairs, conf.once);
    if let Body::Compressed(z) = &mut resp.body {
        z.add_sub(replacer);
    } else {
        let body = std::mem::replace(&mut resp.body, Body::Empty);
        resp.body =
            Body::Compressed(Box::new(crate::http::filter::compress::stream::Compressed::substituting(body, replacer)));
    }
    resp.accept_ranges = false;
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    if conf.last_modified {
        crate::http::filter::compress::weaken_etag(resp);
    } else {
        resp.last_modified = None;
        resp.etag = None;
        resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("last-modified") && !n.eq_ignore_ascii_case("etag"));
    }
}

/// Replaces strings in a body fed a piece at a time.
pub struct Replacer {
    /// (lowercase pattern, replacement, still active).
    pairs: Vec<(Vec<u8>, Vec<u8>, bool)>,
    once: bool,
    /// Which bytes (lowercased) begin some pattern.
    first: [bool; 256],
    /// Bytes held back: they might begin a match that the next piece ends.
    tail: Vec<u8>,
}

impl Replacer {
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>, once: bool) -> Replacer {
        let mut first = [false; 256];
        for (p, _) in &pairs {
            if let Some(&b) = p.first() {
                first[usize::from(b)] = true;
                first[usize::from(b.to_ascii_uppercase())] = true;
            }
        }
        Replacer { pairs: pairs.into_iter().map(|(p, r)| (p, r, true)).collect(), once, first, tail: Vec::new() }
    }

    /// Feeds the next piece; the output so far is appended to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut buf = std::mem::take(&mut self.tail);
        buf.extend_from_slice(input);
        let keep = self.scan(&buf, out);
        self.tail = buf[keep..].to_vec();
    }

    /// The end of the body: what was held back goes out as it is. It
    /// begins where a pattern was still matching when the body ended; as
    /// in nginx (which sends its `looked` bytes unchanged at the last
    /// buffer), no later match inside it counts: with `zy` before `z`, a
    /// body ending in `zz` keeps its last `z`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.tail);
    }

    /// Copies `buf` to `out` with replacements, up to the first byte that
    /// may begin an unfinished match (returned; `buf.len()` when none).
    fn scan(&mut self, buf: &[u8], out: &mut Vec<u8>) -> usize {
        let mut copied = 0;
        let mut p = 0;
        while p < buf.len() {
            if !self.pairs.iter().any(|(_, _, on)| *on) {
                break;
            }
            if !self.first[usize::from(buf[p])] {
                p += 1;
                continue;
            }
            let rest = &buf[p..];
            let mut matched = None;
            let mut partial = false;
            for (i, (pat, _, on)) in self.pairs.iter().enumerate() {
                if !*on {
                    continue;
                }
                if rest.len() >= pat.len() {
                    if rest[..pat.len()].eq_ignore_ascii_case(pat) {
                        matched = Some(i);
                        break;
                    }
                } else if pat[..rest.len()].eq_ignore_ascii_case(rest) {
                    // An earlier pattern wins a position: one that may
                    // still match here is waited for, even if a later one
                    // already matches (else the answer would depend on
                    // where the body was split).
                    partial = true;
                    break;
                }
            }
            if let Some(i) = matched {
                out.extend_from_slice(&buf[copied..p]);
                let (pat, repl, on) = &mut self.pairs[i];
                out.extend_from_slice(repl);
                p += pat.len();
                copied = p;
                if self.once {
                    *on = false;
                }
                continue;
            }
            if partial {
                out.extend_from_slice(&buf[copied..p]);
                return p;
            }
            p += 1;
        }
        out.extend_from_slice(&buf[copied..]);
        buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(&str, &str)], once: bool, body: &str, piece: usize) -> String {
        let pairs = pairs.iter().map(|(p, r)| (p.as_bytes().to_ascii_lowercase(), r.as_bytes().to_vec())).collect();
        let mut r = Replacer::new(pairs, once);
        let mut out = Vec::new();
        for chunk in body.as_bytes().chunks(piece.max(1)) {
            r.feed(chunk, &mut out);
        }
        r.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_earlier_pattern_wins_however_the_body_is_split() {
        // "zy" is listed first: it wins over "z" where both match, also
        // when a piece ends between "z" and "y" (found by the sub_filter
        // fuzz target; fuzz/regressions/sub_filter/prefix-pattern-split).
        let pairs = [("zy", "<1>"), ("z", "<2>")];
        for piece in 1..6 {
            assert_eq!(run(&pairs, false, "a|Zy|z|zzy", piece), "a|<1>|<2>|<2><1>", "pieces of {piece}");
            // At the end, a "z" that might have begun "zy" stays as it is,
            // as nginx 1.26 answers (zzz -> <2><2>z, azyz -> a<1>z).
            assert_eq!(run(&pairs, false, "zzz", piece), "<2><2>z", "pieces of {piece}");
            assert_eq!(run(&pairs, false, "azyz", piece), "a<1>z", "pieces of {piece}");
        }
    }

    #[test]
    fn replaces_across_pieces_ignoring_case() {
        for piece in [1, 2, 3, 7, 1000] {
            assert_eq!(run(&[("http://", "https://")], false, "a HTTP://x http://y", piece), "a https://x https://y");
            assert_eq!(run(&[("http://", "https://")], true, "a HTTP://x http://y", piece), "a https://x http://y");
            assert_eq!(
                run(&[("</head>", "<s></s></head>")], true, "<html><head></HEAD>", piece),
                "<html><head><s></s></head>"
            );
            assert_eq!(run(&[("abc", "1"), ("bcd", "2")], false, "abcd bcd", piece), "1d 2");
            // A prefix of a pattern at the very end is kept as it is.
            assert_eq!(run(&[("needle", "x")], false, "hay need", piece), "hay need");
            assert_eq!(run(&[("aab", "X")], false, "aaab", piece), "aX");
            // A longer pattern still matching when the body ends hides a
            // shorter one after it (nginx: abcd,bc on zabc -> zabc).
            assert_eq!(run(&[("abcd", "X"), ("bc", "Y")], false, "zabc", piece), "zabc");
            assert_eq!(run(&[("abcd", "X"), ("ab", "Y")], false, "zabc", piece), "zabc");
            assert_eq!(run(&[("abcd", "X"), ("ab", "Y")], false, "zabcz", piece), "zYcz");
        }
    }
}
