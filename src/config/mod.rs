//! Configuration: nginx's grammar (lexer, parser with includes), the
//! directive table, and the builder that produces the validated model the
//! workers run on.

pub mod app_module;
pub mod build;
pub mod captures;
pub mod compress;
pub mod dynamic_modules;
pub mod family;
pub mod geo;
pub mod lexer;
pub mod limit_except;
pub mod listen_groups;
pub mod location;
pub mod map;
pub mod model;
pub mod parser;
pub mod password_files;
pub mod proxy;
pub mod proxy_buffers;
pub mod server_names;
pub mod set_core;
pub mod set_loc;
pub mod set_main;
pub mod set_process;
pub mod set_server;
pub mod set_ssl;
pub mod shared;
pub mod split_clients;
pub mod ssl_conf_command;
pub mod table;
pub mod upstream_block;
pub mod upstream_ssl;
pub mod value;

use std::path::{Path, PathBuf};

pub use model::Config;
pub use parser::ConfError;

/// Where the configuration text comes from.
pub enum Source {
    File(PathBuf),
    /// Built-in text (the no-argument default), named for messages.
    Text {
        name: PathBuf,
        text: String,
    },
}

pub struct LoadOptions {
    pub prefix: PathBuf,
    pub source: Source,
    /// `-g "directives;"`
    pub globals: Option<String>,
    /// `-e FILE`: the main error log when the configuration names none
    /// (nginx's compiled-in `logs/error.log` otherwise).
    pub error_log: Option<String>,
}

pub fn load(opts: &LoadOptions) -> Result<Config, ConfError> {
    let (parsed, conf_file) = match &opts.source {
        Source::File(p) => {
            let dir = p.parent().unwrap_or(Path::new("/")).to_path_buf();
            (parser::parse_file(p, &dir)?, p.clone())
        }
        Source::Text { name, text } => (parser::parse_str(text, name, &opts.prefix)?, name.clone()),
    };
    let conf_dir = conf_file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let cmdline = match &opts.globals {
        Some(g) => parser::parse_str(g, Path::new("command line"), &conf_dir)?.directives,
        None => Vec::new(),
    };
    build::build(&cmdline, &parsed.directives, parsed.files, &opts.prefix, &conf_file, opts.error_log.as_deref())
}

#[cfg(test)]
mod tests;
