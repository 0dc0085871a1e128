//! Response filters that run after the content handler (nginx's header
//! filter chain): expires and add_header for now; compression comes here.

pub mod headers;
