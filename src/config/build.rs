//! Turns the parsed directive tree into the validated `Config`.
//!
//! Each level (main, events, http, server, location) first applies its own
//! simple directives, then builds its child blocks from a copy of its now
//! complete settings. Because a level's directives all apply before any child
//! is built, a directive written after a nested block still reaches it, which
//! is nginx's merge behaviour.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::model::*;
use super::parser::{ConfError, ConfigFile, Directive, Span};
use super::table::{self, Cmd, EVENTS, HTTP, LOC, MAIN, SRV, Set};
use super::{location, set_loc};
use crate::log::error::Level;

/// Blocks that define a variable (`map`, `geo`, `split_clients`): built
/// before the rest of `http`, so any template may use their variables.
const VAR_BLOCKS: [&str; 3] = ["map", "geo", "split_clients"];
use crate::log::format::LogFormat;
use crate::variables::Template;

/// Shared state while building: paths, log formats and files, and flags
/// about the level being built.
pub struct Ctx {
    pub prefix: PathBuf,
    /// The main configuration file's directory: nginx resolves TLS files
    /// (certificates, keys, ticket keys) against it, as it does `include`.
    pub conf_dir: PathBuf,
    pub formats: HashMap<String, Arc<LogFormat>>,
    pub log_files: Vec<AccessLogFile>,
    pub log_syslog: Vec<Arc<crate::log::syslog::Peer>>,
    /// Which log files got buffer=/flush= explicitly (else defaults).
    pub log_explicit: Vec<bool>,
    /// An `error_log` was applied at main level (the default is dropped).
    pub error_log_set: bool,
    pub warnings: Vec<String>,
    pub notices: Vec<String>,
    /// Error log files by path (None: stderr), one each however many
    /// levels name them.
    pub error_log_files: Vec<Arc<crate::log::error_file::LogFile>>,
    pub root_here: bool,
    pub alias_here: bool,
    pub in_regex_location: bool,
    /// Length of the enclosing location's path, for `alias`.
    pub location_len: usize,
    /// Certificates already loaded, so servers that inherit the same files
    /// share one parsed key.
    pub tls_cache: crate::tls::CertCache,
    /// Upstream blocks by name (built before any server, so `proxy_pass`
    /// can refer to one defined later in the file, as in nginx).
    pub upstreams: HashMap<String, Arc<super::proxy::Upstream>>,
    pub upstream_list: Vec<Arc<super::proxy::Upstream>>,
    /// A `user` directive was given (even one ignored when not root).
    pub user_set: bool,
    /// `proxy_cache_path` zones by name (defined before any server is
    /// built, so a location may use one defined later in `http`).
    pub cache_zones: crate::http::cache::conf::Zones,
    /// `limit_req_zone` / `limit_conn_zone` zones by name (read first too).
    pub limit_zones: crate::http::limit::conf::Zones,
    /// `thread_pool` names, and the pools `aio threads=NAME` asked for
    /// (checked once the whole file is read: a pool may come later).
    pub thread_pools: Vec<String>,
    /// `sticky learn` zone names, each declared once.
    pub sticky_zones: Vec<String>,
    pub aio_pools: Vec<(String, ConfError)>,
    /// `acme_issuer` blocks and the certificates servers ask them for.
    pub acme: crate::tls::acme::conf::Build,
}

impl Ctx {
    /// A TLS file path: relative to the configuration's directory.
    pub fn conf_path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() { p.to_path_buf() } else { self.conf_dir.join(p) }
    }

    /// Relative paths resolve against the prefix, as in nginx.
    pub fn path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() { p.to_path_buf() } else { self.prefix.join(p) }
    }

    /// The error log file for an `error_log` target, shared with any level
    /// that named the same path before.
    pub fn error_log_file(&mut self, target: &str) -> Arc<crate::log::error_file::LogFile> {
        let path = if target == "stderr" { None } else { Some(self.path(target)) };
        if let Some(f) = self.error_log_files.iter().find(|f| f.path() == path.as_deref()) {
            return f.clone();
        }
        let f = crate::log::error_file::LogFile::new(path);
        self.error_log_files.push(f.clone());
        f
    }

    /// Registers an access log file once per path; the returned index is what
    /// workers use to find their buffered writer for it.
    pub fn log_file(&mut self, path: &str, buffer: Option<u64>, flush: Option<Duration>, gzip: Option<u32>) -> usize {
        let path = self.path(path);
        let explicit = buffer.is_some() || flush.is_some() || gzip.is_some();
        let file = AccessLogFile {
            path,
            buffer: buffer.unwrap_or(64 * 1024) as usize,
            flush: flush.unwrap_or(Duration::from_secs(1)),
            gzip,
            eager: !explicit,
        };
        if let Some(i) = self.log_files.iter().position(|f| f.path == file.path) {
            // One buffer per file: explicit buffer=/flush= win over defaults.
            if explicit && !self.log_explicit[i] {
                self.log_files[i] = file;
                self.log_explicit[i] = true;
            }
            return i;
        }
        self.log_files.push(file);
        self.log_explicit.push(explicit);
        self.log_files.len() - 1
    }
}

#[derive(Clone)]
pub struct ListenSpec {
    pub addr: SocketAddr,
    pub default_server: bool,
    pub backlog: Option<i32>,
    /// `notsent_lowat=SIZE|off` (sluice's own): Some(0) for off.
    pub notsent_lowat: Option<u32>,
    pub sock: super::model::SockOpts,
    pub reuseport: bool,
    /// `deferred`: counts as a listen option (given once per address);
    /// every listener defers accepting anyway (`listener::tune`).
    pub deferred: bool,
    pub ssl: bool,
    pub http2: bool,
    /// `listen ... http2` itself (the whole address), as opposed to a
    /// server's `http2 on`.
    pub http2_param: bool,
    /// `quic`: UDP, HTTP/3.
    pub quic: bool,
    /// Connections start with a PROXY protocol header.
    pub proxy_protocol: bool,
    /// `listen unix:PATH`: the socket file's path (`addr` is then
    /// 0.0.0.0:0, never bound).
    pub unix: Option<Arc<str>>,
    pub span: Span,
}

impl ListenSpec {
    /// The address as nginx writes it in messages: `127.0.0.1:80`,
    /// `unix:/path`.
    pub fn addr_text(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{p}"),
            None => self.addr.to_string(),
        }
    }

    /// A plain listen on `addr` with no parameters.
    pub fn new(addr: SocketAddr, span: Span) -> ListenSpec {
        ListenSpec {
            addr,
            default_server: false,
            backlog: None,
            notsent_lowat: None,
            sock: Default::default(),
            reuseport: false,
            deferred: false,
            ssl: false,
            http2: false,
            http2_param: false,
            quic: false,
            proxy_protocol: false,
            unix: None,
            span,
        }
    }
}

#[derive(Default)]
pub struct ServerBuild {
    pub names: Vec<String>,
    pub regex_names: Vec<Arc<crate::pattern::Regex>>,
    /// `$server_name` (`server_names::parse`).
    pub first_name: Option<String>,
    pub listens: Vec<ListenSpec>,
    /// `acme_certificate`, resolved once the server's names are known.
    pub acme: Option<Directive>,
}

/// Applies the simple directives of one block; returns the child blocks for
/// the caller to build once this level is complete. `dirs` are the
/// directives to apply, `block` the whole block (what the level's checks
/// look through): the main and http levels leave out what was handled
/// before, without copying the rest of the tree.
fn apply_level<'d>(
    dirs: impl IntoIterator<Item = &'d Directive>,
    block: &[Directive],
    level: u8,
    ctx: &mut Ctx,
    main: &mut MainConf,
    mut loc: Option<&mut LocConf>,
    mut srv: Option<&mut ServerBuild>,
) -> Result<Vec<(&'static Cmd, &'d Directive)>, ConfError> {
    let mut seen: HashSet<&'static str> = HashSet::new();
    let mut children = Vec::new();
    for d in dirs {
        let cmd = match table::lookup(&d.name) {
            Some(c) => c,
            // Another family's block, anywhere but at main level.
            None if super::family::find(&d.name).is_some() => {
                return Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span));
            }
            None => return Err(table::unknown(d)),
        };
        if cmd.ctx & level == 0 {
            return Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span));
        }
        table::check_shape(cmd, d)?;
        let first = seen.insert(cmd.name);
        if !first && !cmd.multi {
            return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
        }
        if first && let (Some(reset), Some(l)) = (cmd.reset, loc.as_deref_mut()) {
            reset(l);
        }
        match &cmd.set {
            Set::Main(f) => f(main, d, ctx)?,
            Set::Any(f) => f(main, loc.as_deref_mut(), d, ctx)?,
            Set::Ctx(f) => f(d, ctx)?,
            Set::Loc(f) => match loc.as_deref_mut() {
                Some(l) => f(l, d, ctx)?,
                None => return Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span)),
            },
            Set::Server(f) => match srv.as_deref_mut() {
                Some(s) => f(s, d, ctx)?,
                None => return Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span)),
            },
            Set::Noop | Set::Script => {}
            Set::Block if cmd.name == "types" => match loc.as_deref_mut() {
                Some(l) => set_loc::types_block(l, d)?,
                None => return Err(ConfError::at("\"types\" directive is not allowed here", &d.span)),
            },
            Set::Block => children.push((cmd, d)),
        }
    }
    if let Some(l) = loc {
        super::proxy_buffers::check(l, block)?;
        crate::http::access::referer::check_level(l)?;
        if level != HTTP {
            crate::http::cache::conf::check_level(l, block, ctx);
        }
    }
    Ok(children)
}

fn default_main(prefix: &Path) -> MainConf {
    MainConf {
        worker_processes: 1,
        cpu_affinity: CpuAffinity::None,
        rlimit_nofile: None,
        rlimit_core: None,
        working_directory: None,
        pid: prefix.join("logs/sluice.pid"),
        error_log: Arc::default(),
        daemon: true,
        worker_connections: 512,
        reuse_port: false,
        user: None,
        worker_shutdown_timeout: None,
        worker_priority: None,
        master_process: true,
        debug_connection: Vec::new(),
    }
}

fn default_loc(prefix: &Path) -> LocConf {
    let mut types = crate::config::model::MimeMap::default();
    for (ext, t) in [("html", "text/html"), ("gif", "image/gif"), ("jpg", "image/jpeg")] {
        types.insert(ext.as_bytes().into(), Arc::<str>::from(t));
    }
    LocConf {
        root: DocRoot { path: prefix.join("html").to_string_lossy().into_owned(), template: None, alias_len: None },
        index: vec![Template::literal("index.html")],
        try_files: None,
        rewrite: Default::default(),
        location_name: Arc::from(""),
        empty_gif: false,
        flv: false,
        mp4: Default::default(),
        stub_status: false,
        metrics: Default::default(),
        core: Default::default(),
        access: Default::default(),
        check_status: None,
        api: None,
        autoindex: Default::default(),
        random_index: false,
        error_pages: Vec::new(),
        add_headers: Vec::new(),
        add_trailers: Vec::new(),
        expires: None,
        expires_var: None,
        access_log: Some(Vec::new()),
        error_log: Arc::default(),
        default_type: Arc::from("text/plain"),
        types: Arc::new(types),
        sendfile: false,
        sendfile_max_chunk: 2 << 20,
        tcp_nopush: false,
        tcp_nodelay: true,
        keepalive_timeout: Duration::from_secs(75),
        keepalive_header: None,
        keepalive_requests: 1000,
        keepalive_time: Duration::from_secs(3600),
        server_tokens: true,
        client_header_buffer_size: 1024,
        large_client_header_buffers: (4, 8192),
        client_max_body_size: 1024 * 1024,
        client_header_timeout: Duration::from_secs(60),
        client_body_timeout: Duration::from_secs(60),
        client_body_buffer_size: 16 * 1024,
        client_body_temp_path: prefix.join("client_body_temp"),
        client_body_in_file_only: crate::http::connection::spool::Naming::Anonymous,
        send_timeout: Duration::from_secs(60),
        open_file_cache: None,
        open_file_cache_valid: Duration::from_secs(60),
        open_file_cache_min_uses: 1,
        open_file_cache_errors: false,
        output_buffers: (2, 32 * 1024),
        postpone_output: 1460,
        subrequest_output_buffer_size: 4096,
        etag: true,
        if_modified_since: IfModifiedSince::Exact,
        log_not_found: true,
        log_subrequest: false,
        ssl: SslConf {
            tls12: true,
            tls13: true,
            session_timeout: Duration::from_secs(300),
            session_tickets: true,
            verify_depth: 1,
            ..SslConf::default()
        }
        .into(),
        http2: Http2Conf::default(),
        h3: Default::default(),
        proxy: super::proxy::ProxyConf {
            up: super::proxy::UpstreamConf::new(prefix.join("proxy_temp")),
            ..Default::default()
        }
        .into(),
        fastcgi: crate::http::fastcgi::conf::FastcgiConf::new(prefix).into(),
        uwsgi: crate::http::uwsgi::conf::UwsgiConf::new(prefix, "uwsgi_temp").into(),
        memcached: crate::http::memcached::MemcachedConf::new(prefix).into(),
        scgi: crate::http::scgi::conf::ScgiConf::new(prefix, "scgi_temp").into(),
        grpc: crate::http::grpc::conf::GrpcConf::new(prefix).into(),
        compress: Default::default(),
        realip: Default::default(),
        resolver: Default::default(),
        charset: Default::default(),
        symlinks: Default::default(),
        sub: Default::default(),
        image_filter: Default::default(),
        ssi: Default::default(),
        addition: Default::default(),
        dav: Default::default(),
        gunzip: Default::default(),
        slice: Default::default(),
        userid: Default::default(),
        mirror: Default::default(),
        post_action: Default::default(),
        limit_except: None,
        limit: Default::default(),
    }
}

/// What a child level inherits: everything except the per-level actions
/// nginx does not merge (the rewrite directives, `try_files`, the content
/// handler). The modules' `Shared` settings stay shared with the parent
/// unless one of these is set there (a write copies them).
pub fn inherit(p: &LocConf) -> LocConf {
    let mut c = p.clone();
    c.try_files = None;
    c.rewrite.script = None;
    c.empty_gif = false;
    c.flv = false;
    c.mp4.handler = false;
    c.image_filter.own = false;
    c.stub_status = false;
    c.metrics.page = None;
    c.core.internal = false;
    let a = &c.access;
    if a.own_rules || a.secure_link.own_link || a.secure_link.own_secret {
        c.access.own_rules = false;
        c.access.secure_link.own_link = false;
        c.access.secure_link.own_secret = false;
    }
    c.check_status = None;
    c.api = None;
    c.limit_except = None;
    c.clear_handlers();
    c
}

/// The implicit location of an `if` block in a location: nginx merges it
/// into the enclosing location, and it keeps that location's content
/// handler (`proxy_pass`, `empty_gif`...: nginx only replaces the request's
/// handler when the block sets one) but not its `try_files` or rewrite
/// directives, which are per location.
pub fn inherit_if(p: &LocConf) -> LocConf {
    let mut c = p.clone();
    c.try_files = None;
    c.rewrite.script = None;
    c
}

/// Builds the configuration from `-g` directives (applied first, like nginx)
/// and the file's directives.
pub fn build(
    cmdline: &[Directive],
    dirs: &[Directive],
    files: Vec<ConfigFile>,
    prefix: &Path,
    conf_file: &Path,
    default_error_log: Option<&str>,
) -> Result<Config, ConfError> {
    let mut ctx = Ctx {
        prefix: prefix.to_path_buf(),
        conf_dir: conf_file.parent().unwrap_or(prefix).to_path_buf(),
        formats: HashMap::from([("combined".to_string(), Arc::new(LogFormat::combined()))]),
        log_files: Vec::new(),
        log_syslog: Vec::new(),
        log_explicit: Vec::new(),
        error_log_set: false,
        warnings: Vec::new(),
        notices: Vec::new(),
        error_log_files: Vec::new(),
        root_here: false,
        alias_here: false,
        in_regex_location: false,
        location_len: 0,
        tls_cache: Default::default(),
        upstreams: HashMap::new(),
        upstream_list: Vec::new(),
        user_set: false,
        cache_zones: Default::default(),
        limit_zones: Default::default(),
        thread_pools: Vec::new(),
        sticky_zones: Vec::new(),
        aio_pools: Vec::new(),
        acme: Default::default(),
    };
    let mut main = default_main(prefix);
    super::dynamic_modules::reset();
    // The other families' blocks (`stream {}`) go to their modules, after
    // http; each may appear once.
    let mut family_blocks: Vec<(&'static dyn super::family::Family, &Directive)> = Vec::new();
    for d in cmdline.iter().chain(dirs) {
        let Some(f) = super::family::find(&d.name) else { continue };
        if family_blocks.iter().any(|(g, _)| g.block() == f.block()) {
            return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
        }
        if d.block.is_none() {
            return Err(ConfError::at(format!("directive \"{}\" has no opening \"{{\"", d.name), &d.span));
        }
        if !d.args.is_empty() {
            let msg = format!("invalid number of arguments in \"{}\" directive", d.name);
            return Err(ConfError::at(msg, &d.span));
        }
        family_blocks.push((f, d));
    }
    let rest = cmdline.iter().chain(dirs).filter(|d| super::family::find(&d.name).is_none());
    let blocks = apply_level(rest, &[], MAIN, &mut ctx, &mut main, None, None)?;
    // nginx's compiled-in main log (or `-e`'s), unless the main level
    // names its own.
    if !ctx.error_log_set {
        let file = ctx.error_log_file(default_error_log.unwrap_or("logs/error.log"));
        Arc::make_mut(&mut main.error_log).add(file, Level::Error);
    }
    if main.user.is_none() && !ctx.user_set && crate::worker::credentials::is_root() {
        // nginx's compiled-in default: a root master without `user` runs
        // its workers as nobody (group nogroup where it exists, as nginx's
        // configure picks on Debian).
        main.user =
            Some(crate::worker::credentials::default_user().map_err(|msg| ConfError { msg, file: None, line: 0 })?);
    }
    let mut events = None;
    let mut http = None;
    for (cmd, d) in blocks {
        let slot = if cmd.name == "events" { &mut events } else { &mut http };
        if slot.is_some() {
            return Err(ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span));
        }
        *slot = Some(d);
    }
    let events = events.ok_or_else(|| ConfError {
        msg: "no \"events\" section in configuration".into(),
        file: None,
        line: 0,
    })?;
    let events = events.block.as_deref().unwrap_or(&[]);
    apply_level(events, events, EVENTS, &mut ctx, &mut main, None, None)?;
    let http = match http {
        Some(d) => build_http(d.block.as_deref().unwrap_or(&[]), &mut ctx, &mut main)?,
        None => HttpConf { servers: Vec::new(), listens: Vec::new(), upstreams: Vec::new(), cache_zones: Vec::new() },
    };
    let mut families = Vec::new();
    for (f, d) in &family_blocks {
        families.push((f.block(), f.build(d, &mut ctx, &main)?));
    }
    // nginx makes a pool named "default" when none is declared.
    if let Some((_, e)) = ctx.aio_pools.iter().find(|(p, _)| p != "default" && !ctx.thread_pools.contains(p)) {
        return Err(e.clone());
    }
    Ok(Config {
        main,
        http,
        files,
        conf_file: conf_file.to_path_buf(),
        prefix: prefix.to_path_buf(),
        staples: std::mem::take(&mut ctx.tls_cache.staples),
        acme: crate::tls::acme::conf::take_orders(&mut ctx),
        warnings: ctx.warnings.drain(..).chain(ctx.tls_cache.warnings.drain(..)).collect(),
        notices: std::mem::take(&mut ctx.notices),
        error_log_files: std::mem::take(&mut ctx.error_log_files),
        access_log_files: std::mem::take(&mut ctx.log_files),
        access_log_syslog: std::mem::take(&mut ctx.log_syslog),
        families,
    })
}

/// The variable a `map`, `geo` or `split_clients` block defines, without `$`.
fn block_var_name(d: &Directive) -> &str {
    let at = if d.name == "geo" { d.args.len().saturating_sub(1) } else { 1 };
    d.args.get(at).map_or("", |w| w.text.trim_start_matches('$'))
}

fn build_http(dirs: &[Directive], ctx: &mut Ctx, main: &mut MainConf) -> Result<HttpConf, ConfError> {
    let mut conf = default_loc(&ctx.prefix);
    conf.error_log = main.error_log.clone();
    // Maps first: any template in http may use their variables.
    super::map::reset();
    super::captures::reset();
    super::captures::declare_all(dirs);
    // `set` declares its variables for every template, maps included.
    crate::http::rewrite::vars::reset();
    crate::http::rewrite::vars::declare_all(dirs);
    conf.limit.rate.set_slot = crate::http::rewrite::vars::slot("limit_rate");
    super::geo::reset();
    super::split_clients::reset();
    // The GeoIP databases before any template: `$geoip_*` binds to them.
    crate::http::geoip::read_main(dirs, ctx)?;
    crate::http::geoip2::read_main(dirs, ctx)?;
    // A block's values may use a variable a later block defines (nginx
    // resolves variables once the whole configuration is read): a block
    // that names a variable not defined yet waits for a later pass, and
    // the passes end when one defines nothing new.
    let mut pending: Vec<&Directive> = dirs.iter().filter(|d| VAR_BLOCKS.contains(&d.name.as_str())).collect();
    for d in &pending {
        table::check_shape(table::lookup(&d.name).ok_or_else(|| table::unknown(d))?, d)?;
    }
    while !pending.is_empty() {
        let mut waiting = Vec::new();
        let mut first_err = None;
        for d in &pending {
            let r = match d.name.as_str() {
                "map" => super::map::map_block(d),
                "geo" => super::geo::define(d, &mut ctx.warnings),
                _ => super::split_clients::define(d),
            };
            if let Err(e) = r {
                let later = pending.iter().any(|p| {
                    !std::ptr::eq(*p, *d)
                        && e.to_string().contains(&format!("unknown \"{}\" variable", block_var_name(p)))
                });
                if !later {
                    return Err(e);
                }
                first_err.get_or_insert(e);
                waiting.push(*d);
            }
        }
        if waiting.len() == pending.len()
            && let Some(e) = first_err
        {
            return Err(e);
        }
        pending = waiting;
    }
    // nginx's default access log, unless the http level sets its own (which
    // would replace it before any server could inherit it).
    if !dirs.iter().any(|d| d.name == "access_log") {
        let file = ctx.log_file("logs/access.log", None, None, None);
        let format = LogFormat::combined();
        conf.access_log = Some(vec![AccessLogRef { dest: LogDest::File(file), format: Arc::new(format), cond: None }]);
    }
    // log_format must be known before access_log in any server uses it.
    for d in dirs.iter().filter(|d| d.name == "log_format") {
        table::check_shape(table::lookup("log_format").ok_or_else(|| table::unknown(d))?, d)?;
        set_loc::log_format(d, ctx)?;
    }
    // Cache zones too: `proxy_cache` anywhere in http may name one.
    let zone_dir = |d: &Directive| {
        matches!(d.name.as_str(), "proxy_cache_path" | "fastcgi_cache_path" | "uwsgi_cache_path" | "scgi_cache_path")
            || crate::http::limit::conf::is_zone(&d.name)
    };
    for d in dirs.iter().filter(|d| zone_dir(d)) {
        let cmd = table::lookup(&d.name).ok_or_else(|| table::unknown(d))?;
        table::check_shape(cmd, d)?;
        if let table::Set::Ctx(f) = &cmd.set {
            f(d, ctx)?;
        }
    }
    // charset_map tables too: any level's `charset` may recode through one.
    let maps: Vec<&Directive> = dirs.iter().filter(|d| d.name == "charset_map").collect();
    for d in &maps {
        table::check_shape(table::lookup(&d.name).ok_or_else(|| table::unknown(d))?, d)?;
    }
    conf.charset.maps = Arc::new(crate::http::charset::map::Charsets::build(&maps)?);
    let rest = dirs.iter().filter(|d| {
        d.name != "log_format"
            && d.name != "charset_map"
            && !VAR_BLOCKS.contains(&d.name.as_str())
            && !zone_dir(d)
            && !crate::http::geoip::is_early(&d.name)
            && !crate::http::geoip2::is_early(&d.name)
    });
    let children = apply_level(rest, dirs, HTTP, ctx, main, Some(&mut conf), None)?;
    let mut servers = Vec::new();
    let mut specs = Vec::new();
    // Issuers before servers: `acme_certificate` may name one defined
    // later in the file.
    for (_, d) in children.iter().filter(|(c, _)| c.name == "acme_issuer") {
        crate::tls::acme::conf::issuer(d, ctx, &conf.resolver)?;
    }
    for (_, d) in children.iter().filter(|(c, _)| c.name == "upstream") {
        super::upstream_block::upstream_block(d, ctx, &conf.resolver)?;
    }
    for (_, d) in children.into_iter().filter(|(c, _)| c.name == "server") {
        let (server, listens) = build_server(d, &conf, ctx, main)?;
        let server = Arc::new(server);
        for l in listens {
            specs.push((l, server.clone()));
        }
        servers.push(server);
    }
    let listens = super::listen_groups::group(specs, main.reuse_port)?;
    Ok(HttpConf {
        servers,
        listens,
        upstreams: std::mem::take(&mut ctx.upstream_list),
        cache_zones: ctx.cache_zones.values().cloned().collect(),
    })
}

/// A server plus its listen specs and names, for grouping by address.
pub struct ServerListen {
    pub spec: ListenSpec,
    /// The `server {` line, where nginx reports a missing certificate.
    pub server_span: Span,
    pub names: Vec<String>,
    pub regex_names: Vec<Arc<crate::pattern::Regex>>,
}

fn build_server(
    d: &Directive,
    http: &LocConf,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<(Server, Vec<ServerListen>), ConfError> {
    let mut conf = inherit(http);
    let mut sb = ServerBuild::default();
    ctx.root_here = false;
    ctx.alias_here = false;
    let dirs = d.block.as_deref().unwrap_or(&[]);
    let children = apply_level(dirs, dirs, SRV, ctx, main, Some(&mut conf), Some(&mut sb))?;
    // Server-level rewrite directives run before location matching; the
    // server's own settings (used when no location matches) have none.
    let rewrite = crate::http::rewrite::compile::level(dirs, false, &conf, ctx, main)?;
    let (locations, named) = location::build_all(&children, &conf, None, ctx, main)?;
    if sb.listens.is_empty() {
        let port = if rustix::process::geteuid().is_root() { 80 } else { 8000 };
        sb.listens.push(ListenSpec::new(SocketAddr::from(([0, 0, 0, 0], port)), d.span.clone()));
    }
    for l in sb.listens.iter_mut().filter(|l| !l.quic) {
        l.ssl |= conf.ssl.on;
        l.http2 |= conf.http2.on;
    }
    if let Some(ad) = sb.acme.take() {
        conf.ssl.acme = Some(crate::tls::acme::conf::certificate(&ad, &sb.names, ctx)?);
    }
    let tls = crate::tls::build_server(&conf.ssl, &mut ctx.tls_cache, Some(&conf.resolver))?;
    if let Some(l) = sb.listens.iter().find(|l| l.quic)
        && tls.as_ref().is_some_and(|t| t.dynamic.is_some())
    {
        return Err(ConfError::at(
            "variables in \"ssl_certificate\" or \"ssl_certificate_key\" are not supported with \"listen ... quic\" \
             yet",
            &l.span,
        ));
    }
    // nginx: a server without server_name has the name "".
    if sb.names.is_empty() && sb.regex_names.is_empty() {
        sb.names.push(String::new());
    }
    let name = sb.first_name.clone().unwrap_or_default();
    let server = Server { name, conf: Arc::new(conf), rewrite, locations, named, tls };
    let listens = sb
        .listens
        .into_iter()
        .map(|spec| ServerListen {
            spec,
            server_span: d.span.clone(),
            names: sb.names.clone(),
            regex_names: sb.regex_names.clone(),
        })
        .collect();
    Ok((server, listens))
}

/// Builds a block's children as locations; used by the location module for
/// nesting.
pub(super) fn apply_location_level<'d>(
    dirs: &'d [Directive],
    ctx: &mut Ctx,
    main: &mut MainConf,
    conf: &mut LocConf,
) -> Result<Vec<(&'static Cmd, &'d Directive)>, ConfError> {
    apply_level(dirs, dirs, LOC, ctx, main, Some(conf), None)
}

/// Applies the directives of an `if` block (`level`: table::LIF or
/// table::SIF) to the implicit location's settings. The block is its own
/// level for `root`/`alias` and the `proxy_pass` URI rule (none inside
/// `if`, as in a regex location).
pub(crate) fn apply_if_level(
    dirs: &[Directive],
    level: u8,
    ctx: &mut Ctx,
    main: &mut MainConf,
    conf: &mut LocConf,
) -> Result<(), ConfError> {
    let saved = (ctx.root_here, ctx.alias_here, ctx.in_regex_location);
    (ctx.root_here, ctx.alias_here, ctx.in_regex_location) = (false, false, true);
    let r = apply_level(dirs, dirs, level, ctx, main, Some(conf), None);
    (ctx.root_here, ctx.alias_here, ctx.in_regex_location) = saved;
    match r?.first() {
        // Blocks are never allowed inside `if` (the table refuses them
        // first); kept as a guard.
        Some((_, d)) => Err(ConfError::at(format!("\"{}\" directive is not allowed here", d.name), &d.span)),
        None => Ok(()),
    }
}
