//! `limit_rate` and `limit_rate_after` (not implemented yet: the settings
//! have their place so the module's layout is complete).

/// The per-level response rate settings.
#[derive(Clone, Debug, Default)]
pub struct RateConf {}

/// The request's own rate (`set $limit_rate`).
#[derive(Debug, Default)]
pub struct ReqRate {}
