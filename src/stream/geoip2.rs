//! ngx_stream_geoip2_module: `geoip2 FILE { ... }` at the stream level
//! (`crate::geoip2`, shared with http). Read before any other directive
//! of the level, as http's are, so every template binds the block's
//! variables; without `source=`, a session looks up its client address
//! (after realip). The stream module has no `geoip2_proxy`.

use std::sync::Arc;

use super::directives::{self, Level};
use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Directive};
use crate::geoip2::Geoip2Conf;

/// Reads the stream level's `geoip2` blocks and publishes their variables.
pub fn read_main(dirs: &[Directive], ctx: &mut Ctx) -> Result<(), ConfError> {
    crate::geoip2::reset();
    let conf = Arc::new(Geoip2Conf::default());
    let mut seen = Vec::new();
    for d in dirs.iter().filter(|d| d.name == "geoip2") {
        directives::check(d, Level::Main)?;
        let path = ctx.path(&d.args[0].text);
        crate::geoip2::block(d, path, &conf, &mut seen, &mut ctx.warnings)?;
    }
    Ok(())
}
