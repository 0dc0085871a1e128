//! A uWSGI server (Debian's uwsgi-core with its python3 plugin) running a
//! WSGI application of the test's, speaking uwsgi or SCGI, for
//! tests/uwsgi.rs and tests/scgi.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// The WSGI application the tests run: `/env` lists the variables (but
/// those that differ per run) and the body, the others answer a status,
/// a stream without length, 1 MiB, a body's size, or late.
pub const APP: &str = r#"
import time

COUNT = [0]

def application(env, start_response):
    path = env.get('PATH_INFO', '')
    if path == '/count':
        COUNT[0] += 1
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return [("%d %s\n" % (COUNT[0], env['REQUEST_METHOD'])).encode()]
    if path.startswith('/env'):
        body = env['wsgi.input'].read()
        skip = ('REMOTE_PORT', 'DOCUMENT_ROOT', 'SERVER_PORT')
        keys = sorted(k for k in env if k.isupper() and k not in skip)
        out = "".join("%s=%s\n" % (k, env[k]) for k in keys) + "BODY=%s\n" % body.decode()
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return [out.encode()]
    if path == '/status':
        start_response('404 Not Here', [('Content-Type', 'text/plain'), ('X-App', 'wsgi'), ('Set-Cookie', 'a=1')])
        return [b'nope\n']
    if path == '/stream':
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return (("part %d\n" % i).encode() for i in range(3))
    if path == '/big':
        data = b'0123456789abcdef' * 65536
        start_response('200 OK', [('Content-Length', str(len(data)))])
        return [data]
    if path == '/size':
        n = len(env['wsgi.input'].read())
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return [("%d %s\n" % (n, env.get('CONTENT_LENGTH', '-'))).encode()]
    if path == '/slow':
        time.sleep(3)
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'ok\n']
"#;

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
        Uwsgi::start_as(app, unix, "--socket")
    }

    /// The same application behind an SCGI socket.
    pub fn start_scgi(app: &str, unix: bool) -> Uwsgi {
        Uwsgi::start_as(app, unix, "--scgi-socket")
    }

    fn start_as(app: &str, unix: bool, kind: &str) -> Uwsgi {
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
        c.args(["--plugin", PYTHON3_PLUGIN, kind, &socket, "--chmod-socket=666", "--wsgi-file"])
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

/// `conf/uwsgi_params` and `conf/scgi_params` under the prefix: sluice's
/// copies, or Debian's for nginx.
pub fn with_params(mut b: ServerBuilder) -> ServerBuilder {
    for name in ["uwsgi_params", "scgi_params"] {
        let src = if prog() == "nginx" {
            Path::new("/etc/nginx").join(name)
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("conf").join(name)
        };
        b = b.file(&format!("conf/{name}"), fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display())));
    }
    b
}
