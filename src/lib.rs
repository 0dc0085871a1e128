//! sluice: an nginx-compatible web server.
//!
//! The request pipeline, in module order: `config` (nginx syntax to a
//! validated model) -> `process` (master, signals, reload) -> `listener`
//! (sockets) -> `worker` (per-core event loops) -> `connection` (HTTP/1.x)
//! -> `routing` (server and location match) -> `handler` (return, static,
//! empty_gif, error pages) -> `filter` (headers) -> `log`.

pub mod access;
pub mod cache;
pub mod cidr;
pub mod cli;
pub mod clock;
pub mod config;
pub mod connection;
pub mod fastcgi;
pub mod filter;
pub mod fuzzing;
pub mod handler;
pub mod http;
pub mod limit;
pub mod listener;
pub mod log;
pub mod metrics;
pub mod pattern;
pub mod process;
pub mod proxy;
pub mod realip;
pub mod resolver;
pub mod rewrite;
pub mod routing;
pub mod scgi;
pub mod tls;
pub mod upstream;
pub mod uwsgi;
pub mod variables;
pub mod worker;
