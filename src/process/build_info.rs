//! `sluice -V`: the build details in nginx's shape, as Tengine prints
//! them. Tools read nginx's `-V`: nginx's own test suite (`has_module`,
//! `has_version`, the TLS library's name and version), certbot's nginx
//! plugin and monitoring scripts. So after sluice's own line come the
//! nginx release whose behaviour sluice follows, the compiler, the TLS
//! library in the form nginx prints for AWS-LC, SNI, and a
//! `configure arguments:` line that names exactly the modules sluice has
//! with nginx's own flags: `--with-X` for an optional module it has,
//! `--without-X` for a default module it lacks.
//!
//! Whether sluice has a module is read from the directive tables (a
//! module's directive is there), so the line follows the code.

use super::{DEFAULT_CONF, DEFAULT_PREFIX};

/// The nginx release whose behaviour sluice follows (the reference for
/// nginx's own test suite).
pub const NGINX_VERSION: &str = "1.26.3";

/// How nginx's configure names a module.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// Built unless `--without-NAME`.
    Default,
    /// Built with `--with-NAME`.
    Optional,
}

/// One nginx module: its configure name, kind, and whether sluice has it.
struct Module {
    name: &'static str,
    kind: Kind,
    has: fn() -> bool,
}

const fn m(name: &'static str, kind: Kind, has: fn() -> bool) -> Module {
    Module { name, kind, has }
}

fn directive(name: &str) -> bool {
    crate::config::table::lookup(name).is_some()
}

use Kind::{Default as D, Optional as O};

/// nginx 1.26's http modules, in its configure's order. Upstream balancer
/// directives are parsed by the `upstream` block itself
/// (`config::upstream_block`), which has them all.
static HTTP: &[Module] = &[
    m("http_ssl_module", O, || directive("ssl_certificate")),
    m("http_v2_module", O, || directive("http2_max_concurrent_streams")),
    m("http_v3_module", O, || directive("http3")),
    m("http_realip_module", O, || directive("set_real_ip_from")),
    m("http_addition_module", O, || directive("add_before_body")),
    m("http_xslt_module", O, || directive("xslt_stylesheet")),
    m("http_image_filter_module", O, || directive("image_filter")),
    m("http_geoip_module", O, || directive("geoip_country")),
    m("http_sub_module", O, || directive("sub_filter")),
    m("http_dav_module", O, || directive("dav_methods")),
    m("http_flv_module", O, || directive("flv")),
    m("http_mp4_module", O, || directive("mp4")),
    m("http_gunzip_module", O, || directive("gunzip")),
    m("http_gzip_static_module", O, || directive("gzip_static")),
    m("http_auth_request_module", O, || directive("auth_request")),
    m("http_random_index_module", O, || directive("random_index")),
    m("http_secure_link_module", O, || directive("secure_link")),
    m("http_degradation_module", O, || directive("degradation")),
    m("http_slice_module", O, || directive("slice")),
    m("http_stub_status_module", O, || directive("stub_status")),
    m("http_perl_module", O, || directive("perl")),
    m("http_charset_module", D, || directive("charset")),
    m("http_gzip_module", D, || directive("gzip")),
    m("http_ssi_module", D, || directive("ssi")),
    m("http_userid_module", D, || directive("userid")),
    m("http_access_module", D, || directive("allow")),
    m("http_auth_basic_module", D, || directive("auth_basic")),
    m("http_mirror_module", D, || directive("mirror")),
    m("http_autoindex_module", D, || directive("autoindex")),
    m("http_geo_module", D, || directive("geo")),
    m("http_map_module", D, || directive("map")),
    m("http_split_clients_module", D, || directive("split_clients")),
    m("http_referer_module", D, || directive("valid_referers")),
    m("http_rewrite_module", D, || directive("rewrite")),
    m("http_proxy_module", D, || directive("proxy_pass")),
    m("http_fastcgi_module", D, || directive("fastcgi_pass")),
    m("http_uwsgi_module", D, || directive("uwsgi_pass")),
    m("http_scgi_module", D, || directive("scgi_pass")),
    m("http_grpc_module", D, || directive("grpc_pass")),
    m("http_memcached_module", D, || directive("memcached_pass")),
    m("http_limit_conn_module", D, || directive("limit_conn")),
    m("http_limit_req_module", D, || directive("limit_req")),
    m("http_empty_gif_module", D, || directive("empty_gif")),
    m("http_browser_module", D, || directive("modern_browser")),
    m("http_upstream_hash_module", D, || true),
    m("http_upstream_ip_hash_module", D, || true),
    m("http_upstream_least_conn_module", D, || true),
    m("http_upstream_random_module", D, || true),
    m("http_upstream_keepalive_module", D, || true),
    m("http_upstream_zone_module", D, || true),
    m("http-cache", D, || directive("proxy_cache")),
];

/// The mail and stream families: the family flag, then its modules (only
/// named when the family is there).
static MAIL: &[Module] = &[
    m("mail", O, || crate::config::family::find("mail").is_some()),
    m("mail_ssl_module", O, || mail("starttls")),
    m("mail_pop3_module", D, || mail("pop3_auth")),
    m("mail_imap_module", D, || mail("imap_auth")),
    m("mail_smtp_module", D, || mail("smtp_auth")),
];

static STREAM: &[Module] = &[
    m("stream", O, || crate::config::family::find("stream").is_some()),
    m("stream_ssl_module", O, || stream("ssl_certificate")),
    m("stream_realip_module", O, || stream("set_real_ip_from")),
    m("stream_geoip_module", O, || stream("geoip_country")),
    m("stream_ssl_preread_module", O, || stream("ssl_preread")),
    m("stream_limit_conn_module", D, || stream("limit_conn")),
    m("stream_access_module", D, || stream("allow")),
    m("stream_geo_module", D, || stream("geo")),
    m("stream_map_module", D, || stream("map")),
    m("stream_split_clients_module", D, || stream("split_clients")),
    m("stream_return_module", D, || stream("return")),
    m("stream_set_module", D, || stream("set")),
    m("stream_pass_module", D, || stream("pass")),
    // The balancers are the `upstream` block's own (shared with http).
    m("stream_upstream_hash_module", D, || stream("upstream")),
    m("stream_upstream_least_conn_module", D, || stream("upstream")),
    m("stream_upstream_random_module", D, || stream("upstream")),
    m("stream_upstream_zone_module", D, || stream("upstream")),
];

/// Whether the registered mail family has a directive.
fn mail(name: &str) -> bool {
    crate::config::family::find("mail").is_some_and(|f| f.knows(name))
}

/// Whether the registered stream family has a directive.
fn stream(name: &str) -> bool {
    crate::config::family::find("stream").is_some_and(|f| f.knows(name))
}

/// The flag for one module, or None when the default says it already.
fn flag(md: &Module) -> Option<String> {
    match (md.kind, (md.has)()) {
        (Kind::Optional, true) => Some(format!("--with-{}", md.name)),
        (Kind::Default, false) => Some(format!("--without-{}", md.name)),
        _ => None,
    }
}

/// The `configure arguments:` line's flags.
pub fn configure_arguments() -> String {
    let mut args = vec![format!("--prefix={DEFAULT_PREFIX}"), format!("--conf-path={DEFAULT_CONF}")];
    args.extend(HTTP.iter().filter_map(flag));
    for family in [MAIL, STREAM] {
        // A family's own modules are named only when it is built.
        if (family[0].has)() {
            args.extend(family.iter().filter_map(flag));
        }
    }
    args.push("--with-pcre".into());
    // `[debug]` lines and `debug_connection` (`log::debug`): test suites
    // and tools key debug-log checks on this word.
    args.push("--with-debug".into());
    args.join(" ")
}

/// `-v` and `-V` text, as nginx prints it on stderr.
pub fn version_text(full: bool) -> String {
    let mut s = format!("sluice version: sluice/{}\n", env!("CARGO_PKG_VERSION"));
    s.push_str(&format!("nginx version: nginx/{NGINX_VERSION}\n"));
    if full {
        s.push_str(&format!("built by {}\n", env!("SLUICE_RUSTC_VERSION")));
        // nginx built with AWS-LC prints the library's OpenSSL-compatible
        // version text; tools key TLS features on it.
        s.push_str(&format!(
            "built with OpenSSL 1.1.1 (compatible; AWS-LC; aws-lc-sys {}, rustls {})\n",
            env!("SLUICE_AWS_LC_SYS_VERSION"),
            env!("SLUICE_RUSTLS_VERSION")
        ));
        s.push_str("TLS SNI support enabled\n");
        s.push_str(&format!("configure arguments: {}\n", configure_arguments()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_exactly_what_the_tables_have() {
        let args = configure_arguments();
        let words: Vec<&str> = args.split(' ').collect();
        // Modules sluice has, and ones it lacks today: a change to either
        // side must change this test and the line together.
        for w in
            ["--with-http_ssl_module", "--with-http_v2_module", "--with-http_realip_module", "--with-http_sub_module"]
        {
            assert!(words.contains(&w), "{w} missing from {args}");
        }
        assert!(words.contains(&"--with-http_auth_request_module"));
        assert!(words.contains(&"--with-http_stub_status_module"));
        assert!(!args.contains("--without-http_proxy_module"));
        assert!(!args.contains("--without-http_rewrite_module"));
        assert!(words.contains(&"--with-http_v3_module"));
        for md in HTTP {
            let with = words.contains(&format!("--with-{}", md.name).as_str());
            let without = words.contains(&format!("--without-{}", md.name).as_str());
            match md.kind {
                Kind::Optional => assert_eq!(with, (md.has)(), "{}", md.name),
                Kind::Default => assert_eq!(without, !(md.has)(), "{}", md.name),
            }
            assert!(!(with && without));
        }
    }

    #[test]
    fn nginx_tests_read_it() {
        let v = version_text(true);
        assert!(v.contains("\nnginx version: nginx/1.26.3\n"));
        assert!(v.contains("TLS SNI support enabled"));
        assert!(v.contains("built with OpenSSL 1.1.1 (compatible; AWS-LC"));
        assert!(v.lines().last().unwrap_or("").starts_with("configure arguments: --prefix="));
    }
}
