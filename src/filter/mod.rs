//! Response filters that run after the content handler (nginx's header
//! filter chain): expires and add_header, then compression.

pub mod compress;
pub mod headers;
