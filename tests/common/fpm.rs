//! A php-fpm master with a pool of its own, for tests/fastcgi.rs and
//! tests/wordpress.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

pub const FPM: &str = "/usr/sbin/php-fpm8.2";

/// A php-fpm master with its own pool, stopped on drop.
pub struct Fpm {
    pub dir: PathBuf,
    pub sock: PathBuf,
    pub child: Option<Child>,
}

pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Fpm {
    /// A bare PHP (`-n`: no php.ini, no extensions from conf.d) with two
    /// children: what tests/fastcgi.rs's scripts need.
    pub fn start() -> Fpm {
        Fpm::start_pool(false, 2)
    }

    /// `php_ini`: Debian's php.ini and conf.d (mysqli, opcache...), as an
    /// application such as WordPress needs; `children`: the static pool's
    /// size (an application that requests itself needs more than one).
    pub fn start_pool(php_ini: bool, children: u32) -> Fpm {
        assert!(
            Path::new(FPM).exists(),
            "php-fpm is not installed: run scripts/test-all (or apt-get install php8.2-fpm)"
        );
        let dir = temp_dir("fpm");
        let sock = dir.join("php.sock");
        let user = if running_as_root() { "user = root\ngroup = root\n" } else { "" };
        let conf = format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\n\
             [test]\n{user}listen = {s}\nlisten.mode = 0666\npm = static\npm.max_children = {children}\n\
             catch_workers_output = no\nclear_env = no\n\
             php_admin_value[post_max_size] = 64M\nphp_admin_value[output_buffering] = 0\n\
             php_admin_flag[log_errors] = on\n",
            d = dir.display(),
            s = sock.display()
        );
        fs::write(dir.join("fpm.conf"), conf).unwrap();
        let mut c = Command::new(FPM);
        c.arg("-F").arg("-y").arg(dir.join("fpm.conf")).arg("-p").arg(&dir);
        if !php_ini {
            c.arg("-n");
        }
        if running_as_root() {
            c.arg("-R");
        }
        let child = c
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("fpm.stdout")).unwrap())
            .stderr(fs::File::create(dir.join("fpm.stderr")).unwrap())
            .spawn()
            .expect("php-fpm starts");
        let mut f = Fpm { dir, sock, child: Some(child) };
        let t = Instant::now();
        while std::os::unix::net::UnixStream::connect(&f.sock).is_err() {
            if t.elapsed() > Duration::from_secs(10) {
                f.stop();
                panic!("php-fpm did not listen:\n{}", read_lossy(&f.dir.join("fpm.stderr")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        f
    }

    pub fn stop(&mut self) {
        // SIGTERM (fast shutdown) lets the master remove its socket.
        if let Some(c) = self.child.take() {
            terminate(c);
        }
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The conf files `include` finds under the prefix (`fastcgi_params`,
/// `fastcgi.conf`, `snippets/fastcgi-php.conf`): sluice's copies, or
/// Debian's own for nginx.
pub fn with_params(b: ServerBuilder) -> ServerBuilder {
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let debian = Path::new("/etc/nginx");
    let from = |rel: &str| {
        let src = if prog() == "nginx" { debian.join(rel) } else { ours.join(rel) };
        fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()))
    };
    b.file("conf/fastcgi_params", from("fastcgi_params"))
        .file("conf/fastcgi.conf", from("fastcgi.conf"))
        .file("conf/snippets/fastcgi-php.conf", from("snippets/fastcgi-php.conf"))
}

/// SIGTERM to a server's master, then up to 10 s for it to exit (killed
/// after that).
pub fn terminate(mut c: Child) {
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if c.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}
