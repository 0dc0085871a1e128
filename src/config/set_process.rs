//! Main-context directives about the process that sluice's design answers
//! differently (one process, workers as threads, modules compiled in):
//! `master_process`, `worker_shutdown_timeout`, `env`,
//! `pcre_jit`, `timer_resolution`, `worker_priority`, `worker_rlimit_core`,
//! `working_directory`, `lock_file`, `thread_pool`, `ssl_engine`, and the
//! `events` block's `use`, `debug_connection`, `worker_aio_requests` and
//! `epoll_events`. Each is accepted where nginx would run the
//! configuration and honoured where sluice can; `docs/configuration.md`
//! says which.

use super::build::Ctx;
use super::model::MainConf;
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid};
use super::table::R;
use super::value;

/// `master_process on|off`: with `on` (the default) a master process
/// keeps the listening sockets and restarts the serving process that
/// holds the worker threads if it dies (`process::supervisor`); `off` is
/// one process, nginx's debugging mode.
pub fn master_process(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    m.master_process = flag(d)?;
    Ok(())
}

/// `worker_shutdown_timeout time`: how long a retiring worker generation
/// (quit, reload) waits for its connections before closing them.
pub fn worker_shutdown_timeout(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    m.worker_shutdown_timeout = Some(value::parse_time(v).ok_or_else(|| invalid(d, v))?);
    Ok(())
}

/// `env VAR[=VALUE]`: nginx clears its workers' environment but for the
/// listed variables. sluice's workers are threads of one process, which
/// keeps its environment whole; a value cannot be set safely once threads
/// run. Accepted; the name is checked as nginx does.
pub fn env(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if v.is_empty() || v.starts_with('=') {
        return Err(invalid(d, v));
    }
    Ok(())
}

/// `pcre_jit on|off`: sluice's regexes are compiled by the `regex` crate,
/// which needs no JIT switch.
pub fn pcre_jit(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    flag(d).map(|_| ())
}

/// `timer_resolution interval`: sluice reads the clock once per task poll
/// and once a second for the cached Date (`clock`), already coarse.
pub fn timer_resolution(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    value::parse_time(v).map(|_| ()).ok_or_else(|| invalid(d, v))
}

/// `worker_priority [-|+]N`: the nice value of each worker thread (Linux
/// keeps one per thread), set before the worker drops to `user`.
pub fn worker_priority(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let (neg, digits) = match v.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let n = value::parse_number(digits)
        .filter(|&n| n <= i32::MAX as u64)
        .ok_or_else(|| ConfError::at("\"worker_priority\" directive invalid number", &d.span))? as i32;
    m.worker_priority = Some(if neg { -n } else { n });
    Ok(())
}

/// `worker_rlimit_core size`: the core file size limit, set for the
/// process (`process::rlimits`), with core files allowed again after the
/// workers drop to `user`.
pub fn worker_rlimit_core(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let n =
        value::parse_size(v).ok_or_else(|| ConfError::at("\"worker_rlimit_core\" directive invalid value", &d.span))?;
    m.rlimit_core = Some(n);
    Ok(())
}

/// `working_directory path`: the process's directory (where core files
/// go), as given: nginx resolves it against nothing either.
pub fn working_directory(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    m.working_directory = Some(std::path::PathBuf::from(arg(d, 0)));
    Ok(())
}

/// `ssl_engine device`: an OpenSSL engine (a hardware key store). sluice's
/// TLS is rustls, which loads none; running without the engine would
/// serve with keys the operator meant to keep in hardware, so refused.
pub fn ssl_engine(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    Err(ConfError::at(
        format!(
            "ssl_engine \"{}\": sluice's TLS (rustls) cannot load OpenSSL engines; keep the key in a file \
             (ssl_certificate_key) or remove the directive",
            arg(d, 0)
        ),
        &d.span,
    ))
}

/// `thread_pool name threads=N [max_queue=N]`: sluice reads files on its
/// workers' event loops (sendfile), with no thread pools; the values are
/// checked as nginx checks them and the name recorded for `aio threads=`.
pub fn thread_pool(_: &mut MainConf, d: &Directive, ctx: &mut Ctx) -> R {
    let name = arg(d, 0);
    if ctx.thread_pools.iter().any(|p| p == name) {
        return Err(ConfError::at(format!("duplicate thread pool \"{name}\""), &d.span));
    }
    let mut threads = false;
    for w in &d.args[1..] {
        let t = w.text.as_str();
        if let Some(n) = t.strip_prefix("threads=") {
            if value::parse_number(n).is_none_or(|n| n == 0) {
                return Err(ConfError::at(format!("invalid threads value \"{t}\""), &d.span));
            }
            threads = true;
        } else if let Some(n) = t.strip_prefix("max_queue=")
            && value::parse_number(n).is_none()
        {
            return Err(ConfError::at(format!("invalid max_queue value \"{t}\""), &d.span));
        }
    }
    if !threads {
        return Err(ConfError::at("\"thread_pool\" must have \"threads\" parameter", &d.span));
    }
    ctx.thread_pools.push(name.to_string());
    Ok(())
}

/// `use method`: sluice runs on epoll (through tokio), the one method
/// Debian's nginx has on Linux.
pub fn use_events(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    match arg(d, 0) {
        "epoll" => Ok(()),
        v => Err(ConfError::at(format!("invalid event type \"{v}\""), &d.span)),
    }
}

/// `debug_connection address | CIDR | unix: | hostname`: the clients
/// whose connections log at level debug to every log (`log::debug`). A
/// name stands for each address it resolves to now, as nginx resolves it
/// once at load (and must resolve: `host not found`).
pub fn debug_connection(m: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    if let Some(p) = crate::cidr::Cidr::parse(v) {
        m.debug_connection.push(p.cidr);
        return Ok(());
    }
    let not_found = || ConfError::at(format!("host not found in debug_connection \"{v}\""), &d.span);
    if v.contains(['/', '[', ']']) {
        return Err(not_found());
    }
    let (list, _) = crate::cidr::parse_or_resolve(v).map_err(|_| not_found())?;
    if list.is_empty() {
        return Err(not_found());
    }
    m.debug_connection.extend(list);
    Ok(())
}

/// `worker_aio_requests`, `epoll_events`: sizes of nginx's own event
/// arrays; checked numbers, no effect.
pub fn events_number(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    value::parse_number(arg(d, 0))
        .map(|_| ())
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid number", d.name), &d.span))
}
