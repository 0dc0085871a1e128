//! sluice: an nginx-compatible web server.
//!
//! As nginx's source tree: the protocol families (`http`, `stream`; mail
//! to come) on shared layers: `config` (nginx syntax to a validated
//! model), `process` (master, signals, reload), `listener` (sockets),
//! `worker` (per-core event loops), `tls`, `upstream`, `resolver`,
//! `variables`, `log`, `metrics`. A family other than http plugs in
//! through `config::family`, registered by the binary's `main`.
//! docs/architecture.md has the tree.

pub mod access_rules;
pub mod cidr;
pub mod cli;
pub mod clock;
pub mod config;
pub mod fuzzing;
pub mod geoip;
pub mod geoip2;
pub mod http;
pub mod listener;
pub mod log;
pub mod mail;
pub mod metrics;
pub mod pattern;
pub mod process;
pub mod proxy_protocol;
pub mod quic;
pub mod resolver;
pub mod stream;
pub mod tls;
pub mod upstream;
pub mod variables;
pub mod worker;
