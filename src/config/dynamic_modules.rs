//! `load_module`: sluice loads no shared objects, but nginx configurations
//! name nginx's dynamic modules, often without using them. Debian's stock
//! `nginx.conf` includes `modules-enabled/*.conf`, which holds a
//! `load_module` line for every `libnginx-mod-*` package installed, so a
//! machine with `nginx-full` makes an untouched configuration load the
//! GeoIP, image filter, XSLT, Perl, mail and stream modules.
//!
//! So a module sluice has built in is accepted with a notice; any other is
//! accepted with one `[warn]` naming it, and remembered for this build: a
//! directive or variable of that module is then refused with the module's
//! name and where it was loaded, instead of a bare "unknown directive".
//! A configuration that loads a module but never uses it runs.

use std::cell::RefCell;

use super::build::Ctx;
use super::model::MainConf;
use super::parser::{ConfError, Directive};
use super::set_main::arg;
use super::table::R;

/// nginx dynamic modules whose features sluice has compiled in.
const BUILT_IN: &[&str] = &[
    "ngx_http_brotli_filter_module",
    "ngx_http_brotli_static_module",
    "ngx_http_zstd_filter_module",
    "ngx_http_zstd_static_module",
    "ngx_http_cache_purge_module",
    // nginx's GeoIP modules (`crate::geoip`).
    "ngx_http_geoip_module",
    "ngx_stream_geoip_module",
    // The GeoIP2 modules (`crate::geoip2`).
    "ngx_http_geoip2_module",
    "ngx_stream_geoip2_module",
    // The image filter (`crate::http::image_filter`).
    "ngx_http_image_filter_module",
    // The stream family (`crate::stream`).
    "ngx_stream_module",
    // The mail family (`crate::mail`).
    "ngx_mail_module",
];

/// A dynamic module sluice does not have: what it is (and its Debian
/// package), its directives, and the prefix of its variables.
struct Missing {
    name: &'static str,
    what: &'static str,
    directives: &'static [&'static str],
    var_prefix: Option<&'static str>,
}

const fn miss(name: &'static str, what: &'static str) -> Missing {
    Missing { name, what, directives: &[], var_prefix: None }
}

/// nginx's own dynamic modules (Debian's `libnginx-mod-*` packages built
/// from nginx's source) with their directives and variables, then the
/// third-party modules Debian packages, whose directives sluice does not
/// list: any directive sluice lacks is refused, and the refusal names
/// them as the likely owners.
const MISSING: &[Missing] = &[
    Missing {
        name: "ngx_http_xslt_filter_module",
        what: "the XSLT filter, libnginx-mod-http-xslt-filter",
        directives: &[
            "xml_entities",
            "xslt_last_modified",
            "xslt_param",
            "xslt_string_param",
            "xslt_stylesheet",
            "xslt_types",
        ],
        var_prefix: None,
    },
    Missing {
        name: "ngx_http_perl_module",
        what: "embedded Perl, libnginx-mod-http-perl",
        directives: &["perl", "perl_modules", "perl_require", "perl_set"],
        var_prefix: None,
    },
    miss("ndk_http_module", "the Nginx Development Kit, libnginx-mod-http-ndk"),
    miss("ngx_http_auth_pam_module", "PAM authentication, libnginx-mod-http-auth-pam"),
    miss("ngx_http_dav_ext_module", "WebDAV extensions, libnginx-mod-http-dav-ext"),
    miss("ngx_http_echo_module", "echo, libnginx-mod-http-echo"),
    miss("ngx_http_fancyindex_module", "fancy indexes, libnginx-mod-http-fancyindex"),
    miss("ngx_http_headers_more_filter_module", "headers-more, libnginx-mod-http-headers-more-filter"),
    miss("ngx_http_js_module", "njs, libnginx-mod-http-js"),
    miss("ngx_http_lua_module", "Lua, libnginx-mod-http-lua"),
    miss("ngx_http_memc_module", "memc, libnginx-mod-http-memc"),
    miss("ngx_http_modsecurity_module", "ModSecurity, libnginx-mod-http-modsecurity"),
    miss("ngx_http_set_misc_module", "set-misc, libnginx-mod-http-set-misc"),
    miss("ngx_http_srcache_filter_module", "srcache, libnginx-mod-http-srcache-filter"),
    miss("ngx_http_subs_filter_module", "the substitution filter, libnginx-mod-http-subs-filter"),
    miss("ngx_http_uploadprogress_module", "upload progress, libnginx-mod-http-uploadprogress"),
    miss("ngx_http_upstream_fair_module", "the fair balancer, libnginx-mod-http-upstream-fair"),
    miss("ngx_nchan_module", "nchan, libnginx-mod-nchan"),
    miss("ngx_rtmp_module", "RTMP, libnginx-mod-rtmp"),
    miss("ngx_stream_js_module", "stream njs, libnginx-mod-stream-js"),
];

/// A module this configuration loads that sluice lacks.
struct Loaded {
    name: String,
    what: String,
    /// `FILE:LINE` of its `load_module`.
    at: String,
    known: Option<&'static Missing>,
}

thread_local! {
    /// The build in progress's loaded-but-missing modules (a configuration
    /// is built on one thread; `reset` starts each build).
    static LOADED: RefCell<Vec<Loaded>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the modules of a previous build.
pub fn reset() {
    LOADED.with(|l| l.borrow_mut().clear());
}

/// `load_module file`.
pub fn load_module(_: &mut MainConf, d: &Directive, ctx: &mut Ctx) -> R {
    let file = arg(d, 0);
    let base = file.rsplit('/').next().unwrap_or(file);
    let name = base.strip_suffix(".so").unwrap_or(base);
    if BUILT_IN.contains(&name) {
        let msg = format!("load_module \"{file}\": {name} is built into sluice, nothing to load");
        ctx.notices.push(ConfError::at(msg, &d.span).to_string());
        return Ok(());
    }
    let known = MISSING.iter().find(|m| m.name == name);
    let what = known.map(|m| format!(" ({})", m.what)).unwrap_or_default();
    let uses = match known {
        Some(m) if !m.directives.is_empty() || m.var_prefix.is_some() => "its directives and variables are refused",
        _ => "its directives are unknown to sluice",
    };
    let msg = format!("load_module \"{file}\": sluice has no module \"{name}\"{what}; not loaded, {uses}");
    ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
    let at = format!("{}:{}", d.span.file.display(), d.span.line);
    let what = known.map(|m| m.what.to_string()).unwrap_or_default();
    LOADED.with(|l| l.borrow_mut().push(Loaded { name: name.to_string(), what, at, known }));
    Ok(())
}

fn describe(l: &Loaded) -> String {
    let what = if l.what.is_empty() { String::new() } else { format!(" ({})", l.what) };
    format!("module \"{}\"{what}, which sluice does not have (load_module in {})", l.name, l.at)
}

/// Why `name`, a directive sluice does not know, is refused, when this
/// configuration loads a module sluice lacks: the module that owns it, or
/// the third-party modules that may.
pub fn directive_hint(name: &str) -> Option<String> {
    LOADED.with(|l| {
        let l = l.borrow();
        if let Some(m) = l.iter().find(|m| m.known.is_some_and(|k| k.directives.contains(&name))) {
            return Some(format!(": a directive of {}", describe(m)));
        }
        let unlisted: Vec<&Loaded> = l.iter().filter(|m| m.known.is_none_or(|k| k.directives.is_empty())).collect();
        if unlisted.is_empty() {
            return None;
        }
        let names: Vec<String> = unlisted.iter().map(|m| format!("\"{}\" (load_module in {})", m.name, m.at)).collect();
        Some(format!(" (perhaps of a module sluice does not have: {})", names.join(", ")))
    })
}

/// The same for a variable: `$geoip_country_code` names the GeoIP module
/// when it is loaded.
pub fn variable_hint(name: &str) -> Option<String> {
    LOADED.with(|l| {
        let l = l.borrow();
        let owner = l.iter().find(|m| {
            m.known.and_then(|k| k.var_prefix).is_some_and(|p| name.len() > p.len() && name.starts_with(p))
        })?;
        Some(format!(": a variable of {}", describe(owner)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_directive_is_unknown_to_sluice() {
        // A module that gains support leaves this list (and goes to
        // BUILT_IN or nowhere): its directives must not be refused.
        for m in MISSING {
            for d in m.directives {
                assert!(super::super::table::lookup(d).is_none(), "{d} of {} is supported now", m.name);
            }
        }
    }
}
