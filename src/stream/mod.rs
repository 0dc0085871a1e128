//! nginx's stream family: TCP proxying (`stream {}`), as nginx's
//! `ngx_stream_*` modules. It owns its directives (`directives`), its
//! configuration model (`conf`, built by `build`), its variables (`vars`)
//! and its session handler (`session`, `proxy`, `relay`), with the shared
//! layers underneath: the upstream core's balancers and passive health,
//! TLS, the PROXY protocol, access rules, `map`/`geo`/`split_clients`,
//! access and error logs. It plugs into the builder, the listeners and the
//! workers through `config::family`, registered by the binary's `main`;
//! nothing below it names it.

pub mod build;
pub mod conf;
pub mod deadlines;
pub mod directives;
pub mod errlog;
pub mod geoip;
pub mod geoip2;
pub mod limit;
pub mod preread;
pub mod proxy;
pub mod relay;
pub mod session;
mod splice;
pub mod tcp_inline;
pub mod tls;
pub mod udp;
pub mod udp_inline;
pub mod udp_origin;
pub mod udp_socket;
pub mod upstream;
pub mod vars;

use std::rc::Rc;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::family::{Family, FamilyConf, Listen, Socket};
use crate::config::model::MainConf;
use crate::config::parser::{ConfError, Directive};

pub struct Stream;

pub static FAMILY: Stream = Stream;

/// Makes `stream {}` known to the configuration builder.
pub fn register() {
    crate::config::family::register(&FAMILY);
}

impl Family for Stream {
    fn block(&self) -> &'static str {
        "stream"
    }

    fn knows(&self, directive: &str) -> bool {
        directives::knows(directive)
    }

    fn build(&self, d: &Directive, ctx: &mut Ctx, main: &MainConf) -> Result<Arc<dyn FamilyConf>, ConfError> {
        Ok(Arc::new(build::build(d, ctx, main)?))
    }
}

impl FamilyConf for conf::StreamConf {
    fn listens(&self) -> &[Listen] {
        &self.listens
    }

    fn upstreams(&self) -> &[Arc<crate::config::proxy::Upstream>] {
        &self.upstreams
    }

    fn serve(
        self: Arc<Self>,
        w: Rc<crate::worker::WorkerCtx>,
        index: usize,
        sock: Socket,
        stop: Rc<tokio::sync::Notify>,
    ) {
        match sock {
            Socket::Tcp(l) => {
                let a = session::StreamAccept { conf: self, index };
                tokio::task::spawn_local(crate::clock::per_poll(crate::worker::accept::supervise(l, a, w, stop)));
            }
            Socket::Udp(_) | Socket::UnixUdp(_) => {
                tokio::task::spawn_local(crate::clock::per_poll(udp::run(self, index, sock, w, stop)));
            }
        }
    }
}
