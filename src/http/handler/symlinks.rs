//! nginx's `disable_symlinks`: a file is served only if no component of its
//! path (after the `from=` prefix) is a symbolic link (`on`), or only if
//! every link has the owner of what it points to (`if_not_owner`). As
//! nginx does, the path is walked one component at a time with `openat`
//! relative to the directory opened before it, so no link can be swapped
//! in between a check and the open. A refused link is `ELOOP` (`on`) or
//! `EMLINK` (`if_not_owner`), which the static handler answers with 403,
//! or, in place of a directory, `ENOTDIR` (404), as nginx answers.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::variables::Template;

pub static DIRECTIVES: &[Cmd] = &[cmd("disable_symlinks", HSL, 1, 2, Set::Loc(disable_symlinks))];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    #[default]
    Off,
    On,
    IfNotOwner,
}

#[derive(Clone, Debug, Default)]
pub struct SymlinksConf {
    pub policy: Policy,
    /// `from=`: the part of the path not checked (`$document_root`).
    pub from: Option<Arc<Template>>,
}

fn disable_symlinks(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let policy = match d.args[0].text.as_str() {
        "off" => Policy::Off,
        "on" => Policy::On,
        "if_not_owner" => Policy::IfNotOwner,
        v => return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span)),
    };
    let mut from = None;
    if let Some(w) = d.args.get(1) {
        let Some(t) = w.text.strip_prefix("from=") else {
            return Err(ConfError::at(format!("invalid parameter \"{}\"", w.text), &d.span));
        };
        if policy == Policy::Off {
            return Err(ConfError::at("\"from=\" cannot be used with \"off\" parameter", &d.span));
        }
        from = Some(Arc::new(Template::compile(t).map_err(|e| ConfError::at(e, &d.span))?));
    }
    c.symlinks = SymlinksConf { policy, from };
    Ok(())
}

/// Opens `path` (absolute) for reading, refusing links after its first
/// `from` bytes (a prefix the caller checked) as `policy` says; `O_NONBLOCK`
/// as the plain open.
pub fn open(path: &[u8], from: usize, policy: Policy) -> io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    if path.first() != Some(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if from >= path.len() {
        // `from=` covers the whole path: nothing is checked.
        let fd = rustix::fs::open(
            std::ffi::OsStr::from_bytes(path),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        return Ok(File::from(fd));
    }
    // The unchecked prefix ends at a component boundary at or before `from`.
    let mut split = from.clamp(1, path.len());
    while split > 1 && path.get(split) != Some(&b'/') {
        split -= 1;
    }
    let prefix = std::ffi::OsStr::from_bytes(&path[..split]);
    let mut dir: OwnedFd = rustix::fs::open(prefix, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let comps: Vec<&[u8]> = path[split..].split(|&b| b == b'/').filter(|c| !c.is_empty()).collect();
    let Some((last, inner)) = comps.split_last() else {
        // The prefix itself (a directory).
        let fd = rustix::fs::openat(&dir, ".", OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
        return Ok(File::from(fd));
    };
    for c in inner {
        dir = step(&dir, c, policy, true)?;
    }
    let fd = step(&dir, last, policy, false)?;
    // A trailing slash names a directory: a file there is ENOTDIR (404),
    // as the kernel's open of "file/" says.
    if path.ends_with(b"/") && rustix::fs::fstat(&fd)?.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(File::from(fd))
}

/// One component: a directory to walk through, or the file itself.
fn step(dir: &OwnedFd, name: &[u8], policy: Policy, through: bool) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(name);
    let base = if through { OFlags::PATH } else { OFlags::RDONLY | OFlags::NONBLOCK };
    match policy {
        Policy::Off => Ok(rustix::fs::openat(dir, name, base | OFlags::CLOEXEC, Mode::empty())?),
        Policy::On => {
            let fd = rustix::fs::openat(dir, name, base | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
            // O_PATH|O_NOFOLLOW opens a link itself rather than failing; a
            // link in place of a directory is "not a directory", nginx's
            // 404 (a link as the file itself is ELOOP, its 403).
            if through && rustix::fs::fstat(&fd)?.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            Ok(fd)
        }
        Policy::IfNotOwner => {
            let link = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            let fd = rustix::fs::openat(dir, name, base | OFlags::CLOEXEC, Mode::empty())?;
            if FileType::from_raw_mode(link.st_mode) == FileType::Symlink {
                let target = rustix::fs::fstat(fd.as_fd())?;
                if target.st_uid != link.st_uid {
                    return Err(io::Error::from_raw_os_error(libc::EMLINK));
                }
            }
            Ok(fd)
        }
    }
}
