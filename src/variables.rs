//! nginx `$variables`: compiled once at config load into a list of literal
//! and variable parts, so evaluation on the request path is a straight walk
//! with no parsing or name lookups.

/// A variable reference, resolved from its name at load time.
#[derive(Clone, Debug, PartialEq)]
pub enum Var {
    RemoteAddr,
    /// The client address in binary: 4 bytes for IPv4, 16 for IPv6.
    BinaryRemoteAddr,
    LimitReqStatus,
    LimitConnStatus,
    /// The response rate (`limit_rate`, or `set $limit_rate`), in bytes/s.
    LimitRate,
    RemotePort,
    RemoteUser,
    /// 32 random hex digits, the same throughout the request.
    RequestId,
    /// `stub_status`'s figures: which one.
    Connections(u8),
    /// The connection's own address, whatever the realip module did.
    RealipRemoteAddr,
    RealipRemotePort,
    ProxyProtocolAddr,
    ProxyProtocolPort,
    ProxyProtocolServerAddr,
    ProxyProtocolServerPort,
    /// `$proxy_protocol_tlv_NAME` (`ProxyAddrs::tlv`), NAME lowercase.
    ProxyProtocolTlv(String),
    TimeLocal,
    TimeIso8601,
    Msec,
    Request,
    Status,
    BodyBytesSent,
    BytesSent,
    RequestTime,
    RequestMethod,
    RequestUri,
    Uri,
    Args,
    IsArgs,
    Arg(String),
    Host,
    Hostname,
    ServerName,
    ServerAddr,
    ServerPort,
    ServerProtocol,
    Scheme,
    /// Request header; name lowercased with `_` turned into `-`.
    Http(String),
    /// Response header, same naming.
    SentHttp(String),
    /// `$sent_trailer_NAME`: a trailer field add_trailer set before.
    SentTrailer(String),
    /// A header of the origin's response (as passed on), same naming.
    UpstreamHttp(String),
    Cookie(String),
    Connection,
    ConnectionRequests,
    Pid,
    RequestLength,
    ContentType,
    ContentLength,
    DocumentRoot,
    RequestFilename,
    /// The document root with symbolic links resolved.
    RealpathRoot,
    FastcgiScriptName,
    FastcgiPathInfo,
    Version,
    /// `$invalid_referer` (`valid_referers`).
    InvalidReferer,
    SecureLink,
    SslClientVerify,
    /// `$gzip_ratio`, `$brotli_ratio`, `$zstd_ratio`.
    CompressRatio(crate::http::filter::compress::negotiate::Coding),
    /// `$ssl_client_s_dn`, `_i_dn`, `_serial`, `_fingerprint`, `_cert`,
    /// `_raw_cert`, `_escaped_cert`, `_v_start`, `_v_end`, `_v_remain`.
    SslClient(ClientCertVar),
    SecureLinkExpires,
    /// `$slice_range` (the slice module).
    SliceRange,
    /// `$uid_got`, `$uid_set` (the userid module).
    UidGot,
    UidSet,
    /// `$uid_reset` where no `map` or `set` defines it: empty.
    UidReset,
    /// `$1`..`$9`: a capture of the matched regex location, else of the
    /// regex `server_name` that chose the server.
    Capture(usize),
    /// `$name` of a named capture `(?<name>...)` in a location or
    /// server_name regex.
    Named(std::sync::Arc<str>),
    Https,
    Http2,
    /// `$http3`: "h3" for a request over HTTP/3.
    Http3,
    SslProtocol,
    SslCipher,
    SslServerName,
    /// nginx-acme's `$acme_certificate` and `$acme_certificate_key`: the
    /// server's ACME certificate and key as `data:` PEM, at a handshake.
    AcmeCertificate,
    AcmeCertificateKey,
    SslSessionReused,
    ProxyHost,
    ProxyAddXForwardedFor,
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    UpstreamCacheStatus,
    UpstreamResponseLength,
    UpstreamBytesReceived,
    UpstreamBytesSent,
    /// `p` for a request that was pipelined, else `.`.
    Pipe,
    /// Seconds (with milliseconds) since the connection was accepted.
    ConnectionTime,
    /// `OK` once the whole response went out, else empty.
    RequestCompletion,
    /// `1` for a User-Agent with "MSIE " (the browser module's test).
    Msie,
    /// The SSI module's `$date_gmt` (true) and `$date_local` (false).
    Date(bool),
    /// The port of the `proxy_pass` target.
    ProxyPort,
    /// `$tcpinfo_rtt`, `_rttvar`, `_snd_cwnd`, `_rcv_space`: which one.
    Tcpinfo(crate::http::connection::tcpinfo::Field),
    SslAlpnProtocol,
    SslCurve,
    SslCurves,
    SslCiphers,
    SslSessionId,
    /// "1" for a request that came in TLS early data (HTTP/3 0-RTT).
    SslEarlyData,
    /// A cookie of the origin's `Set-Cookie` headers.
    UpstreamCookie(String),
    /// The request body, when it was read whole into memory for an origin.
    RequestBody,
    /// The name of the temporary file holding the request body.
    RequestBodyFile,
    /// A variable defined by a `map` block.
    Map(std::sync::Arc<crate::config::map::MapDef>),
    /// A variable defined by a `geo` block.
    Geo(std::sync::Arc<crate::config::geo::GeoDef>),
    /// `$geoip_*`: the GeoIP modules' variables (`crate::geoip`).
    Geoip(std::sync::Arc<crate::geoip::GeoipVar>),
    /// A variable a `geoip2` block defines (`crate::geoip2`).
    Geoip2(std::sync::Arc<crate::geoip2::Geoip2Var>),
    /// A variable defined by a `split_clients` block.
    Split(std::sync::Arc<crate::config::split_clients::SplitDef>),
    /// A variable `set` writes (see `rewrite::vars`).
    Set(std::sync::Arc<SetVar>),
    /// A variable of the family whose [`Namespace`] compiled the template,
    /// numbered by that family (`stream`'s `$bytes_received`...).
    Family(u16),
}

/// The variable names of a protocol family other than HTTP: while a family
/// builds its block (see [`scoped`]), every template compiled on that
/// thread resolves names here instead of through HTTP's variables.
/// `$1`..`$9` stay captures; `map`, `geo` and `split_clients` variables
/// are the family's to offer (`block_var`).
pub trait Namespace {
    fn resolve(&self, name: &str) -> Option<Var>;
}

thread_local! {
    static NAMESPACE: std::cell::Cell<Option<&'static dyn Namespace>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` (a family's build) with templates compiled in `ns`.
pub fn scoped<R>(ns: &'static dyn Namespace, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<&'static dyn Namespace>);
    impl Drop for Restore {
        fn drop(&mut self) {
            NAMESPACE.with(|n| n.set(self.0));
        }
    }
    let _restore = Restore(NAMESPACE.with(|n| n.replace(Some(ns))));
    f()
}

/// A variable of the configuration's own, written by `set`: the request's
/// value once set; before that, what the name means otherwise (a `map`, a
/// named capture), else empty with nginx's "using uninitialized" warning.
#[derive(Debug, PartialEq)]
pub struct SetVar {
    pub slot: usize,
    /// Lowercased, for the warning.
    pub name: String,
    pub fallback: Option<Var>,
}

impl Var {
    /// Variables nginx defines as an empty string (rather than "not found",
    /// which logs as `-`) when they do not apply: `$http2` and `$https` on
    /// plain HTTP/1.
    pub fn empty_is_value(&self) -> bool {
        // A `set` variable is empty once set to "" (or read unset, with the
        // warning), where nginx logs nothing rather than `-`.
        matches!(self, Var::Http2 | Var::Http3 | Var::Https | Var::RequestCompletion | Var::Msie | Var::UidReset)
            || matches!(self, Var::Set(sv) if sv.fallback.is_none())
    }

    pub fn from_name(name: &str) -> Option<Var> {
        let lower = name.to_ascii_lowercase();
        let v = match lower.as_str() {
            "remote_addr" => Var::RemoteAddr,
            "binary_remote_addr" => Var::BinaryRemoteAddr,
            "limit_req_status" => Var::LimitReqStatus,
            "limit_conn_status" => Var::LimitConnStatus,
            "limit_rate" => Var::LimitRate,
            "remote_port" => Var::RemotePort,
            "remote_user" => Var::RemoteUser,
            "request_id" => Var::RequestId,
            "connections_active" => Var::Connections(0),
            "connections_reading" => Var::Connections(1),
            "connections_writing" => Var::Connections(2),
            "connections_waiting" => Var::Connections(3),
            "realip_remote_addr" => Var::RealipRemoteAddr,
            "realip_remote_port" => Var::RealipRemotePort,
            "proxy_protocol_addr" => Var::ProxyProtocolAddr,
            "proxy_protocol_port" => Var::ProxyProtocolPort,
            "proxy_protocol_server_addr" => Var::ProxyProtocolServerAddr,
            "proxy_protocol_server_port" => Var::ProxyProtocolServerPort,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "msec" => Var::Msec,
            "request" => Var::Request,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "bytes_sent" => Var::BytesSent,
            "request_time" => Var::RequestTime,
            "request_method" => Var::RequestMethod,
            "request_uri" => Var::RequestUri,
            "uri" | "document_uri" => Var::Uri,
            "https" => Var::Https,
            "http2" => Var::Http2,
            "http3" => Var::Http3,
            "ssl_protocol" => Var::SslProtocol,
            "ssl_cipher" => Var::SslCipher,
            "ssl_server_name" => Var::SslServerName,
            "acme_certificate" => Var::AcmeCertificate,
            "acme_certificate_key" => Var::AcmeCertificateKey,
            "ssl_session_reused" => Var::SslSessionReused,
            "ssl_client_verify" => Var::SslClientVerify,
            "gzip_ratio" => Var::CompressRatio(crate::http::filter::compress::negotiate::Coding::Gzip),
            "brotli_ratio" => Var::CompressRatio(crate::http::filter::compress::negotiate::Coding::Br),
            "zstd_ratio" => Var::CompressRatio(crate::http::filter::compress::negotiate::Coding::Zstd),
            "ssl_client_s_dn" => Var::SslClient(ClientCertVar::SubjectDn),
            "ssl_client_i_dn" => Var::SslClient(ClientCertVar::IssuerDn),
            "ssl_client_serial" => Var::SslClient(ClientCertVar::Serial),
            "ssl_client_fingerprint" => Var::SslClient(ClientCertVar::Fingerprint),
            "ssl_client_raw_cert" => Var::SslClient(ClientCertVar::RawCert),
            "ssl_client_escaped_cert" => Var::SslClient(ClientCertVar::EscapedCert),
            "ssl_client_cert" => Var::SslClient(ClientCertVar::Cert),
            "ssl_client_s_dn_legacy" => Var::SslClient(ClientCertVar::SubjectDnLegacy),
            "ssl_client_i_dn_legacy" => Var::SslClient(ClientCertVar::IssuerDnLegacy),
            "ssl_client_v_start" => Var::SslClient(ClientCertVar::Start),
            "ssl_client_v_end" => Var::SslClient(ClientCertVar::End),
            "ssl_client_v_remain" => Var::SslClient(ClientCertVar::Remain),
            "proxy_host" => Var::ProxyHost,
            "proxy_add_x_forwarded_for" => Var::ProxyAddXForwardedFor,
            "upstream_addr" => Var::UpstreamAddr,
            "upstream_status" => Var::UpstreamStatus,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "upstream_connect_time" => Var::UpstreamConnectTime,
            "upstream_header_time" => Var::UpstreamHeaderTime,
            "upstream_cache_status" => Var::UpstreamCacheStatus,
            "upstream_response_length" => Var::UpstreamResponseLength,
            "upstream_bytes_received" => Var::UpstreamBytesReceived,
            "upstream_bytes_sent" => Var::UpstreamBytesSent,
            "pipe" => Var::Pipe,
            "connection_time" => Var::ConnectionTime,
            "request_completion" => Var::RequestCompletion,
            "msie" => Var::Msie,
            "date_gmt" => Var::Date(true),
            "date_local" => Var::Date(false),
            "proxy_port" => Var::ProxyPort,
            "tcpinfo_rtt" => Var::Tcpinfo(crate::http::connection::tcpinfo::Field::Rtt),
            "tcpinfo_rttvar" => Var::Tcpinfo(crate::http::connection::tcpinfo::Field::RttVar),
            "tcpinfo_snd_cwnd" => Var::Tcpinfo(crate::http::connection::tcpinfo::Field::SndCwnd),
            "tcpinfo_rcv_space" => Var::Tcpinfo(crate::http::connection::tcpinfo::Field::RcvSpace),
            "ssl_alpn_protocol" => Var::SslAlpnProtocol,
            "ssl_curve" => Var::SslCurve,
            "ssl_curves" => Var::SslCurves,
            "ssl_ciphers" => Var::SslCiphers,
            "ssl_session_id" => Var::SslSessionId,
            "ssl_early_data" => Var::SslEarlyData,
            "request_body" => {
                REQUEST_BODY_USED.store(true, std::sync::atomic::Ordering::Relaxed);
                Var::RequestBody
            }
            "request_body_file" => {
                REQUEST_BODY_FILE_USED.store(true, std::sync::atomic::Ordering::Relaxed);
                Var::RequestBodyFile
            }
            "args" | "query_string" => Var::Args,
            "is_args" => Var::IsArgs,
            "host" => Var::Host,
            "hostname" => Var::Hostname,
            "server_name" => Var::ServerName,
            "server_addr" => Var::ServerAddr,
            "server_port" => Var::ServerPort,
            "server_protocol" => Var::ServerProtocol,
            "scheme" => Var::Scheme,
            "connection" => Var::Connection,
            "connection_requests" => Var::ConnectionRequests,
            "pid" => Var::Pid,
            "request_length" => Var::RequestLength,
            "content_type" => Var::ContentType,
            "content_length" => Var::ContentLength,
            "document_root" => Var::DocumentRoot,
            "request_filename" => Var::RequestFilename,
            "realpath_root" => Var::RealpathRoot,
            "fastcgi_script_name" => Var::FastcgiScriptName,
            "fastcgi_path_info" => Var::FastcgiPathInfo,
            "request_scheme" => Var::Scheme,
            "nginx_version" | "sluice_version" => Var::Version,
            "invalid_referer" => Var::InvalidReferer,
            "secure_link" => Var::SecureLink,
            "secure_link_expires" => Var::SecureLinkExpires,
            "slice_range" => Var::SliceRange,
            "uid_got" => Var::UidGot,
            "uid_set" => Var::UidSet,
            "uid_reset" => Var::UidReset,
            _ => {
                let header = |rest: &str| rest.replace('_', "-");
                if let Some(rest) = lower.strip_prefix("http_") {
                    Var::Http(header(rest))
                } else if let Some(rest) = lower.strip_prefix("sent_http_") {
                    Var::SentHttp(header(rest))
                } else if let Some(rest) = lower.strip_prefix("sent_trailer_") {
                    Var::SentTrailer(header(rest))
                } else if let Some(rest) = lower.strip_prefix("proxy_protocol_tlv_") {
                    Var::ProxyProtocolTlv(rest.to_string())
                } else if let Some(rest) = lower.strip_prefix("upstream_http_") {
                    Var::UpstreamHttp(header(rest))
                } else if let Some(rest) = name.strip_prefix("upstream_cookie_") {
                    Var::UpstreamCookie(rest.to_string())
                } else if let Some(rest) = name.strip_prefix("arg_") {
                    Var::Arg(rest.to_string())
                } else if let Some(rest) = name.strip_prefix("cookie_") {
                    Var::Cookie(rest.to_string())
                } else {
                    return None;
                }
            }
        };
        Some(v)
    }
}

/// Some template of some configuration loaded so far reads
/// `$request_body`: only then does the proxy keep a copy of a body it read
/// into memory (never cleared: a reload that drops the variable just
/// keeps copying small bodies).
static REQUEST_BODY_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn request_body_used() -> bool {
    REQUEST_BODY_USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Some template reads `$request_body_file`: only then are the temporary
/// files of request bodies named (and unlinked at once, as nginx's), so
/// that the variable has a name to give.
static REQUEST_BODY_FILE_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn request_body_file_used() -> bool {
    REQUEST_BODY_FILE_USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A variable a `map`, `geo` or `split_clients` block defines, or one of
/// the GeoIP modules' (bound to the family's databases).
pub fn block_var(name: &str) -> Option<Var> {
    crate::config::map::lookup_var(name)
        .map(Var::Map)
        .or_else(|| crate::config::geo::lookup_var(name).map(Var::Geo))
        .or_else(|| crate::config::split_clients::lookup_var(name).map(Var::Split))
        .or_else(|| crate::geoip::lookup_var(name).map(Var::Geoip))
        .or_else(|| crate::geoip2::lookup_var(name).map(Var::Geoip2))
}

/// `$ssl_client_*` (but `_verify`) by name, for the families that have
/// them.
pub fn client_cert_var(name: &str) -> Option<ClientCertVar> {
    use ClientCertVar::*;
    Some(match name {
        "ssl_client_s_dn" => SubjectDn,
        "ssl_client_i_dn" => IssuerDn,
        "ssl_client_serial" => Serial,
        "ssl_client_fingerprint" => Fingerprint,
        "ssl_client_raw_cert" => RawCert,
        "ssl_client_escaped_cert" => EscapedCert,
        "ssl_client_cert" => Cert,
        "ssl_client_s_dn_legacy" => SubjectDnLegacy,
        "ssl_client_i_dn_legacy" => IssuerDnLegacy,
        "ssl_client_v_start" => Start,
        "ssl_client_v_end" => End,
        "ssl_client_v_remain" => Remain,
        _ => return None,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCertVar {
    SubjectDn,
    IssuerDn,
    SubjectDnLegacy,
    IssuerDnLegacy,
    Serial,
    Fingerprint,
    RawCert,
    EscapedCert,
    Cert,
    Start,
    End,
    Remain,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Lit(Vec<u8>),
    Var(Var),
}

/// A string with variables, e.g. a `log_format` or an `add_header` value.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub parts: Vec<Part>,
}

/// Supplies variable values during evaluation; implemented by the request
/// context, so templates do not depend on the HTTP code.
pub trait VarSource {
    fn write_var(&self, var: &Var, out: &mut Vec<u8>);

    /// For a variable that wrote nothing: whether it exists with an empty
    /// value (a header sent empty), which nginx logs as nothing, rather
    /// than not at all (logged as `-`). Asked only for empty values.
    fn empty_found(&self, _var: &Var) -> bool {
        false
    }
}

impl Template {
    /// Compiles `text`; `Err` carries nginx's message for the caller to
    /// position (`unknown "foo" variable`).
    pub fn compile(text: &str) -> Result<Template, String> {
        let b = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                lit.push(b[i]);
                i += 1;
                continue;
            }
            let (name, next) = if b.get(i + 1) == Some(&b'{') {
                let end = text[i + 2..]
                    .find('}')
                    .ok_or_else(|| format!("the closing bracket in \"{}\" variable is missing", &text[i + 2..]))?;
                (&text[i + 2..i + 2 + end], i + 3 + end)
            } else {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                (&text[i + 1..j], j)
            };
            if name.is_empty() {
                return Err("invalid variable name \"$\"".to_string());
            }
            let var = if name.bytes().all(|c| c.is_ascii_digit()) {
                match name.parse::<usize>() {
                    Ok(n) if n <= 9 => Var::Capture(n),
                    _ => return Err(format!("invalid capture \"${name}\"")),
                }
            } else if let Some(ns) = NAMESPACE.with(|n| n.get()) {
                ns.resolve(name).ok_or_else(|| unknown_variable(name))?
            } else if name.eq_ignore_ascii_case("limit_rate") {
                // Reads what `set $limit_rate` wrote, as a number.
                Var::LimitRate
            } else if let Some(slot) = crate::http::rewrite::vars::slot(name) {
                let fallback = block_var(name)
                    .or_else(|| crate::config::captures::is_defined(name).then(|| Var::Named(name.into())));
                Var::Set(std::sync::Arc::new(SetVar { slot, name: name.to_ascii_lowercase(), fallback }))
            } else {
                // A built-in nginx lets the configuration define (the
                // userid module's `$uid_reset`) yields to a `map` of it.
                Var::from_name(name)
                    .filter(|v| *v != Var::UidReset)
                    .or_else(|| block_var(name))
                    .or_else(|| Var::from_name(name))
                    .or_else(|| crate::config::captures::is_defined(name).then(|| Var::Named(name.into())))
                    .ok_or_else(|| unknown_variable(name))?
            };
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var(var));
            i = next;
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template { parts })
    }

    pub fn literal(text: &str) -> Template {
        Template { parts: vec![Part::Lit(text.as_bytes().to_vec())] }
    }

    /// The text when it has no variables.
    pub fn as_literal(&self) -> Option<&[u8]> {
        match self.parts.as_slice() {
            [] => Some(b""),
            [Part::Lit(l)] => Some(l),
            _ => None,
        }
    }

    pub fn has_var(&self, pred: impl Fn(&Var) -> bool) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Var(v) if pred(v)))
    }

    pub fn render(&self, src: &dyn VarSource, out: &mut Vec<u8>) {
        for p in &self.parts {
            match p {
                Part::Lit(l) => out.extend_from_slice(l),
                Part::Var(v) => src.write_var(v, out),
            }
        }
    }

    pub fn render_to_vec(&self, src: &dyn VarSource) -> Vec<u8> {
        if let Some(l) = self.as_literal() {
            return l.to_vec();
        }
        let mut out = Vec::with_capacity(64);
        self.render(src, &mut out);
        out
    }
}

/// nginx's `unknown "NAME" variable`, naming the module that owns it when
/// the configuration loads one sluice does not have.
pub fn unknown_variable(name: &str) -> String {
    let hint = crate::config::dynamic_modules::variable_hint(name).unwrap_or_default();
    format!("unknown \"{name}\" variable{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl VarSource for Fixed {
        fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Host => out.extend_from_slice(b"example.com"),
                Var::Http(h) => out.extend_from_slice(h.as_bytes()),
                _ => out.extend_from_slice(b"-"),
            }
        }
    }

    #[test]
    fn compiles_and_renders() {
        let t = Template::compile("a $host b ${host}c $http_user_agent").unwrap();
        assert_eq!(t.render_to_vec(&Fixed), b"a example.com b example.comc user-agent".to_vec());
    }

    #[test]
    fn unknown_variable_is_an_error() {
        assert_eq!(Template::compile("$nope").unwrap_err(), "unknown \"nope\" variable");
        assert!(Template::compile("${host").is_err());
        assert_eq!(Template::compile("/d/$1").unwrap().parts[1], Part::Var(Var::Capture(1)));
        assert!(Template::compile("$10").is_err());
    }

    #[test]
    fn literal_detection() {
        assert_eq!(Template::compile("plain").unwrap().as_literal(), Some(&b"plain"[..]));
        assert_eq!(Template::compile("$host").unwrap().as_literal(), None);
    }
}
