//! Reading `ssl_password_file`s, and the one case where reading twice
//! matters: a FIFO (nginx's tests feed a password through `mkfifo` and
//! `echo pw > fifo`, and operators do so from a secrets agent). Its
//! writer supplies the content once; nginx reads the file once, in the
//! master. sluice's master parses the configuration and then its serving
//! process parses it again (`process::supervisor`), so the second open
//! would wait for a writer that never comes. The master therefore keeps
//! what it read from files that are not regular files and hands it to each
//! serving process it starts (`process::handoff`'s `P` message), which
//! takes each content once instead of opening the file. A reload opens
//! the file again, as nginx's does.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What this process read from non-regular password files.
static READ: Mutex<Vec<(PathBuf, Vec<u8>)>> = Mutex::new(Vec::new());
/// What the master read and handed over, each taken once.
static GIVEN: Mutex<Vec<(PathBuf, Vec<u8>)>> = Mutex::new(Vec::new());

/// The content of a password file: the master's copy when it handed one
/// over for `path`, else the file's.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    {
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = given.iter().position(|(p, _)| p == path) {
            return Ok(given.swap_remove(i).1);
        }
    }
    let content = std::fs::read(path)?;
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
        read.retain(|(p, _)| p != path);
        read.push((path.to_path_buf(), content.clone()));
    }
    Ok(content)
}

/// What was read from non-regular files, for the master to hand over.
pub fn read_so_far() -> Vec<(PathBuf, Vec<u8>)> {
    READ.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// In a serving process: the master's copies.
pub fn give(list: Vec<(PathBuf, Vec<u8>)>) {
    *GIVEN.lock().unwrap_or_else(|e| e.into_inner()) = list;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_read_once_and_its_content_kept() {
        let dir = std::env::temp_dir().join(format!("sluice-pwfifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("pw");
        let _ = std::fs::remove_file(&fifo);
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
        let w = fifo.clone();
        let writer = std::thread::spawn(move || std::fs::write(&w, b"secret\n"));
        assert_eq!(read(&fifo).expect("read"), b"secret\n");
        writer.join().expect("join").expect("write");
        let regular = dir.join("plain");
        std::fs::write(&regular, b"x").expect("write");
        assert_eq!(read(&regular).expect("read"), b"x");
        let kept = read_so_far();
        assert!(kept.iter().any(|(p, c)| *p == fifo && c == b"secret\n"), "{kept:?}");
        assert!(!kept.iter().any(|(p, _)| *p == regular), "regular files are read again");
        // A serving process takes the master's copy without opening the
        // FIFO (which would wait for a writer), once.
        give(kept);
        assert_eq!(read(&fifo).expect("given"), b"secret\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
