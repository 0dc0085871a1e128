//! Client connections: socket I/O helpers, request bodies, and the
//! HTTP/1.x protocol (TLS and HTTP/2 will sit beside `h1`).

pub mod body;
pub mod h1;
pub mod io;
pub mod sock;
