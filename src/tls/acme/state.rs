//! `state_path`: the issuer's directory that survives restarts, as
//! nginx-acme lays it out: `account.key` and `account.url`, and for each
//! certificate `ID.crt` (the chain) and `ID.key`. Files are written
//! atomically (a temporary file in the same directory, synced, renamed
//! over the old one) with 0600 for keys, so a crash leaves either the old
//! file or the new one; a file that does not parse is ignored with an
//! error-log line and the certificate is ordered again.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::sign::CertifiedKey;

use crate::log::error::Level;
use crate::log_error;

/// An issuer's state directory (None: `state_path off`).
#[derive(Clone, Debug, PartialEq)]
pub struct StateDir(pub Option<PathBuf>);

impl StateDir {
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.0.as_ref().map(|d| d.join(name))
    }

    /// A file's bytes; None when absent (or `off`), the error logged when
    /// it exists and cannot be read.
    pub fn read(&self, name: &str) -> Option<Vec<u8>> {
        let p = self.path(name)?;
        match std::fs::read(&p) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                log_error!(Level::Error, "open() \"{}\" failed ({}), acme state ignored", p.display(), e);
                None
            }
        }
    }

    /// Replaces `name` atomically; `private`: 0600 (keys), else 0644.
    pub fn write(&self, name: &str, data: &[u8], private: bool) -> Result<(), String> {
        let Some(dir) = &self.0 else { return Ok(()) };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("mkdir() \"{}\" failed ({e})", dir.display()))?;
        let target = dir.join(name);
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(if private { 0o600 } else { 0o644 })
                .open(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &target)?;
            // The rename itself durable: sync the directory.
            std::fs::File::open(dir)?.sync_all()
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write acme state \"{}\" ({e})", target.display())
        })
    }
}

/// A certificate and key as served: the PEM (what `$acme_certificate`
/// and `$acme_certificate_key` evaluate to, as `data:`), the loaded key
/// handshakes use, and the validity for the renewal schedule.
#[derive(Debug)]
pub struct Issued {
    pub chain_pem: Arc<[u8]>,
    pub key_pem: Arc<[u8]>,
    pub ck: Arc<CertifiedKey>,
    pub not_before: i64,
    pub not_after: i64,
    /// The leaf's serial, for log lines.
    pub serial: String,
}

impl Issued {
    /// Loads and checks a chain and key (the key must match the leaf).
    pub fn load(chain_pem: &[u8], key_pem: &[u8]) -> Result<Issued, String> {
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let ck = crate::tls::certs::load_pair(
            &provider,
            crate::tls::certs::Pem::Data(chain_pem),
            crate::tls::certs::Pem::Data(key_pem),
            &[],
            None,
        )?;
        let leaf = ck.cert.first().ok_or("no certificate")?;
        let (nb, na) = crate::tls::client_cert::validity(leaf).ok_or("certificate validity unreadable")?;
        let serial = crate::tls::ocsp::der::cert_fields(leaf)
            .map(|f| f.serial.iter().map(|b| format!("{b:02X}")).collect())
            .unwrap_or_default();
        Ok(Issued {
            chain_pem: chain_pem.into(),
            key_pem: key_pem.into(),
            ck,
            not_before: nb.unix,
            not_after: na.unix,
            serial,
        })
    }

    /// nginx-acme's schedule (and Let's Encrypt's advice): renew at two
    /// thirds of the lifetime.
    pub fn renew_at(&self) -> i64 {
        self.not_before + (self.not_after - self.not_before).max(0) * 2 / 3
    }
}

/// The stored certificate `id` of `dir`, if both files are there and
/// good; a bad one is logged and ignored (the caller orders a new one).
pub fn load_certificate(dir: &StateDir, id: &str) -> Option<Issued> {
    let chain = dir.read(&format!("{id}.crt"))?;
    let key = dir.read(&format!("{id}.key"))?;
    match Issued::load(&chain, &key) {
        Ok(i) => Some(i),
        Err(why) => {
            let at = dir.0.as_deref().unwrap_or(Path::new("")).join(format!("{id}.crt"));
            log_error!(Level::Error, "acme state \"{}\" ignored: {}", at.display(), why);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_are_atomic_with_modes() {
        let dir = std::env::temp_dir().join(format!("sluice-acme-state-{}", std::process::id()));
        let s = StateDir(Some(dir.join("sub")));
        s.write("a.key", b"secret", true).unwrap();
        s.write("a.url", b"one", false).unwrap();
        s.write("a.url", b"two", false).unwrap();
        let mode = |n: &str| std::fs::metadata(dir.join("sub").join(n)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("a.key"), 0o600);
        assert_eq!(mode("a.url"), 0o644);
        assert_eq!(s.read("a.url").as_deref(), Some(&b"two"[..]));
        assert_eq!(s.read("missing"), None);
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(StateDir(None).read("a.key"), None);
    }
}
