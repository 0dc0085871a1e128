//! Setters for the main and `events` contexts.

use std::sync::Arc;

use super::build::Ctx;
use super::model::{CpuAffinity, LocConf, MainConf};
use super::parser::{ConfError, Directive};
use super::table::R;
use super::value;
use crate::log::error::Level;

pub(crate) fn arg(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(|w| w.text.as_str()).unwrap_or("")
}

pub(crate) fn invalid(d: &Directive, v: &str) -> ConfError {
    ConfError::at(format!("invalid value \"{}\" in \"{}\" directive", v, d.name), &d.span)
}

pub(crate) fn flag(d: &Directive) -> Result<bool, ConfError> {
    let v = arg(d, 0);
    value::parse_flag(v).ok_or_else(|| {
        ConfError::at(
            format!("invalid value \"{}\" in \"{}\" directive, it must be \"on\" or \"off\"", v, d.name),
            &d.span,
        )
    })
}

pub(crate) fn number(d: &Directive, i: usize) -> Result<u64, ConfError> {
    let v = arg(d, i);
    value::parse_number(v).ok_or_else(|| invalid(d, v))
}

pub fn worker_processes(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    m.worker_processes = if v == "auto" {
        available_cpus().len().max(1)
    } else {
        match value::parse_number(v) {
            Some(n) if n > 0 && n <= 1024 => n as usize,
            _ => return Err(invalid(d, v)),
        }
    };
    Ok(())
}

/// CPUs this process may run on, in ascending order.
pub fn available_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&i| set.is_set(i)).collect(),
        Err(_) => (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect(),
    }
}

fn parse_mask(d: &Directive, s: &str) -> Result<Vec<usize>, ConfError> {
    if s.is_empty() || s.len() > 1024 || !s.bytes().all(|b| b == b'0' || b == b'1') {
        return Err(ConfError::at(format!("invalid character \"{}\" in \"worker_cpu_affinity\"", s), &d.span));
    }
    Ok(s.bytes().rev().enumerate().filter(|(_, b)| *b == b'1').map(|(i, _)| i).collect())
}

pub fn worker_cpu_affinity(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    if arg(d, 0) == "auto" {
        if d.args.len() > 2 {
            return Err(ConfError::at("invalid number of arguments in \"worker_cpu_affinity\" directive", &d.span));
        }
        let mask = match d.args.get(1) {
            Some(w) => Some(parse_mask(d, &w.text)?),
            None => None,
        };
        m.cpu_affinity = CpuAffinity::Auto(mask);
        return Ok(());
    }
    let masks = d.args.iter().map(|w| parse_mask(d, &w.text)).collect::<Result<Vec<_>, _>>()?;
    m.cpu_affinity = CpuAffinity::Masks(masks);
    Ok(())
}

pub fn worker_rlimit_nofile(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    m.rlimit_nofile = Some(number(d, 0)?);
    Ok(())
}

pub fn pid(m: &mut MainConf, d: &Directive, ctx: &mut Ctx) -> R {
    m.pid = ctx.path(arg(d, 0));
    Ok(())
}

/// `error_log FILE|stderr|syslog:... [LEVEL]`. Several per level are all written to
/// (nginx 1.5.2+); the first at a level replaces what it inherited (main's
/// replaces the compiled-in `logs/error.log`).
pub fn error_log(m: &mut MainConf, loc: Option<&mut LocConf>, d: &Directive, ctx: &mut Ctx) -> R {
    let log = match loc {
        Some(l) => &mut l.error_log,
        None => {
            if !ctx.error_log_set {
                m.error_log = Arc::default();
                ctx.error_log_set = true;
            }
            &mut m.error_log
        }
    };
    error_log_into(log, d, ctx)
}

/// Adds an `error_log` line's target to a level's log (shared by the
/// families: a stream server's `error_log` is the same directive).
pub fn error_log_into(log: &mut Arc<crate::log::error::ErrorLog>, d: &Directive, ctx: &mut Ctx) -> R {
    let target = arg(d, 0);
    if target.starts_with("memory:") {
        return Err(ConfError::at(format!("error_log target \"{}\" is not supported yet", target), &d.span));
    }
    let level = match d.args.get(1) {
        Some(w) => {
            Level::parse(&w.text).ok_or_else(|| ConfError::at(format!("invalid log level \"{}\"", w.text), &d.span))?
        }
        None => Level::Error,
    };
    let syslog = match target.strip_prefix("syslog:") {
        Some(spec) => Some(Arc::new(crate::log::syslog::parse(spec).map_err(|e| ConfError::at(e, &d.span))?)),
        None => None,
    };
    let file = if syslog.is_none() { Some(ctx.error_log_file(target)) } else { None };
    match (file, syslog) {
        (Some(f), _) => Arc::make_mut(log).add(f, level),
        (None, Some(p)) => Arc::make_mut(log).add_syslog(p, level),
        (None, None) => {}
    }
    Ok(())
}

pub fn reset_error_log(l: &mut LocConf) {
    l.error_log = Arc::default();
}

pub fn daemon(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    m.daemon = flag(d)?;
    Ok(())
}

pub fn worker_connections(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let n = number(d, 0)?;
    if n < 2 {
        return Err(invalid(d, arg(d, 0)));
    }
    m.worker_connections = n as usize;
    Ok(())
}

pub fn reuse_port(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    m.reuse_port = flag(d)?;
    Ok(())
}

/// `user USER [GROUP]`: resolved now, so an unknown name fails `-t` and
/// reload with nginx's words; worker threads switch to it when they start.
pub fn user(m: &mut MainConf, d: &Directive, ctx: &mut Ctx) -> R {
    use crate::worker::credentials;
    ctx.user_set = true;
    if !credentials::is_root() {
        let msg =
            "the \"user\" directive makes sense only if the master process runs with super-user privileges, ignored";
        ctx.warnings.push(ConfError::at(msg, &d.span).to_string());
        return Ok(());
    }
    let group = d.args.get(1).map(|w| w.text.as_str());
    m.user = Some(credentials::lookup(arg(d, 0), group).map_err(|e| ConfError::at(e, &d.span))?);
    Ok(())
}
