//! `proxy_buffering` and the directives that size it: how much of an
//! origin's response sluice reads ahead of a slow client, in memory and in a
//! temporary file. Validated as nginx merges them: a combination that nginx
//! refuses at load time is refused here too, with nginx's words.

use std::path::PathBuf;

use super::build::Ctx;
use super::model::LocConf;
use super::parser::{ConfError, Directive};
use super::proxy::UpstreamConf;
use super::set_main::{arg, flag, invalid, number};
use super::table::R;
use super::value;

/// nginx's default buffer size is one memory page: 4k on the platforms
/// sluice runs on (x86-64 and arm64 Linux with 4 KiB pages).
pub const PAGE: usize = 4096;

/// The read-ahead limits of one level (`proxy_buffers` and friends).
#[derive(Clone, Debug)]
pub struct BufferConf {
    /// `proxy_buffers NUMBER SIZE`: memory for the body read ahead is
    /// NUMBER * SIZE per request.
    pub number: usize,
    pub size: usize,
    /// `proxy_busy_buffers_size`; None: twice the larger of
    /// `proxy_buffer_size` and one buffer, computed per level as nginx does.
    pub busy: Option<usize>,
    /// `proxy_temp_file_write_size`; None: as `busy`.
    pub temp_write: Option<usize>,
    /// `proxy_max_temp_file_size`; 0: never spill to disk.
    pub max_temp_file: u64,
    /// `proxy_temp_path`.
    pub temp_path: PathBuf,
}

impl BufferConf {
    pub fn new(prefix: &std::path::Path) -> BufferConf {
        BufferConf {
            number: 8,
            size: PAGE,
            busy: None,
            temp_write: None,
            max_temp_file: 1 << 30,
            temp_path: prefix.join("proxy_temp"),
        }
    }

    /// Bytes of body held in memory per request at most.
    pub fn memory(&self) -> usize {
        self.number.saturating_mul(self.size)
    }

    /// How much goes to the temporary file in one write.
    pub fn temp_write(&self, buffer_size: usize) -> usize {
        self.temp_write.unwrap_or(2 * self.size.max(buffer_size))
    }
}

pub fn buffering(u: &mut UpstreamConf, d: &Directive) -> R {
    u.buffering = flag(d)?;
    Ok(())
}

pub fn buffer_size(u: &mut UpstreamConf, d: &Directive) -> R {
    u.buffer_size = positive_size(d, 0)?;
    Ok(())
}

pub fn buffers(u: &mut UpstreamConf, d: &Directive) -> R {
    let n = number(d, 0)?;
    if n == 0 {
        return Err(invalid(d, arg(d, 0)));
    }
    u.buffers.number = n.min(u32::MAX as u64) as usize;
    u.buffers.size = positive_size(d, 1)?;
    Ok(())
}

pub fn busy_buffers_size(u: &mut UpstreamConf, d: &Directive) -> R {
    u.buffers.busy = Some(size(d, 0)? as usize);
    Ok(())
}

pub fn temp_file_write_size(u: &mut UpstreamConf, d: &Directive) -> R {
    u.buffers.temp_write = Some(size(d, 0)? as usize);
    Ok(())
}

pub fn max_temp_file_size(u: &mut UpstreamConf, d: &Directive) -> R {
    u.buffers.max_temp_file = size(d, 0)?;
    Ok(())
}

/// `*_temp_path PATH [L1 [L2 [L3]]]`: nginx takes any positive level; the
/// levels are accepted and unused, since sluice's temporary files are
/// anonymous (no names to spread over subdirectories).
pub fn temp_path(d: &Directive, ctx: &Ctx) -> Result<PathBuf, ConfError> {
    for w in d.args.iter().skip(1) {
        if value::parse_number(&w.text).is_none_or(|n| n == 0) {
            return Err(invalid(d, &w.text));
        }
    }
    Ok(ctx.path(arg(d, 0)))
}

fn size(d: &Directive, i: usize) -> Result<u64, ConfError> {
    let v = arg(d, i);
    value::parse_size(v).ok_or_else(|| invalid(d, v))
}

fn positive_size(d: &Directive, i: usize) -> Result<usize, ConfError> {
    let v = arg(d, i);
    value::parse_size(v).filter(|&n| n > 0).map(|n| n.min(1 << 40) as usize).ok_or_else(|| invalid(d, v))
}

/// The directives whose combination `check` judges (after the module's
/// prefix: `proxy_`, `fastcgi_`).
const SIZED: &[&str] = &["buffer_size", "buffers", "busy_buffers_size", "temp_file_write_size", "max_temp_file_size"];

/// nginx's merge-time checks, run when a level set one of the sizes (a
/// level that sets none inherits an already checked combination). nginx
/// reports the end of the `http` block; sluice names the directive.
pub fn check(c: &LocConf, dirs: &[Directive]) -> R {
    check_module(&c.proxy.up, "proxy", dirs)?;
    check_module(&c.fastcgi.up, "fastcgi", dirs)
}

/// [`check`] for one module's settings, its directives named `PREFIX_*`.
pub fn check_module(u: &UpstreamConf, prefix: &str, dirs: &[Directive]) -> R {
    let sized = |n: &str| n.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')).is_some_and(|r| SIZED.contains(&r));
    let Some(d) = dirs.iter().find(|d| sized(&d.name)) else { return Ok(()) };
    let b = &u.buffers;
    let fail = |msg: &str| Err(ConfError::at(msg.to_string(), &d.span));
    if b.number < 2 {
        return fail(&format!("there must be at least 2 \"{prefix}_buffers\""));
    }
    let size = u.buffer_size.max(b.size);
    let busy = b.busy.unwrap_or(2 * size);
    let of = format!("the maximum of the value of \"{prefix}_buffer_size\" and one of the \"{prefix}_buffers\"");
    if busy < size {
        return fail(&format!("\"{prefix}_busy_buffers_size\" must be equal to or greater than {of}"));
    }
    if busy > (b.number - 1).saturating_mul(b.size) {
        return fail(&format!(
            "\"{prefix}_busy_buffers_size\" must be less than the size of all \"{prefix}_buffers\" minus one buffer"
        ));
    }
    if b.temp_write(u.buffer_size) < size {
        return fail(&format!("\"{prefix}_temp_file_write_size\" must be equal to or greater than {of}"));
    }
    if b.max_temp_file != 0 && b.max_temp_file < size as u64 {
        return fail(&format!(
            "\"{prefix}_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be \
             equal to or greater than {of}"
        ));
    }
    Ok(())
}
