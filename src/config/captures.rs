//! Named regex captures as variables: `location ~ ^/(?<user>[^/]+)/` or
//! `server_name ~^(?<sub>.+)\.example\.com$` make `$user` and `$sub`
//! usable, as nginx adds a variable for each named capture it compiles.
//! nginx resolves variable names once the whole configuration is read, so a
//! `log_format` or `return` above the regex that defines `$user` works:
//! [`declare_all`] collects every name before anything is built.

use std::cell::RefCell;
use std::collections::HashSet;

thread_local! {
    static NAMES: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// Forgets the names of a previous build.
pub fn reset() {
    NAMES.with(|n| n.borrow_mut().clear());
}

/// Declares the named groups of a compiled regex.
pub fn register<'a>(names: impl Iterator<Item = Option<&'a str>>) {
    NAMES.with(|n| {
        let mut set = n.borrow_mut();
        for name in names.flatten() {
            set.insert(name.to_string());
        }
    });
}

/// Registers the named groups of every `location ~`/`~*`, `server_name ~`
/// and `map` regex in the tree. A regex that does not compile is skipped here: the
/// build reports it at its line.
pub fn declare_all(dirs: &[super::parser::Directive]) {
    for d in dirs {
        let text = |i: usize| d.args.get(i).map(|w| w.text.as_str()).unwrap_or("");
        let patterns: Vec<&str> = match d.name.as_str() {
            "location" if d.args.len() == 2 && (text(0) == "~" || text(0) == "~*") => vec![text(1)],
            "location" => text(0).strip_prefix("~*").or_else(|| text(0).strip_prefix('~')).into_iter().collect(),
            "server_name" => d.args.iter().filter_map(|w| w.text.strip_prefix('~')).collect(),
            // A `map` entry's key is the directive name.
            key if key.starts_with('~') => {
                key.strip_prefix("~*").or_else(|| key.strip_prefix('~')).into_iter().collect()
            }
            _ => Vec::new(),
        };
        for p in patterns {
            if let Ok(re) = regex::bytes::Regex::new(p) {
                register(re.capture_names());
            }
        }
        if let Some(block) = &d.block {
            declare_all(block);
        }
    }
}

pub fn is_defined(name: &str) -> bool {
    NAMES.with(|n| n.borrow().contains(name))
}
