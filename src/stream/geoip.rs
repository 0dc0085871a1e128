//! ngx_stream_geoip_module: `geoip_country`, `geoip_city` and `geoip_org`
//! at the stream level and the `$geoip_*` variables (`crate::geoip`,
//! shared with http). The directives are read before any other of the
//! level, as http's are, so every template binds `$geoip_*` to these
//! databases; a session looks up its client address (after realip).

use super::directives::{self, Level};
use crate::config::parser::{ConfError, Directive};
use crate::geoip::GeoipConf;

/// Whether the stream level's builder leaves `name` to [`read_main`].
pub fn is_early(name: &str) -> bool {
    crate::geoip::is_database_directive(name)
}

/// Reads the stream level's `geoip_*` directives and publishes the
/// databases for the templates compiled after.
pub fn read_main(dirs: &[Directive]) -> Result<(), ConfError> {
    let mut conf = GeoipConf::default();
    for d in dirs.iter().filter(|d| is_early(&d.name)) {
        directives::check(d, Level::Main)?;
        crate::geoip::database(&mut conf, d)?;
    }
    crate::geoip::set(conf);
    Ok(())
}
