//! The uwsgi module's directives (`uwsgi_*`), with nginx's defaults and
//! messages: those every application-server module has
//! ([`crate::app_directives!`]), and the packet's modifiers.

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::set_main::arg;
use crate::config::table::R;

pub use crate::config::app_module::AppConf as UwsgiConf;

crate::app_directives!(uwsgi, "uwsgi", crate::config::proxy::Protocol::Uwsgi);

/// `uwsgi_ssl_*`: TLS to a `suwsgi://` origin.
pub static SSL_DIRECTIVES: &[Cmd] = crate::upstream_ssl_directives!("uwsgi");

/// uwsgi's own: the packet header's two modifiers.
pub static MODIFIERS: &[Cmd] = &[
    cmd("uwsgi_modifier1", HSL, 1, 1, Set::Loc(uwsgi_modifier1)),
    cmd("uwsgi_modifier2", HSL, 1, 1, Set::Loc(uwsgi_modifier2)),
];

/// nginx's `ngx_conf_set_num_slot` bounded to a byte, as its post handler
/// bounds it.
fn modifier(d: &Directive) -> Result<u8, ConfError> {
    let v = arg(d, 0);
    let n = crate::config::value::parse_number(v)
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid number", d.name), &d.span))?;
    u8::try_from(n).map_err(|_| ConfError::at("value must be between 0 and 255", &d.span))
}

fn uwsgi_modifier1(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.modifier1 = modifier(d)?;
    Ok(())
}

fn uwsgi_modifier2(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.uwsgi.modifier2 = modifier(d)?;
    Ok(())
}
