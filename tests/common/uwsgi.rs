//! A uWSGI server (Debian's uwsgi-core with its python3 plugin) running a
//! WSGI application of the test's, for tests/uwsgi.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

pub const UWSGI: &str = "/usr/bin/uwsgi-core";
pub const PYTHON3_PLUGIN: &str = "/usr/lib/uwsgi/plugins/python3_plugin.so";

/// A uWSGI master with one worker, stopped on drop.
pub struct Uwsgi {
    pub dir: PathBuf,
    /// What `uwsgi_pass` names: `127.0.0.1:PORT` or `unix:/path`.
    pub addr: String,
    child: Option<Child>,
}

impl Uwsgi {
    /// Serves `app` (Python source defining `application`) on `socket`
    /// (`127.0.0.1:0` picks a free port, or a unix socket's path).
    pub fn start(app: &str, unix: bool) -> Uwsgi {
        assert!(
            Path::new(UWSGI).exists() && Path::new(PYTHON3_PLUGIN).exists(),
            "uWSGI is not installed: run scripts/test-all (or apt-get install uwsgi-core uwsgi-plugin-python3)"
        );
        let dir = temp_dir("uwsgi");
        fs::write(dir.join("app.py"), app).unwrap();
        let (socket, addr) = if unix {
            let p = dir.join("app.sock");
            (p.display().to_string(), format!("unix:{}", p.display()))
        } else {
            let port = free_port();
            (format!("127.0.0.1:{port}"), format!("127.0.0.1:{port}"))
        };
        let mut c = Command::new(UWSGI);
        c.args(["--plugin", PYTHON3_PLUGIN, "--socket", &socket, "--chmod-socket=666", "--wsgi-file"])
            .arg(dir.join("app.py"))
            .args(["--master", "--processes", "1", "--die-on-term", "--need-app", "--disable-logging"])
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("uwsgi.log")).unwrap())
            .stderr(fs::File::create(dir.join("uwsgi.err")).unwrap());
        let child = c.spawn().expect("uwsgi starts");
        let mut u = Uwsgi { dir, addr, child: Some(child) };
        let t = Instant::now();
        loop {
            let up = if unix {
                std::os::unix::net::UnixStream::connect(&socket).is_ok()
            } else {
                std::net::TcpStream::connect(&socket).is_ok()
            };
            if up {
                break;
            }
            if t.elapsed() > Duration::from_secs(15) {
                u.stop();
                panic!("uwsgi did not listen:\n{}", read_lossy(&u.dir.join("uwsgi.err")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        u
    }

    pub fn stop(&mut self) {
        // SIGTERM with --die-on-term: the master stops its worker.
        if let Some(c) = self.child.take() {
            super::fpm::terminate(c);
        }
    }
}

impl Drop for Uwsgi {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// `conf/uwsgi_params` under the prefix: sluice's copy, or Debian's for
/// nginx.
pub fn with_params(b: ServerBuilder) -> ServerBuilder {
    let src = if prog() == "nginx" {
        Path::new("/etc/nginx/uwsgi_params").to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/uwsgi_params")
    };
    b.file("conf/uwsgi_params", fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display())))
}
