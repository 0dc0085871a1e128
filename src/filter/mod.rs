//! Response filters that run after the content handler (nginx's header
//! filter chain): expires and add_header, the charset, then compression.

pub mod charset;
pub mod compress;
pub mod headers;
pub mod sub;
