//! A WordPress site for tests/wordpress.rs, set up the way a user without
//! root would: Debian's `wordpress` package copied to a document root of
//! its own with its own `wp-config.php`, and a private MariaDB server
//! (`mariadb-install-db` and `mariadbd` on a unix socket in a temporary
//! directory, no TCP port, stopped on drop).
//!
//! Why a copy: Debian's `/usr/share/wordpress/wp-config.php` loads the real
//! configuration from `/etc/wordpress/config-$HOST.php` (README.Debian),
//! root-owned state shared by everything on the machine. Symlinks into
//! /usr/share/wordpress would not do either: PHP resolves them, so
//! `wp-admin/*.php` would find Debian's wp-config.php next to the real
//! `wp-load.php`. Copying the tree (~90 MB, well under a second) and writing
//! our own `wp-config.php` over Debian's is what a user installing WordPress
//! by hand does.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::fpm::running_as_root;
use super::*;

pub const WP_SHARE: &str = "/usr/share/wordpress";
pub const MARIADBD: &str = "/usr/sbin/mariadbd";
pub const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";

pub const DB_NAME: &str = "wordpress";
pub const DB_USER: &str = "wordpress";
pub const DB_PASSWORD: &str = "wp-db-secret";

/// A private MariaDB server on `sock`, its data under `dir/data`.
pub struct Mariadb {
    pub dir: PathBuf,
    pub sock: PathBuf,
    child: Option<Child>,
}

impl Mariadb {
    /// Initialises a data directory and starts the server on it; the
    /// `--init-file` creates the WordPress database and its user (the
    /// server runs it with full privileges before it takes connections,
    /// whatever account the data directory's root has).
    pub fn start(dir: &Path) -> Mariadb {
        for p in [MARIADBD, INSTALL_DB] {
            assert!(Path::new(p).exists(), "{p} is missing: run scripts/test-all (or apt-get install mariadb-server)");
        }
        let data = dir.join("data");
        let sock = dir.join("mysqld.sock");
        // mariadbd refuses to run as root unless told to.
        let user: Vec<String> = if running_as_root() { vec!["--user=root".into()] } else { Vec::new() };
        // A small redo log: the default 96 MB would be written out for
        // nothing.
        let small = ["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"];
        let mut install = Command::new(INSTALL_DB);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(&user)
            .args(small)
            .arg("--skip-test-db")
            .arg("--auth-root-authentication-method=normal");
        let out = run_bounded(install, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "mariadb-install-db failed ({}):\n{}\n{}",
            out.status,
            stdout_of(&out),
            stderr_of(&out)
        );
        let init = dir.join("init.sql");
        fs::write(
            &init,
            format!(
                "CREATE DATABASE IF NOT EXISTS {DB_NAME};\n\
                 CREATE USER IF NOT EXISTS '{DB_USER}'@'localhost' IDENTIFIED BY '{DB_PASSWORD}';\n\
                 GRANT ALL PRIVILEGES ON {DB_NAME}.* TO '{DB_USER}'@'localhost';\n"
            ),
        )
        .unwrap();
        let log = dir.join("mariadb.log");
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .args(&user)
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", sock.display()))
            .arg("--skip-networking")
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--init-file={}", init.display()))
            .args(small)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.join("mariadb.stderr")).unwrap())
            .spawn()
            .expect("mariadbd starts");
        let mut db = Mariadb { dir: dir.to_path_buf(), sock, child: Some(child) };
        let t = Instant::now();
        while !read_lossy(&log).contains("ready for connections") {
            let exited = db.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || t.elapsed() > Duration::from_secs(30) {
                db.stop();
                panic!("mariadbd did not start ({exited:?}):\n{}", read_lossy(&log));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        db
    }

    /// SIGTERM (a clean shutdown) and wait; SIGKILL after 20 s.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill has no memory preconditions; the pid is our child's.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(20) {
                if c.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        self.stop();
    }
}

/// WordPress's files in `root` (a copy of Debian's) configured for the
/// private database `db`; everything under `dir`, removed on drop unless
/// SLUICE_TEST_KEEP is set.
pub struct WordPress {
    pub dir: PathBuf,
    pub root: PathBuf,
    pub db: Mariadb,
}

impl WordPress {
    pub fn setup() -> WordPress {
        assert!(
            Path::new(WP_SHARE).join("wp-settings.php").exists(),
            "{WP_SHARE} is missing: run scripts/test-all (or apt-get install wordpress)"
        );
        let dir = temp_dir("wordpress");
        let root = dir.join("wordpress");
        // -R keeps the package's symlinks (to /usr/share/javascript,
        // /usr/share/php...) as symlinks; relative ones are then pointed
        // at their absolute targets.
        let mut cp = Command::new("cp");
        cp.arg("-R").arg(WP_SHARE).arg(&root);
        let out = run_bounded(cp, Duration::from_secs(60));
        assert!(out.status.success(), "cp {WP_SHARE}: {}", stderr_of(&out));
        relink(Path::new(WP_SHARE), &root);
        // Apache's rules (a symlink to /etc/wordpress/htaccess): not ours.
        let _ = fs::remove_file(root.join(".htaccess"));
        let db = Mariadb::start(&dir);
        fs::write(root.join("wp-config.php"), wp_config(&db.sock)).unwrap();
        WordPress { dir, root, db }
    }
}

impl Drop for WordPress {
    fn drop(&mut self) {
        self.db.stop();
        if std::env::var_os("SLUICE_TEST_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Points the copy's symlinks where the package's point: Debian's are
/// relative (`../../../javascript/...`), so dangle once copied.
fn relink(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            if let Ok(target) = fs::canonicalize(&src) {
                fs::remove_file(&dst).unwrap();
                std::os::unix::fs::symlink(target, &dst).unwrap();
            }
        } else if ft.is_dir() {
            relink(&src, &dst);
        }
    }
}

/// wp-config.php as wp-config-sample.php has it, filled in. DB_HOST
/// `localhost:/path` is MySQL's "this unix socket". WP_HTTP_BLOCK_EXTERNAL:
/// the machine has no Internet, and WordPress's calls to api.wordpress.org
/// (update and browser checks on wp-admin pages) would only add time;
/// requests to the site itself (the installer's permalink probe, wp-cron)
/// are still allowed.
fn wp_config(sock: &Path) -> String {
    let salts: String = ["AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY"]
        .iter()
        .chain(&["AUTH_SALT", "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT"])
        .enumerate()
        .map(|(i, k)| format!("define('{k}', 'sluice test salt {i}: not a secret');\n"))
        .collect();
    format!(
        "<?php\n\
         define('DB_NAME', '{DB_NAME}');\n\
         define('DB_USER', '{DB_USER}');\n\
         define('DB_PASSWORD', '{DB_PASSWORD}');\n\
         define('DB_HOST', 'localhost:{sock}');\n\
         define('DB_CHARSET', 'utf8mb4');\n\
         define('DB_COLLATE', '');\n\
         {salts}\
         $table_prefix = 'wp_';\n\
         define('WP_DEBUG', false);\n\
         define('WP_HTTP_BLOCK_EXTERNAL', true);\n\
         if (!defined('ABSPATH')) {{\n    define('ABSPATH', __DIR__ . '/');\n}}\n\
         require_once ABSPATH . 'wp-settings.php';\n",
        sock = sock.display()
    )
}
