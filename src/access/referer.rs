//! `valid_referers` and `$invalid_referer` (ngx_http_referer_module).

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::R;

#[derive(Debug)]
pub struct ValidReferers {}

pub fn valid_referers(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    Err(ConfError::at("\"valid_referers\" is not supported yet", &d.span))
}
