//! HTTP/1.0 and 1.1: head parsing (`codec`), chunked bodies, the response
//! head writer, and the per-connection loop (`conn`).

pub mod chunked;
pub mod codec;
pub mod conn;
mod fault;
mod send;
pub mod upload;
pub mod writer;
