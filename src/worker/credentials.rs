//! `user USER [GROUP]`: the credentials worker threads serve with.
//!
//! nginx's master keeps root (to bind ports and reopen logs on reload) while
//! its worker processes switch users. sluice's workers are threads, and on
//! Linux credentials belong to a thread, not to the process (glibc's
//! `setuid()` only makes them look process-wide by signalling every thread).
//! So each worker thread drops to the configured user with the raw
//! per-thread system calls, and the master thread stays root, exactly the
//! split nginx has. Threads a worker starts afterwards inherit its user.
//!
//! Names are resolved through the C library so NSS sources (LDAP, sssd)
//! answer as they do for nginx; that is the only FFI here.

use std::ffi::{CStr, CString};

use rustix::thread::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

/// Resolved once when the configuration loads, so a worker never looks a
/// name up (and a missing user fails `-t` and reload, not a worker).
#[derive(Clone, Debug, PartialEq)]
pub struct Credentials {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, as `initgroups()` would set them.
    pub groups: Vec<u32>,
}

/// Whether `user` applies: only a root master can hand out other users.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Looks up `user` and `group` (default: the group named like the user,
/// as nginx does); errors are nginx's words.
pub fn lookup(user: &str, group: Option<&str>) -> Result<Credentials, String> {
    let uid = passwd_uid(user).ok_or_else(|| format!("getpwnam(\"{user}\") failed"))?;
    let group = group.unwrap_or(user);
    let gid = group_gid(group).ok_or_else(|| format!("getgrnam(\"{group}\") failed"))?;
    let groups = group_list(user, gid).ok_or_else(|| format!("initgroups({user}, {gid}) failed"))?;
    Ok(Credentials { user: user.to_string(), uid, gid, groups })
}

/// nginx's default for a root master without `user`: `nobody`, with the
/// group `nogroup` where it exists (Debian) and `nobody` elsewhere.
pub fn default_user() -> Result<Credentials, String> {
    let group = if group_gid("nogroup").is_some() { "nogroup" } else { "nobody" };
    lookup("nobody", Some(group))
}

impl Credentials {
    /// Switches the calling thread (and only it) to these credentials.
    /// Groups go first: once the uid is dropped, changing them is refused.
    pub fn apply_to_thread(&self) -> Result<(), String> {
        let groups: Vec<Gid> = self.groups.iter().map(|&g| Gid::from_raw(g)).collect();
        set_thread_groups(&groups).map_err(|e| format!("setgroups({}) failed ({})", self.groups.len(), e))?;
        let gid = Gid::from_raw(self.gid);
        set_thread_res_gid(gid, gid, gid).map_err(|e| format!("setgid({}) failed ({})", self.gid, e))?;
        let uid = Uid::from_raw(self.uid);
        set_thread_res_uid(uid, uid, uid).map_err(|e| format!("setuid({}) failed ({})", self.uid, e))?;
        Ok(())
    }
}

/// Grows a lookup buffer while the C library says it is too small.
fn with_buffer<T>(mut call: impl FnMut(&mut Vec<libc::c_char>) -> Result<T, i32>) -> Option<T> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        match call(&mut buf) {
            Ok(v) => return Some(v),
            Err(libc::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            Err(_) => return None,
        }
    }
}

fn passwd_uid(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    with_buffer(|buf| {
        // SAFETY: getpwnam_r writes only into `pwd` and into `buf` (whose
        // length it is given) and sets `result` to null or to `&pwd`; both
        // outlive the call, and nothing borrowed from `buf` escapes.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
        match rc {
            0 if result.is_null() => Err(libc::ENOENT),
            0 => Ok(pwd.pw_uid),
            e => Err(e),
        }
    })
}

fn group_gid(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    with_buffer(|buf| {
        // SAFETY: as for getpwnam_r above.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe { libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut result) };
        match rc {
            0 if result.is_null() => Err(libc::ENOENT),
            0 => Ok(grp.gr_gid),
            e => Err(e),
        }
    })
}

/// The user's supplementary groups plus `gid` (what `initgroups()` sets).
fn group_list(user: &str, gid: u32) -> Option<Vec<u32>> {
    let cname = CString::new(user).ok()?;
    let name: &CStr = &cname;
    let mut n: libc::c_int = 32;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let asked = n;
        // SAFETY: getgrouplist writes at most `n` entries into `groups`
        // (which has exactly `n`) and stores the count it needs in `n`.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return Some(groups);
        }
        if n <= asked || n > 65536 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_and_unknown_names_use_nginx_words() {
        let c = lookup("root", None).expect("root exists");
        assert_eq!((c.uid, c.gid), (0, 0));
        assert!(c.groups.contains(&0));
        assert_eq!(lookup("no-such-user-xyz", None).unwrap_err(), "getpwnam(\"no-such-user-xyz\") failed");
        assert_eq!(lookup("root", Some("no-such-group-xyz")).unwrap_err(), "getgrnam(\"no-such-group-xyz\") failed");
    }
}
