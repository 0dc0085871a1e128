//! Compiles a level's rewrite directives into a [`Script`], with nginx's
//! argument rules and messages (`ngx_http_rewrite`, `..._return`, `..._set`,
//! `..._if_condition`).

use std::sync::Arc;

use super::{Cond, FileTest, Flag, If, Op, Rewrite, Script, SetOp, SetTarget};
use crate::config::build::{Ctx, apply_if_level};
use crate::config::model::{LocConf, MainConf, Return};
use crate::config::parser::{ConfError, Directive};
use crate::config::set_main::{arg, flag};
use crate::config::table::{LIF, R, SIF, Set, lookup};
use crate::variables::Template;

pub fn rewrite_log(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.rewrite.log = flag(d)?;
    Ok(())
}

pub fn uninitialized_variable_warn(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.rewrite.warn_uninitialized = flag(d)?;
    Ok(())
}

/// The script of a server (`location == false`) or location block whose
/// other directives are applied (`conf` is the level's complete settings:
/// an `if` block's implicit location starts from them, as nginx merges it
/// into its parent). None when the block has no rewrite directives.
pub fn level(
    dirs: &[Directive],
    location: bool,
    conf: &LocConf,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<Option<Arc<Script>>, ConfError> {
    let ops = ops(dirs, location, conf, ctx, main)?;
    Ok(if ops.is_empty() { None } else { Some(Arc::new(Script { ops })) })
}

fn ops(
    dirs: &[Directive],
    location: bool,
    conf: &LocConf,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<Vec<Op>, ConfError> {
    let mut ops = Vec::new();
    for d in dirs {
        if !lookup(&d.name).is_some_and(|c| matches!(c.set, Set::Script)) {
            continue;
        }
        ops.push(match d.name.as_str() {
            "rewrite" => Op::Rewrite(Box::new(rewrite(d)?)),
            "return" => Op::Return(parse_return(d)?),
            "break" => Op::Break,
            "set" => Op::Set(set(d)?),
            "if" => Op::If(Box::new(if_block(d, location, conf, ctx, main)?)),
            _ => continue,
        });
    }
    Ok(ops)
}

fn compile(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

fn regex(d: &Directive, pattern: &str, caseless: bool) -> Result<crate::pattern::Regex, ConfError> {
    let re = crate::pattern::Regex::new(pattern, caseless).map_err(|e| ConfError::at(e, &d.span))?;
    crate::config::captures::register(&re);
    Ok(re)
}

fn is_redirect_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://") || s.starts_with("$scheme")
}

/// `rewrite REGEX REPLACEMENT [last|break|redirect|permanent]`.
fn rewrite(d: &Directive) -> Result<Rewrite, ConfError> {
    let pattern = arg(d, 0);
    let mut repl = arg(d, 1);
    if repl.is_empty() {
        return Err(ConfError::at("empty replacement", &d.span));
    }
    // nginx: the pattern is compiled case-sensitively ("TODO: caseless").
    let re = regex(d, pattern, false)?;
    // A final "?" drops the request's arguments.
    let add_args = !repl.ends_with('?');
    if !add_args {
        repl = &repl[..repl.len() - 1];
    }
    let mut flag = if is_redirect_url(repl) { Flag::Redirect(302) } else { Flag::None };
    if let Some(w) = d.args.get(2) {
        let redirect = matches!(flag, Flag::Redirect(_));
        flag = match w.text.as_str() {
            "last" if redirect => flag,
            "break" if redirect => flag,
            "last" => Flag::Last,
            "break" => Flag::Break,
            "redirect" => Flag::Redirect(302),
            "permanent" => Flag::Redirect(301),
            other => return Err(ConfError::at(format!("invalid parameter \"{}\"", other), &d.span)),
        };
    }
    let has_query = repl.contains('?');
    let (uri, args) = match (flag, repl.find('?')) {
        (Flag::Redirect(_), _) | (_, None) => (compile(d, repl)?, None),
        (_, Some(q)) => (compile(d, &repl[..q])?, Some(compile(d, &repl[q + 1..])?)),
    };
    Ok(Rewrite { regex: re, pattern: pattern.to_string(), uri, args, has_query, add_args, flag })
}

/// `return code [text]`, `return code URL`, `return URL`.
pub fn parse_return(d: &Directive) -> Result<Return, ConfError> {
    let first = arg(d, 0);
    let invalid = || ConfError::at(format!("invalid return code \"{}\"", first), &d.span);
    let code = match crate::config::value::parse_number(first) {
        Some(n) if (100..=999).contains(&n) => n as u16,
        Some(_) => return Err(invalid()),
        None if d.args.len() == 1 && is_redirect_url(first) => {
            return Ok(Return { code: 302, text: Some(compile(d, first)?) });
        }
        None => return Err(invalid()),
    };
    let text = d.args.get(1).map(|w| compile(d, &w.text)).transpose()?;
    if code == 444 && text.is_some() {
        return Err(invalid());
    }
    Ok(Return { code, text })
}

/// `set $name value`.
fn set(d: &Directive) -> Result<SetOp, ConfError> {
    let var = arg(d, 0);
    let Some(name) = var.strip_prefix('$') else {
        return Err(ConfError::at(format!("invalid variable name \"{}\"", var), &d.span));
    };
    if name.is_empty() {
        return Err(ConfError::at("invalid variable name \"$\"", &d.span));
    }
    let target = if name.eq_ignore_ascii_case("args") {
        SetTarget::Args
    } else if !super::vars::settable(name) {
        return Err(ConfError::at(format!("the duplicate \"{}\" variable", name), &d.span));
    } else {
        // Declared by vars::declare_all before anything was compiled.
        let slot =
            super::vars::slot(name).ok_or_else(|| ConfError::at(format!("unknown \"{}\" variable", name), &d.span))?;
        SetTarget::Slot(slot)
    };
    Ok(SetOp { target, value: compile(d, arg(d, 1))? })
}

fn if_block(
    d: &Directive,
    location: bool,
    conf: &LocConf,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<If, ConfError> {
    let cond = condition(d)?;
    let block = d.block.as_deref().unwrap_or(&[]);
    // The block's other directives (`root`, `add_header`...) make the
    // implicit location; at server level only rewrite directives are
    // allowed, and nginx's server `if` has no settings of its own.
    let mut if_conf = crate::config::build::inherit_if(conf);
    apply_if_level(block, if location { LIF } else { SIF }, ctx, main, &mut if_conf)?;
    let body = ops(block, location, &if_conf, ctx, main)?;
    Ok(If { cond, body, conf: location.then(|| Arc::new(if_conf)) })
}

/// nginx's `ngx_http_rewrite_if_condition`: the words between `(` and `)`
/// (the parentheses may stand alone or stick to the first and last word).
fn condition(d: &Directive) -> Result<Cond, ConfError> {
    let invalid = |w: &str| ConfError::at(format!("invalid condition \"{}\"", w), &d.span);
    let mut v: Vec<String> = d.args.iter().map(|w| w.text.clone()).collect();
    if !v[0].starts_with('(') {
        return Err(invalid(&v[0]));
    }
    let cur: usize = if v[0].len() == 1 {
        1
    } else {
        v[0].remove(0);
        0
    };
    let n = v.len();
    if !v[n - 1].ends_with(')') {
        return Err(invalid(&v[n - 1]));
    }
    // `last` may fall below `cur` for "()" or "( )": nginx then reports
    // the word at `cur`.
    let last: isize = if v[n - 1].len() == 1 {
        n as isize - 2
    } else {
        v[n - 1].pop();
        n as isize - 1
    };
    let word = |i: usize| v.get(i).map(String::as_str).unwrap_or("");
    let w = word(cur);
    let (cur_i, last_u) = (cur as isize, last.max(0) as usize);
    if w.len() > 1 && w.starts_with('$') {
        if cur_i != last && cur_i + 2 != last {
            return Err(invalid(w));
        }
        let var = variable(d, w)?;
        if cur_i == last {
            return Ok(Cond::Value(var));
        }
        let op = word(cur + 1);
        let operand = word(last_u);
        return match op {
            "=" | "!=" => Ok(Cond::Equal { var, value: compile(d, operand)?, negate: op == "!=" }),
            "~" | "~*" | "!~" | "!~*" => {
                let re = regex(d, operand, op.ends_with('*'))?;
                Ok(Cond::Regex { var, regex: re, pattern: operand.to_string(), negate: op.starts_with('!') })
            }
            _ => Err(ConfError::at(format!("unexpected \"{}\" in condition", op), &d.span)),
        };
    }
    let negate = w.starts_with('!');
    let test = if negate { &w[1..] } else { w };
    if test.len() == 2 && test.starts_with('-') {
        if cur_i + 1 != last {
            return Err(invalid(w));
        }
        let test = match test.as_bytes()[1] {
            b'f' => FileTest::File,
            b'd' => FileTest::Dir,
            b'e' => FileTest::Exists,
            b'x' => FileTest::Exec,
            _ => return Err(invalid(w)),
        };
        return Ok(Cond::File { path: compile(d, word(last_u))?, test, negate });
    }
    Err(invalid(w))
}

/// The `$name` operand: nginx takes everything after `$` as the name.
fn variable(d: &Directive, w: &str) -> Result<Template, ConfError> {
    let name = &w[1..];
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ConfError::at(crate::variables::unknown_variable(name), &d.span));
    }
    compile(d, w)
}
