//! The seam between the shared layers and the protocol families other than
//! HTTP (nginx's `stream {}` and, later, `mail {}`): a family registers
//! itself once at start-up (the binary's `main`), naming its main-level
//! block, and from then on
//!
//! - the builder hands it that block to build into its own model
//!   ([`Family::build`]), with the shared build state ([`Ctx`]: paths, log
//!   files, certificates, warnings);
//! - the listener set binds the sockets its model asks for
//!   ([`FamilyConf::listens`]), kept across reloads as HTTP's are;
//! - each worker hands it those sockets to serve ([`FamilyConf::serve`]),
//!   with the worker's context, so its sessions count against
//!   `worker_connections` and a retiring generation drains them.
//!
//! So nothing below the families names one of them: the registry is filled
//! from above, as nginx's modules register their `ngx_module_t`.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, RwLock};

use super::build::Ctx;
use super::model::{MainConf, SockOpts};
use super::parser::{ConfError, Directive};

/// One protocol family: its main-level block and the directives it knows.
pub trait Family: Sync + Send {
    /// The main-level block it owns (`stream`).
    fn block(&self) -> &'static str;
    /// Whether it has a directive of this name (for `-V`, which names the
    /// modules whose directives exist).
    fn knows(&self, directive: &str) -> bool;
    /// Builds the block into the family's model.
    fn build(&self, d: &Directive, ctx: &mut Ctx, main: &MainConf) -> Result<Arc<dyn FamilyConf>, ConfError>;
}

/// A socket a family's configuration listens on.
#[derive(Clone, Debug, PartialEq)]
pub struct Listen {
    pub addr: SocketAddr,
    /// `listen unix:PATH`: a unix-domain socket, stream or (with `udp`)
    /// datagram (`addr` is then `listener::unix::PLACEHOLDER`).
    pub unix: Option<Arc<str>>,
    /// A UDP socket rather than a TCP listener.
    pub udp: bool,
    pub reuseport: bool,
    pub backlog: i32,
    pub sock: SockOpts,
}

/// A socket handed to a worker: a TCP listener (or a unix stream one, see
/// `listener::unix`), a bound UDP socket, or a bound unix datagram socket
/// (`listen unix:PATH udp`), which std's UDP type cannot carry: its
/// senders' addresses are paths, not IP addresses.
pub enum Socket {
    Tcp(std::net::TcpListener),
    Udp(std::net::UdpSocket),
    UnixUdp(std::os::unix::net::UnixDatagram),
}

/// A family's built configuration, as the shared layers see it.
pub trait FamilyConf: Send + Sync {
    fn listens(&self) -> &[Listen];
    /// The family's upstream blocks (their zones re-resolve in the
    /// background, `upstream::zone`).
    fn upstreams(&self) -> &[std::sync::Arc<super::proxy::Upstream>] {
        &[]
    }
    /// Serves `sock` (the socket of `listens()[index]`) in a worker: spawns
    /// its accept loop on the worker's event loop, which ends when `stop`
    /// is notified (the generation retires).
    fn serve(
        self: Arc<Self>,
        w: Rc<crate::worker::WorkerCtx>,
        index: usize,
        sock: Socket,
        stop: Rc<tokio::sync::Notify>,
    );
}

static FAMILIES: RwLock<Vec<&'static dyn Family>> = RwLock::new(Vec::new());

/// Makes a family known to the builder (once, before any configuration is
/// loaded; registering the same block twice keeps the first).
pub fn register(f: &'static dyn Family) {
    let mut all = FAMILIES.write().unwrap_or_else(|e| e.into_inner());
    if !all.iter().any(|g| g.block() == f.block()) {
        all.push(f);
    }
}

/// The family that owns the main-level block `name`.
pub fn find(name: &str) -> Option<&'static dyn Family> {
    FAMILIES.read().unwrap_or_else(|e| e.into_inner()).iter().copied().find(|f| f.block() == name)
}

/// Whether a registered family has a directive (its block included).
pub fn knows(directive: &str) -> bool {
    FAMILIES.read().unwrap_or_else(|e| e.into_inner()).iter().any(|f| f.block() == directive || f.knows(directive))
}
