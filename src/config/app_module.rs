//! What nginx's application-server modules that speak CGI's variables
//! over one connection per request have alike (uwsgi, SCGI): the
//! per-location settings ([`AppConf`]) and, from [`app_directives!`], the
//! module's directive table and setters: `X_pass` (an address or an
//! upstream, as `fastcgi_pass`), `X_param`, `X_pass_request_headers`,
//! `X_pass_request_body`, and the settings shared with the reverse proxy
//! (through [`crate::upstream_directives!`]). A module adds what is its
//! own (uwsgi's modifiers) in a table of its own.

use crate::config::proxy::{Pass, UpstreamConf};
use crate::http::fastcgi::conf::Param;

/// The per-location settings of an application-server module.
#[derive(Clone)]
pub struct AppConf {
    /// `X_pass`: the content handler, not inherited.
    pub pass: Option<Pass>,
    pub params: Vec<Param>,
    pub pass_request_headers: bool,
    pub pass_request_body: bool,
    /// uwsgi's packet header modifiers (0 and 0: a WSGI request); SCGI
    /// has none.
    pub modifier1: u8,
    pub modifier2: u8,
    /// `uwsgi_ssl_*`: TLS to a `suwsgi://` origin (SCGI has none).
    pub ssl: crate::config::upstream_ssl::UpstreamSsl,
    /// What the upstream core reads (shared with `proxy_*`).
    pub up: UpstreamConf,
}

impl AppConf {
    /// nginx's defaults, temporary files under `PREFIX/<temp>`.
    pub fn new(prefix: &std::path::Path, temp: &str) -> AppConf {
        AppConf {
            pass: None,
            params: Vec::new(),
            pass_request_headers: true,
            pass_request_body: true,
            modifier1: 0,
            modifier2: 0,
            ssl: Default::default(),
            // nginx has no uwsgi_/scgi_cache_convert_head: a HEAD reaches
            // the application as HEAD.
            up: UpstreamConf {
                cache: crate::http::cache::conf::CacheConf { convert_head: false, ..Default::default() },
                ..UpstreamConf::new(prefix.join(temp))
            },
        }
    }
}

/// The module's directives, for settings in `LocConf::$field` named with
/// the prefix `$p` (a string literal: `"uwsgi"`), its targets marked
/// `$protocol`. Generates `pub static DIRECTIVES` in the calling module.
#[macro_export]
macro_rules! app_directives {
    ($field:ident, $p:literal, $protocol:expr) => {
        $crate::upstream_directives!(up, $field);

        use $crate::config::table::{Cmd, HSL, LOC, Set, cmd, list};

        pub static DIRECTIVES: &[Cmd] = &[
            cmd(concat!($p, "_pass"), LOC, 1, 1, Set::Loc(app::pass)),
            list(cmd(concat!($p, "_param"), HSL, 2, 3, Set::Loc(app::param)), app::reset_params),
            cmd(concat!($p, "_pass_request_headers"), HSL, 1, 1, Set::Loc(app::pass_request_headers)),
            cmd(concat!($p, "_pass_request_body"), HSL, 1, 1, Set::Loc(app::pass_request_body)),
            cmd(concat!($p, "_connect_timeout"), HSL, 1, 1, Set::Loc(up::connect_timeout)),
            cmd(concat!($p, "_send_timeout"), HSL, 1, 1, Set::Loc(up::send_timeout)),
            cmd(concat!($p, "_read_timeout"), HSL, 1, 1, Set::Loc(up::read_timeout)),
            cmd(concat!($p, "_next_upstream"), HSL, 1, 12, Set::Loc(up::next_upstream)),
            cmd(concat!($p, "_next_upstream_tries"), HSL, 1, 1, Set::Loc(up::next_upstream_tries)),
            cmd(concat!($p, "_next_upstream_timeout"), HSL, 1, 1, Set::Loc(up::next_upstream_timeout)),
            cmd(concat!($p, "_buffering"), HSL, 1, 1, Set::Loc(up::buffering)),
            cmd(concat!($p, "_request_buffering"), HSL, 1, 1, Set::Loc(up::request_buffering)),
            cmd(concat!($p, "_buffer_size"), HSL, 1, 1, Set::Loc(up::buffer_size)),
            cmd(concat!($p, "_buffers"), HSL, 2, 2, Set::Loc(up::buffers)),
            cmd(concat!($p, "_busy_buffers_size"), HSL, 1, 1, Set::Loc(up::busy_buffers_size)),
            cmd(concat!($p, "_temp_file_write_size"), HSL, 1, 1, Set::Loc(up::temp_file_write_size)),
            cmd(concat!($p, "_max_temp_file_size"), HSL, 1, 1, Set::Loc(up::max_temp_file_size)),
            cmd(concat!($p, "_temp_path"), HSL, 1, 4, Set::Loc(up::temp_path)),
            cmd(concat!($p, "_intercept_errors"), HSL, 1, 1, Set::Loc(up::intercept_errors)),
            cmd(concat!($p, "_force_ranges"), HSL, 1, 1, Set::Loc(up::force_ranges)),
            cmd(concat!($p, "_bind"), HSL, 1, 2, Set::Loc(up::bind)),
            cmd(concat!($p, "_limit_rate"), HSL, 1, 1, Set::Loc(up::limit_rate)),
            cmd(concat!($p, "_store"), HSL, 1, 1, Set::Loc(up::store)),
            cmd(concat!($p, "_store_access"), HSL, 1, 3, Set::Loc(up::store_access)),
            cmd(concat!($p, "_ignore_client_abort"), HSL, 1, 1, Set::Loc(up::ignore_client_abort)),
            list(cmd(concat!($p, "_hide_header"), HSL, 1, 1, Set::Loc(up::hide_header)), up::reset_hide_headers),
            list(cmd(concat!($p, "_pass_header"), HSL, 1, 1, Set::Loc(up::pass_header)), up::reset_pass_headers),
            // nginx's SO_KEEPALIVE on origin sockets; sluice leaves it to
            // the kernel.
            cmd(concat!($p, "_socket_keepalive"), HSL, 1, 1, Set::Ctx(app::on_off)),
        ];

        mod app {
            use $crate::config::build::Ctx;
            use $crate::config::model::LocConf;
            use $crate::config::parser::{ConfError, Directive};
            use $crate::config::set_main::{arg, flag};
            use $crate::config::table::R;

            pub fn reset_params(c: &mut LocConf) {
                c.$field.params.clear();
            }

            /// `X_pass ADDRESS`: `host:port`, `unix:/path`, an upstream
            /// name, or any of these with variables; a `uwsgi://` scheme is
            /// taken off before (uwsgi's own), any other refused as nginx.
            pub fn pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
                if c.$field.pass.is_some() {
                    return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
                }
                let written = arg(d, 0);
                // uwsgi's schemes: `uwsgi://`, and `suwsgi://` for TLS; with
                // variables the scheme is read per request.
                let (raw, tls) = if $p != "uwsgi" {
                    (written, false)
                } else if let Some(r) = written.strip_prefix("suwsgi://") {
                    (r, true)
                } else {
                    (written.strip_prefix("uwsgi://").unwrap_or(written), false)
                };
                if raw.contains("://") && !raw.contains('$') {
                    return Err(ConfError::at(format!("invalid host in upstream \"{written}\""), &d.span));
                }
                let raw = if raw.contains('$') { written } else { raw };
                let mut pass = $crate::http::fastcgi::conf::parse_pass(raw, d, ctx, $protocol)?;
                if let (true, $crate::config::proxy::Pass::Fixed(p)) = (tls, &mut pass) {
                    if raw.starts_with("unix:") {
                        let why = format!("TLS to a unix socket is not supported in \"{written}\"");
                        return Err(ConfError::at(why, &d.span));
                    }
                    // Just made by parse_pass, so not shared yet.
                    if let Some(p) = std::sync::Arc::get_mut(p) {
                        p.tls = true;
                        p.proxy_host = raw.to_string();
                    }
                }
                c.clear_handlers();
                c.$field.pass = Some(pass);
                Ok(())
            }

            pub fn param(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
                let p = $crate::http::fastcgi::conf::parse_param(d, ctx)?;
                c.$field.params.push(p);
                Ok(())
            }

            pub fn pass_request_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                c.$field.pass_request_headers = flag(d)?;
                Ok(())
            }

            pub fn pass_request_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                c.$field.pass_request_body = flag(d)?;
                Ok(())
            }

            pub fn on_off(d: &Directive, _: &mut Ctx) -> R {
                flag(d).map(|_| ())
            }
        }
    };
}
