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
pub fn register(re: &crate::pattern::Regex) {
    register_names(re.names().iter().map(|(_, n)| &**n));
}

pub fn register_names<'a>(names: impl Iterator<Item = &'a str>) {
    NAMES.with(|n| {
        let mut set = n.borrow_mut();
        for name in names {
            set.insert(name.to_string());
        }
    });
}

/// Registers the named groups of every `location ~`/`~*`, `server_name ~`,
/// `map`, `rewrite` and `if` regex in the tree. A regex that does not compile is skipped here: the
/// build reports it at its line.
pub fn declare_all(dirs: &[super::parser::Directive]) {
    for d in dirs {
        let text = |i: usize| d.args.get(i).map(|w| w.text.as_str()).unwrap_or("");
        let patterns: Vec<&str> = match d.name.as_str() {
            "location" if d.args.len() == 2 && (text(0) == "~" || text(0) == "~*") => vec![text(1)],
            "location" => text(0).strip_prefix("~*").or_else(|| text(0).strip_prefix('~')).into_iter().collect(),
            "server_name" => d.args.iter().filter_map(|w| w.text.strip_prefix('~')).collect(),
            "rewrite" => vec![text(0)],
            // `if ($v ~ regex)`: the last word, without the closing ")".
            "if" if d.args.iter().any(|w| matches!(w.text.as_str(), "~" | "~*" | "!~" | "!~*")) => {
                let last = d.args.iter().rev().map(|w| w.text.as_str()).find(|t| *t != ")").unwrap_or("");
                vec![last.strip_suffix(')').unwrap_or(last)]
            }
            // A `map` entry's key is the directive name.
            key if key.starts_with('~') => {
                key.strip_prefix("~*").or_else(|| key.strip_prefix('~')).into_iter().collect()
            }
            _ => Vec::new(),
        };
        for p in patterns {
            if let Ok(re) = crate::pattern::Regex::new(p, false) {
                register(&re);
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
