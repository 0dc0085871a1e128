//! The pid file that `-s` reads to find the running master.

use std::path::Path;

/// Written to a temporary name and renamed, so a reader never sees a
/// partly written file.
pub fn write(path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("open() \"{}\" failed ({})", path.display(), super::signal::os_error(&e));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{}\n", std::process::id())).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

pub fn remove(path: &Path) {
    // Only our own: a newer instance may have replaced it.
    if let Ok(s) = std::fs::read_to_string(path)
        && s.trim() == std::process::id().to_string()
    {
        let _ = std::fs::remove_file(path);
    }
}

pub fn read(path: &Path) -> Result<i32, String> {
    let s = std::fs::read_to_string(path)
        .map_err(|e| format!("open() \"{}\" failed ({})", path.display(), super::signal::os_error(&e)))?;
    let t = s.trim();
    t.parse::<i32>()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("invalid PID number \"{}\" in \"{}\"", t, path.display()))
}
