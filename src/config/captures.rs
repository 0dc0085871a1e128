//! Named regex captures as variables: `location ~ ^/(?<user>[^/]+)/` or
//! `server_name ~^(?<sub>.+)\.example\.com$` make `$user` and `$sub`
//! usable afterwards, as nginx adds a variable for each named capture it
//! compiles. The names are collected while one configuration is built.

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

pub fn is_defined(name: &str) -> bool {
    NAMES.with(|n| n.borrow().contains(name))
}
