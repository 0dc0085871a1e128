//! The `sluice_status` HTML dashboard: one self-contained page compiled into
//! the binary (`dashboard.html`: inline CSS and JS, nothing fetched from
//! elsewhere) that polls its own location's JSON (`?format=json`) and draws
//! it. Kept apart from [`super::page`] so the page's text formats and the
//! browser's page change independently.
//!
//! The page is served with a Content-Security-Policy that allows exactly
//! its own inline `<script>` and `<style>` (by SHA-256 hash, so an injected
//! script, style or handler attribute would not run) and `connect-src
//! 'self'` for the polls; the script writes every server-provided string
//! with `textContent`, never as HTML.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::http::field_value::FieldValue;
use crate::http::response::{Body, Response};

/// The page.
pub const HTML: &str = include_str!("dashboard.html");

/// The text between the first `<tag>` and the `</tag>` after it.
fn inline<'h>(html: &'h str, tag: &str) -> &'h str {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let Some(start) = html.find(&open).map(|i| i + open.len()) else { return "" };
    html[start..].find(&close).map_or("", |len| &html[start..start + len])
}

/// `'sha256-…'`: the CSP source that allows exactly this inline text.
fn hash_source(text: &str) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    format!("'sha256-{}'", crate::http::proxy::websocket::base64(d.as_ref()))
}

/// The page's Content-Security-Policy, computed once from the page itself
/// so an edit of the page cannot leave a stale hash behind.
pub fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; \
             base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash_source(inline(HTML, "script")),
            hash_source(inline(HTML, "style"))
        )
    })
}

/// The effective quality `accept` gives `mime` (`type/subtype`), in
/// thousandths: the q of the most specific matching range (`type/subtype`
/// over `type/*` over `*/*`), 0 when none matches, 1000 when a matching
/// range names no q. A malformed q counts as 0 (RFC 9110's qvalue, read as
/// Accept-Encoding's is).
pub fn quality(accept: &[u8], mime: &str) -> u16 {
    let (ty, _) = mime.split_once('/').unwrap_or((mime, ""));
    let mut best: Option<(u8, u16)> = None;
    for range in accept.split(|&b| b == b',') {
        let mut parts = range.split(|&b| b == b';');
        let Ok(m) = std::str::from_utf8(parts.next().unwrap_or(b"").trim_ascii()) else { continue };
        let specific = if m.eq_ignore_ascii_case(mime) {
            2
        } else if m.len() == ty.len() + 2 && m.ends_with("/*") && m[..ty.len()].eq_ignore_ascii_case(ty) {
            1
        } else if m == "*/*" {
            0
        } else {
            continue;
        };
        let mut q = 1000;
        for p in parts {
            let p = p.trim_ascii();
            if p.len() > 2 && p[..2].eq_ignore_ascii_case(b"q=") {
                q = crate::http::filter::compress::negotiate::parse_qvalue(p[2..].trim_ascii()).unwrap_or(0);
            }
        }
        if best.is_none_or(|(s, _)| specific > s) {
            best = Some((specific, q));
        }
    }
    best.map_or(0, |(_, q)| q)
}

/// Whether a request's `Accept` prefers the page to JSON: text/html ranks
/// strictly higher than application/json (a browser's navigation does;
/// curl's `*/*` ties and keeps getting JSON).
pub fn prefers_html(accept: &[u8]) -> bool {
    quality(accept, "text/html") > quality(accept, "application/json")
}

/// The page, with its security headers; `negotiated`: the choice came from
/// `Accept`, so a cache must key on it (`Vary: Accept`).
pub fn response<'c>(negotiated: bool) -> Response<'c> {
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/html; charset=utf-8"));
    r.headers.push((Cow::Borrowed("Content-Security-Policy"), FieldValue::from_static(csp().as_bytes())));
    r.headers.push((Cow::Borrowed("X-Content-Type-Options"), FieldValue::from_static(b"nosniff")));
    r.headers.push((Cow::Borrowed("Referrer-Policy"), FieldValue::from_static(b"no-referrer")));
    if negotiated {
        r.headers.push((Cow::Borrowed("Vary"), FieldValue::from_static(b"Accept")));
    }
    r.body = Body::Static(HTML.as_bytes());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        let chrome = b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,\
            image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";
        assert!(prefers_html(chrome));
        assert!(prefers_html(b"text/*, application/json;q=0.5"));
        assert!(prefers_html(b"TEXT/HTML"));
        for json in [
            &b"*/*"[..],
            b"",
            b"application/json",
            b"text/html;q=0.5, application/json",
            b"text/html;q=0, */*",
            b"application/*, text/html",
            b"text/plain",
            // Not qvalues: they count as 0.
            b"text/html;q=inf, application/json;q=0.001",
            b"text/html;q=1e3, application/json;q=0.5",
        ] {
            assert!(!prefers_html(json), "{}", String::from_utf8_lossy(json));
        }
        assert!(prefers_html(b"text/html;q=0.5, application/json;q=0.499"));
        assert_eq!(quality(b"text/html; q=0.25", "text/html"), 250);
    }

    /// Self-contained: one inline script and one inline style, and nothing
    /// that would make a browser fetch from anywhere but the page's own
    /// location.
    #[test]
    fn page_is_self_contained_and_hashed() {
        for tag in ["script", "style"] {
            assert_eq!(HTML.matches(&format!("<{tag}")).count(), 1, "{tag}");
            assert!(!inline(HTML, tag).is_empty(), "{tag}");
        }
        for needle in ["http:", "https:", "src=", "href=\"h", "@import", "url(", "innerHTML", "outerHTML", "eval("] {
            assert!(!HTML.contains(needle), "{needle:?} in the page");
        }
        let c = csp();
        assert!(c.contains("connect-src 'self'") && !c.contains("unsafe"), "{c}");
        assert_eq!(c.matches("'sha256-").count(), 2, "{c}");
    }
}
