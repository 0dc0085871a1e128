//! nginx's mail family: the IMAP, POP3 and SMTP proxy (`mail {}`), as
//! nginx's `ngx_mail_*` modules. It owns its directives (`directives`),
//! its configuration model (`conf`, built by `build`), the command
//! parsers (`parse`), the authentication request (`auth_http`), the
//! session's auth state (`session`) and the backend login and relay
//! (`proxy`), on the shared layers: TLS, the PROXY protocol, the error
//! log. It plugs into the builder, the listeners and the workers through
//! `config::family`, registered by the binary's `main`; nothing below it
//! names it.

pub mod auth_http;
pub mod build;
mod commands;
pub mod conf;
pub mod conn;
pub mod directives;
pub mod parse;
pub mod proxy;
pub mod session;
pub mod tls;

use std::rc::Rc;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::family::{Family, FamilyConf, Listen, Socket};
use crate::config::model::MainConf;
use crate::config::parser::{ConfError, Directive};

pub struct Mail;

pub static FAMILY: Mail = Mail;

/// Makes `mail {}` known to the configuration builder.
pub fn register() {
    crate::config::family::register(&FAMILY);
}

impl Family for Mail {
    fn block(&self) -> &'static str {
        "mail"
    }

    fn knows(&self, directive: &str) -> bool {
        directives::knows(directive)
    }

    fn build(&self, d: &Directive, ctx: &mut Ctx, main: &MainConf) -> Result<Arc<dyn FamilyConf>, ConfError> {
        Ok(Arc::new(build::build(d, ctx, main)?))
    }
}

impl FamilyConf for conf::MailConf {
    fn listens(&self) -> &[Listen] {
        &self.listens
    }

    fn serve(
        self: Arc<Self>,
        w: Rc<crate::worker::WorkerCtx>,
        index: usize,
        sock: Socket,
        stop: Rc<tokio::sync::Notify>,
    ) {
        if let Socket::Tcp(l) = sock {
            let a = session::MailAccept { conf: self, index };
            tokio::task::spawn_local(crate::clock::per_poll(crate::worker::accept::supervise(l, a, w, stop)));
        }
    }
}
