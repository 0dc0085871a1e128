//! Variables declared by `set`. nginx adds a variable for every `set $name`
//! anywhere in `http`, before any value is compiled, so a template may use
//! `$name` in any server, above the `set` or in a level that never runs it
//! (it then reads as empty, with a "using uninitialized" warning). Each name
//! gets a slot in the request's variable store ([`ReqCtx::vars`]).
//!
//! [`ReqCtx::vars`]: crate::http::handler::ctx::ReqCtx

use std::cell::RefCell;
use std::collections::HashMap;

use crate::config::parser::Directive;
use crate::variables::Var;

thread_local! {
    static SLOTS: RefCell<HashMap<String, usize>> = RefCell::new(HashMap::new());
}

/// A variable `set` may write: nginx's changeable variables. Built-in ones
/// that are not changeable are refused (`the duplicate "uri" variable`);
/// names built from a prefix (`$http_x`, `$arg_x`, `$cookie_x`,
/// `$sent_http_x`) become the configuration's own, as in nginx.
pub fn settable(name: &str) -> bool {
    match Var::from_name(name) {
        None => true,
        Some(Var::Http(_) | Var::SentHttp(_) | Var::Arg(_) | Var::Cookie(_)) => true,
        // nginx's changeable `$limit_rate` (see `limit::rate`).
        Some(Var::LimitRate) => true,
        // The userid module's changeable `$uid_reset`.
        Some(Var::UidReset) => true,
        Some(_) => false,
    }
}

/// Forgets the names of a previous build.
pub fn reset() {
    SLOTS.with(|s| s.borrow_mut().clear());
}

/// Declares every `set $name` in the tree (names compare ignoring case, as
/// nginx's variables do). `$args` keeps its built-in meaning.
pub fn declare_all(dirs: &[Directive]) {
    for d in dirs {
        if (d.name == "set" || d.name == "auth_request_set")
            && let Some(name) = d.args.first().and_then(|w| w.text.strip_prefix('$'))
            && !name.is_empty()
            && settable(name)
        {
            SLOTS.with(|s| {
                let mut s = s.borrow_mut();
                let n = s.len();
                s.entry(name.to_ascii_lowercase()).or_insert(n);
            });
        }
        if let Some(block) = &d.block {
            declare_all(block);
        }
    }
}

/// Every declared name and its slot, for code that looks names up while
/// serving (SSI's `echo` and values), where the build's table is gone.
pub fn snapshot() -> std::collections::HashMap<String, usize> {
    SLOTS.with(|s| s.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect())
}

/// The slot of a variable `set` declares.
pub fn slot(name: &str) -> Option<usize> {
    SLOTS.with(|s| s.borrow().get(&name.to_ascii_lowercase()).copied())
}
