//! Opening a connection to an origin: TCP or a unix socket, the TLS
//! handshake for `https://` origins, and whether the connection belongs
//! to one client (`proxy_protocol on`).

use tokio::net::TcpStream;

use super::upstream_tls;
use crate::config::proxy::{Protocol, ProxyPass};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::worker::WorkerCtx;

pub(super) enum Connected {
    Tcp(TcpStream),
    Unix(tokio::net::UnixStream),
}

/// `bound`: a socket already bound to the `*_bind` address.
pub(super) async fn connect(
    p: &crate::config::proxy::PeerConf,
    bound: Option<tokio::net::TcpSocket>,
) -> std::io::Result<Connected> {
    match (&p.unix, bound) {
        (Some(path), _) => tokio::net::UnixStream::connect(path).await.map(Connected::Unix),
        (None, Some(s)) => s.connect(p.addr).await.map(Connected::Tcp),
        (None, None) => TcpStream::connect(p.addr).await.map(Connected::Tcp),
    }
}

/// `proxy_protocol on`: origin connections are the client's alone.
pub(super) fn lc_proxy_protocol(ctx: &ReqCtx<'_, '_>) -> bool {
    ctx.conf.proxy.proxy_protocol && ctx.proxy_pass.as_ref().is_none_or(|p| p.protocol == Protocol::Http)
}

/// Why no TLS connection to the origin was made.
pub(super) enum TlsFail {
    /// The handshake failed: the next upstream may be tried (502).
    Handshake(String),
    /// The handshake outlasted `proxy_connect_timeout`: nginx's 504, and
    /// the next upstream only with `proxy_next_upstream timeout`.
    Timeout,
    /// The client certificate chosen by variables did not load: nginx's
    /// 500, logged as an error.
    Certificate(String),
}

/// The TLS handshake with an origin (`proxy_pass https://`), bounded by
/// proxy_connect_timeout.
pub(super) async fn tls_connect(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    pass: &ProxyPass,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, TlsFail> {
    // Each module's own `X_ssl_*`; gRPC offers ALPN h2: it needs HTTP/2.
    let (ssl, connect_timeout) = match pass.protocol {
        Protocol::Grpc => (&ctx.conf.grpc.ssl, ctx.conf.grpc.up.connect_timeout),
        Protocol::Uwsgi => (&ctx.conf.uwsgi.ssl, ctx.conf.uwsgi.up.connect_timeout),
        _ => (&ctx.conf.proxy.ssl, ctx.conf.proxy.up.connect_timeout),
    };
    let (key, dynamic) = ssl.client_key(pass.protocol == Protocol::Grpc, &Vars::request(ctx));
    let cfg = if dynamic && key.client_cert.is_some() {
        upstream_tls::Clients::get_dynamic(&w.tls_clients, &key).await.map_err(TlsFail::Certificate)?
    } else {
        w.tls_clients.borrow_mut().get(&key).map_err(TlsFail::Handshake)?
    };
    let evaluated;
    let name = match &ssl.name {
        Some(t) => {
            evaluated = String::from_utf8_lossy(&t.render_to_vec(&Vars::request(ctx))).into_owned();
            &evaluated
        }
        None => &pass.proxy_host,
    };
    let server_name = upstream_tls::server_name(name)
        .ok_or_else(|| TlsFail::Handshake(format!("invalid proxy_ssl_name \"{}\"", name)))?;
    let connector = tokio_rustls::TlsConnector::from(cfg);
    match crate::clock::timeout(connect_timeout, connector.connect(server_name, tcp)).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(TlsFail::Handshake(upstream_tls::handshake_error(&e, name))),
        Err(_) => Err(TlsFail::Timeout),
    }
}
