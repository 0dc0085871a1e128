//! Location lookup, a port of nginx's `ngx_http_core_find_location`:
//! exact match wins; otherwise the longest prefix is remembered and its
//! nested locations are searched; then, unless that prefix was `^~`, the
//! level's regexes are tried in order (a match also searches its nested
//! locations); otherwise the remembered prefix is used.

use std::sync::Arc;

use crate::config::model::{Location, Locations, Matcher};

enum Found<'a> {
    Final(&'a Arc<Location>),
    Partial(Option<&'a Arc<Location>>),
    /// nginx's `NGX_DONE`: the URI is a location's name without its
    /// trailing slash, and that location passes requests to an origin
    /// (`proxy_pass`, `fastcgi_pass`, ...): the client is redirected to the
    /// name with the slash, before any regex location is tried.
    AutoRedirect(&'a Arc<Location>),
}

/// What the find-config phase found.
pub enum Lookup<'a> {
    /// The location (None: the server level).
    Location(Option<&'a Arc<Location>>),
    /// A 301 to this location's name (nginx's auto redirect).
    AutoRedirect(&'a Arc<Location>),
}

/// A location whose name ends with `/` and whose handler is an origin's
/// (nginx's `clcf->auto_redirect`, set by `proxy_pass`, `fastcgi_pass`,
/// `uwsgi_pass`, `scgi_pass`).
fn auto_redirects(l: &Location) -> bool {
    crate::http::proxy::has_handler(&l.conf)
}

/// The level has no prefix or exact location named `uri`, and one named
/// `uri` + `/` that redirects.
fn auto_redirect<'a>(locs: &'a Locations, uri: &[u8]) -> Option<&'a Arc<Location>> {
    let name = |l: &'a Arc<Location>| match &l.matcher {
        Matcher::Exact(p) | Matcher::Prefix { path: p, .. } => Some(p.as_slice()),
        _ => None,
    };
    let all = || locs.exact.iter().chain(locs.prefix.iter());
    if all().any(|l| name(l) == Some(uri)) {
        return None;
    }
    all().find(|l| {
        name(l).is_some_and(|p| p.len() == uri.len() + 1 && p.ends_with(b"/") && p.starts_with(uri))
            && auto_redirects(l)
    })
}

fn find_level<'a>(locs: &'a Locations, uri: &[u8]) -> Found<'a> {
    for l in &locs.exact {
        if matches!(&l.matcher, Matcher::Exact(p) if p.as_slice() == uri) {
            return Found::Final(l);
        }
    }
    if let Some(l) = auto_redirect(locs, uri) {
        return Found::AutoRedirect(l);
    }
    let mut current = None;
    let mut noregex = false;
    let longest =
        locs.prefix.iter().find(|l| matches!(&l.matcher, Matcher::Prefix { path, .. } if uri.starts_with(path)));
    if let Some(p) = longest {
        current = Some(p);
        noregex = matches!(p.matcher, Matcher::Prefix { noregex: true, .. });
        if !p.children.is_empty() {
            match find_level(&p.children, uri) {
                Found::Final(l) => return Found::Final(l),
                Found::AutoRedirect(l) => return Found::AutoRedirect(l),
                Found::Partial(Some(q)) => current = Some(q),
                Found::Partial(None) => {}
            }
        }
    }
    if !noregex {
        for r in &locs.regex {
            if let Matcher::Regex(re) = &r.matcher
                && re.is_match(uri)
            {
                if !r.children.is_empty() {
                    match find_level(&r.children, uri) {
                        Found::Final(l) | Found::Partial(Some(l)) | Found::AutoRedirect(l) => {
                            return Found::Final(l);
                        }
                        Found::Partial(None) => {}
                    }
                }
                return Found::Final(r);
            }
        }
    }
    Found::Partial(current)
}

/// The location for `uri` (normalized path), or None to use the server level.
pub fn find<'a>(locs: &'a Locations, uri: &[u8]) -> Option<&'a Arc<Location>> {
    match lookup(locs, uri) {
        Lookup::Location(l) => l,
        Lookup::AutoRedirect(l) => Some(l),
    }
}

/// The location for `uri`, or nginx's auto redirect.
pub fn lookup<'a>(locs: &'a Locations, uri: &[u8]) -> Lookup<'a> {
    match find_level(locs, uri) {
        Found::Final(l) => Lookup::Location(Some(l)),
        Found::Partial(l) => Lookup::Location(l),
        Found::AutoRedirect(l) => Lookup::AutoRedirect(l),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, Source, load};

    fn server_locs(body: &str) -> crate::config::Config {
        let text = format!("events {{}} http {{ server {{ listen 127.0.0.1:1; {body} }} }}");
        load(&LoadOptions {
            prefix: "/tmp".into(),
            source: Source::Text { name: "/tmp/test.conf".into(), text },
            globals: None,
            error_log: None,
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Names each location by its `return` text so tests can say which won.
    fn which(cfg: &crate::config::Config, uri: &str) -> String {
        let s = &cfg.http.servers[0];
        match find(&s.locations, uri.as_bytes()) {
            None => "server".into(),
            Some(l) => {
                let t = l
                    .conf
                    .rewrite
                    .script
                    .as_ref()
                    .and_then(|s| s.first_return())
                    .and_then(|r| r.text.as_ref())
                    .and_then(|t| t.as_literal());
                String::from_utf8_lossy(t.unwrap_or(b"?")).into_owned()
            }
        }
    }

    #[test]
    fn nginx_documentation_example() {
        let cfg = server_locs(
            r#"
            location = / { return 200 A; }
            location / { return 200 B; }
            location /documents/ { return 200 C; }
            location ^~ /images/ { return 200 D; }
            location ~* \.(gif|jpg|jpeg)$ { return 200 E; }
        "#,
        );
        assert_eq!(which(&cfg, "/"), "A");
        assert_eq!(which(&cfg, "/index.html"), "B");
        assert_eq!(which(&cfg, "/documents/document.html"), "C");
        assert_eq!(which(&cfg, "/images/1.gif"), "D");
        assert_eq!(which(&cfg, "/documents/1.jpg"), "E");
        assert_eq!(which(&cfg, "/documents/1.JPG"), "E");
    }

    #[test]
    fn longest_prefix_and_regex_order() {
        let cfg = server_locs(
            r#"
            location /a { return 200 a; }
            location /a/b { return 200 ab; }
            location ~ ^/a/b/c { return 200 re1; }
            location ~ /c { return 200 re2; }
        "#,
        );
        assert_eq!(which(&cfg, "/a/x"), "a");
        assert_eq!(which(&cfg, "/a/bx"), "ab");
        assert_eq!(which(&cfg, "/a/b/c"), "re1");
        assert_eq!(which(&cfg, "/x/c"), "re2");
        assert_eq!(which(&cfg, "/zzz"), "server");
    }

    #[test]
    fn nested_locations() {
        let cfg = server_locs(
            r#"
            location /outer/ {
                return 200 outer;
                location /outer/inner/ { return 200 inner; }
                location ~ \.php$ { return 200 nested-re; }
            }
            location ~ \.php$ { return 200 top-re; }
            location ^~ /static/ {
                location ~ \.css$ { return 200 css; }
                return 200 static;
            }
        "#,
        );
        assert_eq!(which(&cfg, "/outer/x"), "outer");
        assert_eq!(which(&cfg, "/outer/inner/x"), "inner");
        assert_eq!(which(&cfg, "/outer/x.php"), "nested-re");
        assert_eq!(which(&cfg, "/x.php"), "top-re");
        assert_eq!(which(&cfg, "/static/a.css"), "css");
        assert_eq!(which(&cfg, "/static/a.php"), "static");
    }

    #[test]
    fn exact_beats_prefix_of_same_path() {
        let cfg = server_locs("location /x { return 200 p; } location = /x { return 200 e; }");
        assert_eq!(which(&cfg, "/x"), "e");
        assert_eq!(which(&cfg, "/xy"), "p");
    }
}
