//! The SCGI module's directives (`scgi_*`), with nginx's defaults and
//! messages: those every application-server module has
//! ([`crate::app_directives!`]); SCGI has none of its own.

pub use crate::config::app_module::AppConf as ScgiConf;

crate::app_directives!(scgi, "scgi", crate::config::proxy::Protocol::Scgi);
