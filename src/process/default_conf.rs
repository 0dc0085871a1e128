//! The embedded configuration used when no config file exists at the
//! default path: serve the current directory on 127.0.0.1:8080 with
//! autoindex, logging requests to stdout, so `sluice` alone is useful.

use std::path::PathBuf;

use crate::config::Source;

/// The shipped MIME table, compiled in so the default needs no files.
pub const MIME_TYPES: &str = include_str!("../../conf/mime.types");

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub fn text(root: &str) -> String {
    // It serves the directory the user is in, so it keeps the starting
    // user: a root nginx's default (workers as nobody) could not read /root.
    let user = if crate::worker::credentials::is_root() { "user root;\n" } else { "" };
    format!(
        "# sluice embedded default configuration\n\
         {user}\
         daemon off;\n\
         worker_processes auto;\n\
         error_log stderr notice;\n\
         pid /tmp/sluice-8080.pid;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
         {MIME_TYPES}\n\
         default_type application/octet-stream;\n\
         access_log /dev/stdout combined;\n\
         sendfile on;\n\
         server {{\n\
         listen 127.0.0.1:8080;\n\
         root {};\n\
         autoindex on;\n\
         location / {{ }}\n\
         }}\n\
         }}\n",
        quote(root)
    )
}

pub fn source() -> Source {
    let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into());
    Source::Text { name: PathBuf::from("(embedded default)"), text: text(&cwd) }
}
