//! nginx's `ngx_http_rewrite_module`: `rewrite`, `return`, `set`, `break`,
//! `if`, `rewrite_log` and `uninitialized_variable_warn`.
//!
//! Each server and each location (named ones too) compiles the module's
//! directives, in the order written, into a [`Script`]: a list of [`Op`]s
//! where an `if` holds its own body. The server's script runs before
//! location matching (nginx's server rewrite phase, again after every
//! internal redirect), the matched location's after it (the rewrite phase);
//! a changed URI (`rewrite ... last`, or a rewrite without a flag) then
//! restarts location matching, as nginx's post-rewrite phase does.
//!
//! A location-level `if` is nginx's implicit nested location: when its
//! condition holds, the request continues with the `if` block's settings
//! ([`If::conf`], the enclosing location's settings plus the block's own
//! `root`, `add_header`, `proxy_pass`...), which is where nginx's "if is
//! evil" surprises come from; `docs/configuration.md` lists them.
//!
//! `compile` builds scripts from the directive tree, `run` executes one for
//! a request, `vars` keeps the names `set` declares.

pub mod compile;
pub mod run;
pub mod vars;

use std::sync::Arc;

use crate::config::model::{LocConf, Return};
use crate::config::table::{Cmd, HTTP, LIF, LOC, MANY, SIF, SRV, Set};
use crate::variables::Template;

/// The module's directives. `rewrite`, `return`, `set`, `break` and `if`
/// are compiled by [`compile::level`] once their level is complete (the
/// builder only checks their context and arity); the two flags are plain
/// settings.
pub static DIRECTIVES: &[Cmd] = &[
    script("rewrite", SRV | SIF | LOC | LIF, 2, 3, false),
    script("return", SRV | SIF | LOC | LIF, 1, 2, false),
    script("break", SRV | SIF | LOC | LIF, 0, 0, false),
    script("set", SRV | SIF | LOC | LIF, 2, 2, false),
    script("if", SRV | LOC, 1, MANY, true),
    Cmd {
        name: "rewrite_log",
        ctx: HTTP | SRV | SIF | LOC | LIF,
        min: 1,
        max: 1,
        block: false,
        multi: false,
        reset: None,
        set: Set::Loc(compile::rewrite_log),
    },
    Cmd {
        name: "uninitialized_variable_warn",
        ctx: HTTP | SRV | SIF | LOC | LIF,
        min: 1,
        max: 1,
        block: false,
        multi: false,
        reset: None,
        set: Set::Loc(compile::uninitialized_variable_warn),
    },
];

const fn script(name: &'static str, ctx: u8, min: usize, max: usize, block: bool) -> Cmd {
    Cmd { name, ctx, min, max, block, multi: true, reset: None, set: Set::Script }
}

/// The module's settings at one level.
#[derive(Clone)]
pub struct RewriteConf {
    /// This level's rewrite directives (not inherited: each level runs its
    /// own; a server's run before location matching).
    pub script: Option<Arc<Script>>,
    /// `rewrite_log`: matches and rewritten URIs as `notice` lines.
    pub log: bool,
    /// `uninitialized_variable_warn`.
    pub warn_uninitialized: bool,
}

impl Default for RewriteConf {
    fn default() -> Self {
        RewriteConf { script: None, log: false, warn_uninitialized: true }
    }
}

/// One level's rewrite directives, in order.
#[derive(Default)]
pub struct Script {
    pub ops: Vec<Op>,
}

impl Script {
    /// The first top-level `return` (tests name locations by it).
    pub fn first_return(&self) -> Option<&Return> {
        self.ops.iter().find_map(|op| match op {
            Op::Return(r) => Some(r),
            _ => None,
        })
    }
}

pub enum Op {
    Rewrite(Box<Rewrite>),
    Return(Return),
    Set(SetOp),
    Break,
    If(Box<If>),
}

/// `rewrite REGEX REPLACEMENT [FLAG]`.
pub struct Rewrite {
    /// Case-sensitive, as nginx compiles it (`(?i)` still works).
    pub regex: crate::pattern::Regex,
    /// The pattern as written, for `rewrite_log` lines.
    pub pattern: String,
    /// The replacement up to its first `?` (all of it for a redirect).
    pub uri: Template,
    /// After the first `?` of an internal rewrite: the new arguments.
    pub args: Option<Template>,
    /// The replacement contains a `?`: a redirect appends the request's
    /// arguments with `&` instead of `?`.
    pub has_query: bool,
    /// The replacement does not end in `?`: the request's arguments are
    /// kept (appended).
    pub add_args: bool,
    pub flag: Flag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// No flag: the URI changes and the following directives still run;
    /// location matching restarts at the end of the script.
    None,
    Last,
    Break,
    /// 302 (`redirect`, or a replacement starting with `http://`,
    /// `https://` or `$scheme`) or 301 (`permanent`).
    Redirect(u16),
}

/// `set $name value`.
pub struct SetOp {
    pub target: SetTarget,
    pub value: Template,
}

#[derive(Clone, Debug)]
pub enum SetTarget {
    /// A variable of the configuration's own (per-request slot).
    Slot(usize),
    /// `$args`: the request's arguments.
    Args,
}

/// `if (condition) { ... }`.
pub struct If {
    pub cond: Cond,
    pub body: Vec<Op>,
    /// Location level: the implicit nested location the request switches to
    /// when the condition holds. None at server level, where nginx has no
    /// such location (only rewrite directives are allowed there).
    pub conf: Option<Arc<LocConf>>,
}

pub enum Cond {
    /// `($var)`: true unless empty or "0".
    Value(Template),
    /// `($var = value)`, `($var != value)`: byte comparison.
    Equal { var: Template, value: Template, negate: bool },
    /// `($var ~ regex)` and `~*`, `!~`, `!~*`.
    Regex { var: Template, regex: crate::pattern::Regex, pattern: String, negate: bool },
    /// `(-f path)`, `-d`, `-e`, `-x` and their `!` forms.
    File { path: Template, test: FileTest, negate: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileTest {
    /// `-f`: a regular file.
    File,
    /// `-d`: a directory.
    Dir,
    /// `-e`: a file or a directory.
    Exists,
    /// `-x`: executable by its owner.
    Exec,
}
