//! Response filters that run after the content handler (nginx's header
//! filter chain): expires and add_header, then compression (the charset
//! module is `http::charset`).

pub mod compress;
pub mod headers;
pub mod sub;

/// A `*_types` list as the charset and sub filters take it: `text/html`
/// always, then the listed types lowercased (`*` is any type).
pub fn type_list(d: &crate::config::parser::Directive) -> std::sync::Arc<Vec<String>> {
    let mut types: Vec<String> = vec!["text/html".into()];
    types.extend(d.args.iter().map(|w| w.text.to_ascii_lowercase()));
    std::sync::Arc::new(types)
}

/// Whether a MIME type (without parameters) is in such a list.
pub fn type_listed(types: &[String], mime: &str) -> bool {
    // An exact match (the usual case) is a plain comparison.
    types.iter().any(|t| t == mime || t == "*" || t.eq_ignore_ascii_case(mime))
}

/// A Content-Type's type without its parameters (`text/html` of
/// `text/html; charset=utf-8`), trimmed; bytes, not chars, are searched.
pub fn mime_of(content_type: &str) -> &str {
    let mime = match content_type.as_bytes().iter().position(|&b| b == b';') {
        Some(i) => &content_type[..i],
        None => content_type,
    };
    if mime.is_ascii() { mime.trim_ascii() } else { mime.trim() }
}
