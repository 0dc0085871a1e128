//! The directive table, in the spirit of nginx's `ngx_command_t` arrays:
//! each supported directive with the contexts it may appear in, how many
//! arguments it takes and the setter that validates and stores them. The
//! builder consults this table for every directive; anything not listed is
//! refused with nginx's `unknown directive` message.

use std::collections::HashMap;

use super::build::{Ctx, ServerBuild};
use super::model::{LocConf, MainConf};
use super::parser::{ConfError, Directive};
use super::{proxy, set_loc, set_main, set_process, set_server, set_ssl};

pub const MAIN: u8 = 1;
pub const EVENTS: u8 = 2;
pub const HTTP: u8 = 4;
pub const SRV: u8 = 8;
pub const LOC: u8 = 16;
/// Inside a server-level `if` block (nginx's NGX_HTTP_SIF_CONF).
pub const SIF: u8 = 32;
/// Inside a location-level `if` block (NGX_HTTP_LIF_CONF): the directives
/// nginx allows in the implicit nested location.
pub const LIF: u8 = 64;
/// Inside `limit_except` (NGX_HTTP_LMT_CONF).
pub const LMT: u8 = 128;
pub const HSL: u8 = HTTP | SRV | LOC;

pub type R = Result<(), ConfError>;

pub enum Set {
    Main(fn(&mut MainConf, &Directive, &mut Ctx) -> R),
    /// Valid at main level and below (`error_log`): the level's settings
    /// when it has them, else main's.
    Any(fn(&mut MainConf, Option<&mut LocConf>, &Directive, &mut Ctx) -> R),
    Loc(fn(&mut LocConf, &Directive, &mut Ctx) -> R),
    Server(fn(&mut ServerBuild, &Directive, &mut Ctx) -> R),
    /// Directives that only register something in the builder (log_format).
    Ctx(fn(&Directive, &mut Ctx) -> R),
    /// events, http, server, location: walked by the builder.
    Block,
    /// The rewrite module's `rewrite`, `return`, `set`, `break` and `if`:
    /// checked here, compiled in order by `rewrite::compile` once the level
    /// is complete.
    Script,
    /// Accepted for compatibility; documented as having no effect.
    Noop,
}

pub struct Cmd {
    pub name: &'static str,
    pub ctx: u8,
    pub min: usize,
    pub max: usize,
    pub block: bool,
    /// May appear more than once per level (lists such as `listen`).
    pub multi: bool,
    /// For list directives that replace, not extend, the inherited list
    /// when first used at a level (nginx: add_header, error_page, ...).
    pub reset: Option<fn(&mut LocConf)>,
    pub set: Set,
}

pub const MANY: usize = usize::MAX;

pub const fn cmd(name: &'static str, ctx: u8, min: usize, max: usize, set: Set) -> Cmd {
    Cmd { name, ctx, min, max, block: false, multi: false, reset: None, set }
}

pub const fn block(name: &'static str, ctx: u8, min: usize, max: usize) -> Cmd {
    Cmd { name, ctx, min, max, block: true, multi: true, reset: None, set: Set::Block }
}

pub const fn multi(c: Cmd) -> Cmd {
    Cmd { multi: true, ..c }
}

pub const fn list(c: Cmd, reset: fn(&mut LocConf)) -> Cmd {
    Cmd { multi: true, reset: Some(reset), ..c }
}

/// The core directives; modules that own their directives (a cache, a
/// filter, the rewrite module) keep their rows in a table of their own,
/// listed in [`TABLES`].
pub static CORE: &[Cmd] = &[
    // main
    cmd("worker_processes", MAIN, 1, 1, Set::Main(set_main::worker_processes)),
    cmd("worker_cpu_affinity", MAIN, 1, MANY, Set::Main(set_main::worker_cpu_affinity)),
    cmd("worker_rlimit_nofile", MAIN, 1, 1, Set::Main(set_main::worker_rlimit_nofile)),
    cmd("pid", MAIN, 1, 1, Set::Main(set_main::pid)),
    list(cmd("error_log", MAIN | HSL, 1, 2, Set::Any(set_main::error_log)), set_main::reset_error_log),
    cmd("daemon", MAIN, 1, 1, Set::Main(set_main::daemon)),
    cmd("user", MAIN, 1, 2, Set::Main(set_main::user)),
    multi(cmd("load_module", MAIN, 1, 1, Set::Main(super::dynamic_modules::load_module))),
    cmd("master_process", MAIN, 1, 1, Set::Main(set_process::master_process)),
    cmd("worker_shutdown_timeout", MAIN, 1, 1, Set::Main(set_process::worker_shutdown_timeout)),
    multi(cmd("env", MAIN, 1, 1, Set::Main(set_process::env))),
    cmd("pcre_jit", MAIN, 1, 1, Set::Main(set_process::pcre_jit)),
    cmd("timer_resolution", MAIN, 1, 1, Set::Main(set_process::timer_resolution)),
    cmd("worker_priority", MAIN, 1, 1, Set::Main(set_process::worker_priority)),
    cmd("worker_rlimit_core", MAIN, 1, 1, Set::Main(set_process::worker_rlimit_core)),
    cmd("working_directory", MAIN, 1, 1, Set::Main(set_process::working_directory)),
    // nginx on Linux locks with atomics; the file is never created.
    cmd("lock_file", MAIN, 1, 1, Set::Noop),
    multi(cmd("thread_pool", MAIN, 2, MANY, Set::Main(set_process::thread_pool))),
    cmd("ssl_engine", MAIN, 1, 1, Set::Main(set_process::ssl_engine)),
    block("events", MAIN, 0, 0),
    block("http", MAIN, 0, 0),
    // events
    cmd("worker_connections", EVENTS, 1, 1, Set::Main(set_main::worker_connections)),
    cmd("reuse_port", EVENTS, 1, 1, Set::Main(set_main::reuse_port)),
    cmd("accept_mutex", EVENTS, 1, 1, Set::Noop),
    cmd("accept_mutex_delay", EVENTS, 1, 1, Set::Noop),
    cmd("multi_accept", EVENTS, 1, 1, Set::Noop),
    cmd("use", EVENTS, 1, 1, Set::Main(set_process::use_events)),
    multi(cmd("debug_connection", EVENTS, 1, 1, Set::Main(set_process::debug_connection))),
    cmd("worker_aio_requests", EVENTS, 1, 1, Set::Main(set_process::events_number)),
    cmd("epoll_events", EVENTS, 1, 1, Set::Main(set_process::events_number)),
    // http
    block("server", HTTP, 0, 0),
    list(block("types", HSL, 0, 0), set_loc::reset_types),
    multi(cmd("log_format", HTTP, 2, MANY, Set::Ctx(set_loc::log_format))),
    cmd("default_type", HSL, 1, 1, Set::Loc(set_loc::default_type)),
    list(cmd("access_log", HSL | LIF | LMT, 1, 5, Set::Loc(set_loc::access_log)), set_loc::reset_access_log),
    cmd("sendfile", HSL | LIF, 1, 1, Set::Loc(set_loc::sendfile)),
    cmd("sendfile_max_chunk", HSL, 1, 1, Set::Loc(set_loc::sendfile_max_chunk)),
    cmd("tcp_nopush", HSL, 1, 1, Set::Loc(set_loc::tcp_nopush)),
    cmd("tcp_nodelay", HSL, 1, 1, Set::Loc(set_loc::tcp_nodelay)),
    cmd("keepalive_timeout", HSL, 1, 2, Set::Loc(set_loc::keepalive_timeout)),
    cmd("keepalive_time", HSL, 1, 1, Set::Loc(set_loc::keepalive_time)),
    cmd("keepalive_requests", HSL, 1, 1, Set::Loc(set_loc::keepalive_requests)),
    cmd("server_tokens", HSL, 1, 1, Set::Loc(set_loc::server_tokens)),
    cmd("client_header_buffer_size", HTTP | SRV, 1, 1, Set::Loc(set_loc::client_header_buffer_size)),
    cmd("large_client_header_buffers", HTTP | SRV, 2, 2, Set::Loc(set_loc::large_client_header_buffers)),
    cmd("client_max_body_size", HSL, 1, 1, Set::Loc(set_loc::client_max_body_size)),
    cmd("client_header_timeout", HTTP | SRV, 1, 1, Set::Loc(set_loc::client_header_timeout)),
    cmd("client_body_timeout", HSL, 1, 1, Set::Loc(set_loc::client_body_timeout)),
    cmd("client_body_buffer_size", HSL, 1, 1, Set::Loc(set_loc::client_body_buffer_size)),
    cmd("client_body_temp_path", HSL, 1, 4, Set::Loc(set_loc::client_body_temp_path)),
    cmd("client_body_in_file_only", HSL, 1, 1, Set::Loc(set_loc::client_body_in_file_only)),
    cmd("proxy_ignore_client_abort", HSL, 1, 1, Set::Loc(proxy::proxy_up::ignore_client_abort)),
    cmd("proxy_force_ranges", HSL, 1, 1, Set::Loc(proxy::proxy_up::force_ranges)),
    cmd("send_timeout", HSL, 1, 1, Set::Loc(set_loc::send_timeout)),
    cmd("open_file_cache", HSL, 1, 2, Set::Loc(set_loc::open_file_cache)),
    cmd("open_file_cache_valid", HSL, 1, 1, Set::Loc(set_loc::open_file_cache_valid)),
    cmd("open_file_cache_min_uses", HSL, 1, 1, Set::Loc(set_loc::open_file_cache_min_uses)),
    cmd("open_file_cache_errors", HSL, 1, 1, Set::Loc(set_loc::open_file_cache_errors)),
    cmd("output_buffers", HSL, 2, 2, Set::Loc(set_loc::output_buffers)),
    cmd("postpone_output", HSL, 1, 1, Set::Loc(set_loc::postpone_output)),
    cmd("subrequest_output_buffer_size", HSL, 1, 1, Set::Loc(set_loc::subrequest_output_buffer_size)),
    cmd("etag", HSL, 1, 1, Set::Loc(set_loc::etag)),
    cmd("if_modified_since", HSL, 1, 1, Set::Loc(set_loc::if_modified_since)),
    // server
    multi(cmd("listen", SRV, 1, MANY, Set::Server(set_server::listen))),
    multi(cmd("server_name", SRV, 1, MANY, Set::Server(set_server::server_name))),
    block("location", SRV | LOC, 1, 2),
    // content and per-location behaviour
    cmd("root", HSL | LIF, 1, 1, Set::Loc(set_loc::root)),
    cmd("alias", LOC, 1, 1, Set::Loc(set_loc::alias)),
    list(cmd("index", HSL, 1, MANY, Set::Loc(set_loc::index)), set_loc::reset_index),
    cmd("try_files", SRV | LOC, 2, MANY, Set::Loc(set_loc::try_files)),
    list(cmd("error_page", HSL | LIF, 2, MANY, Set::Loc(set_loc::error_page)), set_loc::reset_error_page),
    list(cmd("add_header", HSL | LIF, 2, 3, Set::Loc(set_loc::add_header)), set_loc::reset_add_header),
    list(cmd("add_trailer", HSL | LIF, 2, 3, Set::Loc(set_loc::add_trailer)), set_loc::reset_add_trailer),
    cmd("expires", HSL | LIF, 1, 2, Set::Loc(set_loc::expires)),
    cmd("empty_gif", LOC, 0, 0, Set::Loc(set_loc::empty_gif)),
    cmd("check_status", SRV | LOC, 0, 1, Set::Loc(crate::upstream::check::status::directive)),
    cmd("log_not_found", HSL, 1, 1, Set::Loc(set_loc::log_not_found)),
    cmd("log_subrequest", HSL, 1, 1, Set::Loc(set_loc::log_subrequest)),
    // TLS (http and server levels, as in nginx)
    cmd("ssl", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ssl)),
    list(cmd("ssl_certificate", HTTP | SRV, 1, 1, Set::Loc(set_ssl::certificate)), set_ssl::reset_certificates),
    list(cmd("ssl_certificate_key", HTTP | SRV, 1, 1, Set::Loc(set_ssl::certificate_key)), set_ssl::reset_keys),
    cmd("ssl_password_file", HTTP | SRV, 1, 1, Set::Loc(set_ssl::password_file)),
    cmd("ssl_certificate_cache", HTTP | SRV, 1, 3, Set::Loc(set_ssl::certificate_cache)),
    cmd("ssl_protocols", HTTP | SRV, 1, MANY, Set::Loc(set_ssl::protocols)),
    cmd("ssl_ciphers", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ciphers)),
    cmd("ssl_prefer_server_ciphers", HTTP | SRV, 1, 1, Set::Loc(set_ssl::prefer_server_ciphers)),
    cmd("ssl_ecdh_curve", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ecdh_curve)),
    cmd("ssl_session_cache", HTTP | SRV, 1, 2, Set::Loc(set_ssl::session_cache)),
    cmd("ssl_session_timeout", HTTP | SRV, 1, 1, Set::Loc(set_ssl::session_timeout)),
    cmd("ssl_session_tickets", HTTP | SRV, 1, 1, Set::Loc(set_ssl::session_tickets)),
    list(
        cmd("ssl_session_ticket_key", HTTP | SRV, 1, 1, Set::Loc(set_ssl::session_ticket_key)),
        set_ssl::reset_ticket_keys,
    ),
    list(cmd("ssl_conf_command", HTTP | SRV, 2, 2, Set::Loc(set_ssl::conf_command)), set_ssl::reset_conf_commands),
    cmd("ssl_early_data", HTTP | SRV, 1, 1, Set::Loc(set_ssl::early_data)),
    cmd("ssl_stapling", HTTP | SRV, 1, 1, Set::Loc(set_ssl::stapling)),
    cmd("ssl_stapling_file", HTTP | SRV, 1, 1, Set::Loc(set_ssl::stapling_file)),
    cmd("ssl_stapling_verify", HTTP | SRV, 1, 1, Set::Loc(set_ssl::stapling_verify)),
    cmd("ssl_stapling_responder", HTTP | SRV, 1, 1, Set::Loc(set_ssl::stapling_responder)),
    cmd("ssl_reject_handshake", HTTP | SRV, 1, 1, Set::Loc(set_ssl::reject_handshake)),
    cmd("ssl_client_certificate", HTTP | SRV, 1, 1, Set::Loc(set_ssl::client_certificate)),
    cmd("ssl_crl", HTTP | SRV, 1, 1, Set::Loc(set_ssl::crl)),
    cmd("ssl_ocsp", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ocsp)),
    cmd("ssl_ocsp_responder", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ocsp_responder)),
    cmd("ssl_ocsp_cache", HTTP | SRV, 1, 1, Set::Loc(set_ssl::ocsp_cache)),
    cmd("ssl_verify_client", HTTP | SRV, 1, 1, Set::Loc(set_ssl::verify_client)),
    cmd("ssl_verify_depth", HTTP | SRV, 1, 1, Set::Loc(set_ssl::verify_depth)),
    // OpenSSL knobs with no rustls counterpart (no DHE suites; record sizes
    // are rustls's own): accepted so existing configs run, documented.
    cmd("ssl_dhparam", HTTP | SRV, 1, 1, Set::Noop),
    cmd("ssl_buffer_size", HTTP | SRV, 1, 1, Set::Noop),
    cmd("ssl_trusted_certificate", HTTP | SRV, 1, 1, Set::Loc(set_ssl::trusted_certificate)),
    // HTTP/3: refused with a message saying so (nginx 1.25's names).
    // HTTP/2
    cmd("http2", HTTP | SRV, 1, 1, Set::Loc(set_ssl::http2)),
    cmd("http2_max_concurrent_streams", HTTP | SRV, 1, 1, Set::Loc(set_ssl::http2_max_concurrent_streams)),
    cmd("http2_max_requests", HTTP | SRV, 1, 1, Set::Loc(set_ssl::http2_max_requests)),
    cmd("http2_recv_buffer_size", HTTP, 1, 1, Set::Loc(set_ssl::http2_recv_buffer_size)),
    cmd("http2_chunk_size", HSL, 1, 1, Set::Loc(set_ssl::http2_chunk_size)),
    cmd("http2_body_preread_size", HTTP | SRV, 1, 1, Set::Loc(set_ssl::http2_body_preread_size)),
    cmd("http2_idle_timeout", HTTP | SRV, 1, 1, Set::Loc(set_ssl::http2_idle_timeout)),
    cmd("http2_push", HSL, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    cmd("http2_push_preload", HSL, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    cmd("http2_max_field_size", HTTP | SRV, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    cmd("http2_max_header_size", HTTP | SRV, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    cmd("http2_recv_timeout", HTTP | SRV, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    cmd("http2_max_concurrent_pushes", HTTP | SRV, 1, 1, Set::Ctx(set_ssl::http2_obsolete)),
    // reverse proxy (the `upstream` block's own directives are parsed by
    // config::upstream_block)
    block("upstream", HTTP, 1, 1),
    block("map", HTTP, 2, 2),
    block("limit_except", LOC, 1, MANY),
    block("geo", HTTP, 1, 2),
    block("split_clients", HTTP, 2, 2),
    cmd("proxy_pass", LOC | LIF | LMT, 1, 1, Set::Loc(proxy::proxy_pass)),
    list(cmd("proxy_set_header", HSL, 2, 2, Set::Loc(proxy::proxy_set_header)), proxy::reset_set_headers),
    list(
        cmd("proxy_hide_header", HSL, 1, 1, Set::Loc(proxy::proxy_up::hide_header)),
        proxy::proxy_up::reset_hide_headers,
    ),
    list(
        cmd("proxy_pass_header", HSL, 1, 1, Set::Loc(proxy::proxy_up::pass_header)),
        proxy::proxy_up::reset_pass_headers,
    ),
    cmd("proxy_http_version", HSL, 1, 1, Set::Loc(proxy::proxy_http_version)),
    cmd("proxy_protocol", HSL, 1, 1, Set::Loc(proxy::proxy_protocol)),
    cmd("proxy_method", HSL, 1, 1, Set::Loc(proxy::proxy_method)),
    cmd("proxy_set_body", HSL, 1, 1, Set::Loc(proxy::proxy_set_body)),
    cmd("proxy_pass_request_headers", HSL, 1, 1, Set::Loc(proxy::proxy_pass_request_headers)),
    cmd("proxy_pass_request_body", HSL, 1, 1, Set::Loc(proxy::proxy_pass_request_body)),
    cmd("proxy_connect_timeout", HSL, 1, 1, Set::Loc(proxy::proxy_up::connect_timeout)),
    cmd("proxy_send_timeout", HSL, 1, 1, Set::Loc(proxy::proxy_up::send_timeout)),
    cmd("proxy_read_timeout", HSL, 1, 1, Set::Loc(proxy::proxy_up::read_timeout)),
    cmd("proxy_next_upstream", HSL, 1, 12, Set::Loc(proxy::proxy_up::next_upstream)),
    cmd("proxy_next_upstream_tries", HSL, 1, 1, Set::Loc(proxy::proxy_up::next_upstream_tries)),
    cmd("proxy_next_upstream_timeout", HSL, 1, 1, Set::Loc(proxy::proxy_up::next_upstream_timeout)),
    cmd("proxy_buffering", HSL, 1, 1, Set::Loc(proxy::proxy_up::buffering)),
    cmd("proxy_request_buffering", HSL, 1, 1, Set::Loc(proxy::proxy_up::request_buffering)),
    cmd("proxy_buffer_size", HSL, 1, 1, Set::Loc(proxy::proxy_up::buffer_size)),
    cmd("proxy_buffers", HSL, 2, 2, Set::Loc(proxy::proxy_up::buffers)),
    cmd("proxy_busy_buffers_size", HSL, 1, 1, Set::Loc(proxy::proxy_up::busy_buffers_size)),
    cmd("proxy_temp_file_write_size", HSL, 1, 1, Set::Loc(proxy::proxy_up::temp_file_write_size)),
    cmd("proxy_max_temp_file_size", HSL, 1, 1, Set::Loc(proxy::proxy_up::max_temp_file_size)),
    cmd("proxy_temp_path", HSL, 1, 4, Set::Loc(proxy::proxy_up::temp_path)),
    cmd("proxy_intercept_errors", HSL, 1, 1, Set::Loc(proxy::proxy_up::intercept_errors)),
    cmd("proxy_bind", HSL, 1, 2, Set::Loc(proxy::proxy_up::bind)),
    cmd("proxy_limit_rate", HSL, 1, 1, Set::Loc(proxy::proxy_up::limit_rate)),
    cmd("proxy_store", HSL, 1, 1, Set::Loc(proxy::proxy_up::store)),
    cmd("proxy_store_access", HSL, 1, 3, Set::Loc(proxy::proxy_up::store_access)),
    list(
        cmd("proxy_redirect", HSL, 1, 2, Set::Loc(crate::http::proxy::redirect::proxy_redirect)),
        crate::http::proxy::redirect::reset,
    ),
    list(
        cmd("proxy_cookie_domain", HSL, 1, 2, Set::Loc(crate::http::proxy::cookie::proxy_cookie_domain)),
        crate::http::proxy::cookie::reset_domain,
    ),
    list(
        cmd("proxy_cookie_path", HSL, 1, 2, Set::Loc(crate::http::proxy::cookie::proxy_cookie_path)),
        crate::http::proxy::cookie::reset_path,
    ),
    list(
        cmd("proxy_cookie_flags", HSL, 1, 9, Set::Loc(crate::http::proxy::cookie::proxy_cookie_flags)),
        crate::http::proxy::cookie::reset_flags,
    ),
    // Hash sizing knobs for nginx's static hashes; sluice's tables need none.
    cmd("types_hash_max_size", HSL, 1, 1, Set::Noop),
    cmd("types_hash_bucket_size", HSL, 1, 1, Set::Noop),
    cmd("server_names_hash_max_size", HTTP, 1, 1, Set::Noop),
    cmd("server_names_hash_bucket_size", HTTP, 1, 1, Set::Noop),
    // Tengine's check peers are not in shared memory here: no size to set.
    cmd("check_shm_size", HTTP, 1, 1, Set::Noop),
];

/// Directives nginx has that sluice does not implement yet: refused like
/// any unknown directive, but with a hint so the operator knows why.
static KNOWN_NGINX: &[&str] = &["include_subdomains"];

/// Every directive table, searched in order: the core's, then each
/// module's. A module adds its table here and nowhere else.
/// `proxy_ssl_*` (the grpc and uwsgi modules have theirs).
static PROXY_SSL: &[Cmd] = crate::upstream_ssl_directives!("proxy");

pub static TABLES: &[&[Cmd]] = &[
    CORE,
    super::set_core::DIRECTIVES,
    crate::http::cache::conf::PROXY,
    crate::http::cache::conf::FASTCGI,
    crate::http::cache::conf::UWSGI,
    crate::http::cache::conf::SCGI,
    super::compress::TABLE,
    crate::http::rewrite::DIRECTIVES,
    crate::http::fastcgi::conf::DIRECTIVES,
    crate::http::uwsgi::conf::DIRECTIVES,
    crate::http::uwsgi::conf::MODIFIERS,
    crate::http::scgi::conf::DIRECTIVES,
    crate::http::grpc::conf::DIRECTIVES,
    PROXY_SSL,
    crate::http::grpc::conf::SSL_DIRECTIVES,
    crate::http::uwsgi::conf::SSL_DIRECTIVES,
    crate::http::memcached::DIRECTIVES,
    crate::http::flv::DIRECTIVES,
    crate::http::mp4::DIRECTIVES,
    crate::http::image_filter::DIRECTIVES,
    crate::http::realip::DIRECTIVES,
    crate::resolver::DIRECTIVES,
    crate::http::charset::DIRECTIVES,
    crate::tls::acme::conf::DIRECTIVES,
    crate::http::handler::symlinks::DIRECTIVES,
    crate::http::handler::stub_status::DIRECTIVES,
    crate::http::handler::autoindex::DIRECTIVES,
    crate::http::handler::random_index::DIRECTIVES,
    crate::metrics::DIRECTIVES,
    crate::http::api::DIRECTIVES,
    crate::http::filter::sub::DIRECTIVES,
    crate::http::ssi::DIRECTIVES,
    crate::http::addition::DIRECTIVES,
    crate::http::dav::DIRECTIVES,
    crate::http::gunzip::DIRECTIVES,
    crate::http::slice::DIRECTIVES,
    crate::http::userid::DIRECTIVES,
    crate::http::geoip::DIRECTIVES,
    crate::http::geoip2::DIRECTIVES,
    crate::http::access::DIRECTIVES,
    crate::http::access::auth_request::DIRECTIVES,
    crate::http::handler::mirror::DIRECTIVES,
    crate::http::handler::post_action::DIRECTIVES,
    crate::http::limit::DIRECTIVES,
    crate::http::connection::h3::conf::DIRECTIVES,
];

/// The directive named `name` (the first table listing it wins). A hash
/// map built once: scanning every table for each directive read was a
/// fifth of `-t`'s time with 10,000 servers.
pub fn lookup(name: &str) -> Option<&'static Cmd> {
    static BY_NAME: std::sync::OnceLock<HashMap<&'static str, &'static Cmd, foldhash::fast::FixedState>> =
        std::sync::OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            let mut m = HashMap::with_hasher(foldhash::fast::FixedState::default());
            for c in TABLES.iter().flat_map(|t| t.iter()) {
                m.entry(c.name).or_insert(c);
            }
            m
        })
        .get(name)
        .copied()
}

pub fn unknown(d: &Directive) -> ConfError {
    let hint = match super::dynamic_modules::directive_hint(&d.name) {
        Some(h) => h,
        None if KNOWN_NGINX.contains(&d.name.as_str()) => " (an nginx directive sluice does not support yet)".into(),
        None => String::new(),
    };
    ConfError::at(format!("unknown directive \"{}\"{}", d.name, hint), &d.span)
}

/// A directive another context owns, or one no module has. nginx looks a
/// name up in every loaded module before it checks the context, so a name
/// some module knows (`location` or `root` in a stream server, http's
/// `keepalive` in a stream upstream) is "not allowed here", and only a
/// name no module has is an "unknown directive".
pub fn misplaced_or_unknown(d: &Directive) -> ConfError {
    if lookup(&d.name).is_some() || super::family::knows(&d.name) {
        return ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span);
    }
    unknown(d)
}

/// Argument count and block shape, with nginx's messages.
pub fn check_shape(c: &Cmd, d: &Directive) -> R {
    if c.block && d.block.is_none() {
        return Err(ConfError::at(format!("directive \"{}\" has no opening \"{{\"", d.name), &d.span));
    }
    if !c.block && d.block.is_some() {
        return Err(ConfError::at(format!("directive \"{}\" is not terminated by \";\"", d.name), &d.span));
    }
    let n = d.args.len();
    if n < c.min || n > c.max {
        return Err(ConfError::at(format!("invalid number of arguments in \"{}\" directive", d.name), &d.span));
    }
    Ok(())
}
