//! The server under test: a temporary prefix, config templating, start,
//! signals, and cleanup on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::*;

// ---------------------------------------------------------------------------
// the server under test

/// Builds a configuration and starts a server. Text given to `http`, `main`,
/// `events`, `whole` and `conf_file` has `{port}` (= `{port0}`), `{port1}`,
/// ... and `{prefix}` substituted.
pub struct ServerBuilder {
    main: String,
    events: String,
    http: String,
    whole: Option<String>,
    nports: usize,
    files: Vec<(String, Vec<u8>)>,
    conf_files: Vec<(String, String)>,
    nginx: bool,
    wait_pid: bool,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

pub fn builder() -> ServerBuilder {
    ServerBuilder {
        main: String::new(),
        events: String::new(),
        http: String::new(),
        whole: None,
        nports: 1,
        files: Vec::new(),
        conf_files: Vec::new(),
        // Validation mode: run the suite against real nginx to check that
        // the expected answers are nginx's (sluice-specific texts such as
        // the Server header will of course differ).
        nginx: std::env::var_os("SLUICE_TEST_NGINX").is_some(),
        wait_pid: true,
        args: Vec::new(),
        envs: Vec::new(),
    }
}

/// Starts sluice with the default main/events sections and this http body.
pub fn start_http(http: &str) -> TestServer {
    builder().http(http).start()
}

impl ServerBuilder {
    /// Extra main-context directives (after daemon/pid/error_log).
    pub fn main(mut self, s: &str) -> Self {
        self.main.push_str(s);
        self.main.push('\n');
        self
    }
    pub fn events(mut self, s: &str) -> Self {
        self.events.push_str(s);
        self.events.push('\n');
        self
    }
    pub fn http(mut self, s: &str) -> Self {
        self.http.push_str(s);
        self.http.push('\n');
        self
    }
    /// The whole config file instead of the generated one.
    pub fn whole(mut self, s: &str) -> Self {
        self.whole = Some(s.to_string());
        self
    }
    /// How many ports to allocate (`{port0}`..).
    pub fn ports(mut self, n: usize) -> Self {
        self.nports = n;
        self
    }
    /// A file under the prefix (e.g. `html/a.txt`); parents are created.
    pub fn file(mut self, rel: &str, contents: impl AsRef<[u8]>) -> Self {
        self.files.push((rel.to_string(), contents.as_ref().to_vec()));
        self
    }
    /// A config file under the prefix with substitutions applied.
    pub fn conf_file(mut self, rel: &str, text: &str) -> Self {
        self.conf_files.push((rel.to_string(), text.to_string()));
        self
    }
    /// Run /usr/sbin/nginx instead of sluice (for comparisons).
    pub fn nginx(mut self) -> Self {
        self.nginx = true;
        self
    }
    /// Run nginx (true) or sluice (false) whatever SLUICE_TEST_NGINX says
    /// (differential tests run both).
    pub fn server_is_nginx(mut self, nginx: bool) -> Self {
        self.nginx = nginx;
        self
    }
    /// Extra command-line arguments for the server process (e.g. `-g`).
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }
    /// An environment variable for the server process (test hooks such as
    /// `SLUICE_TEST_PANIC_HEADER`).
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.push((k.to_string(), v.to_string()));
        self
    }
    /// Do not wait for the pid file (configs without `pid logs/sluice.pid`).
    pub fn no_pid_wait(mut self) -> Self {
        self.wait_pid = false;
        self
    }

    pub fn conf_name(&self) -> &'static str {
        if self.nginx { "conf/nginx.conf" } else { "conf/sluice.conf" }
    }

    fn render_main(&self) -> String {
        match &self.whole {
            Some(w) => w.clone(),
            None => {
                // nginx's compiled-in default access log is outside the prefix.
                let access =
                    if self.nginx && !self.http.contains("access_log") { "access_log logs/access.log;\n" } else { "" };
                format!(
                    "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\n{}\
                     events {{\n{}}}\nhttp {{\n{access}{}}}\n",
                    self.main, self.events, self.http
                )
            }
        }
    }

    /// Writes the prefix and config without starting anything.
    pub fn prepare(&self) -> TestServer {
        let prefix = temp_dir(if self.nginx { "nginx" } else { "srv" });
        for d in ["logs", "conf", "html"] {
            fs::create_dir_all(prefix.join(d)).unwrap();
        }
        fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/mime.types"), prefix.join("conf/mime.types"))
            .unwrap();
        for (rel, data) in &self.files {
            let p = prefix.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
        let mut srv = TestServer {
            prefix,
            ports: Vec::new(),
            port: 0,
            child: None,
            conf: self.conf_name().to_string(),
            nginx: self.nginx,
            wait_pid: self.wait_pid && (self.whole.is_none() || self.render_main().contains("pid logs/sluice.pid")),
            template: self.render_main(),
            conf_templates: self.conf_files.clone(),
            args: self.args.clone(),
            envs: self.envs.clone(),
        };
        srv.assign_ports(self.nports);
        srv
    }

    pub fn start(self) -> TestServer {
        match self.try_start() {
            Ok(s) => s,
            Err(e) => panic!("server failed to start:\n{e}"),
        }
    }

    /// Starts the server; on failure returns stderr and error.log content.
    /// Retries with new ports if a port was taken meanwhile.
    pub fn try_start(self) -> Result<TestServer, String> {
        let mut srv = self.prepare();
        let mut last = String::new();
        for _ in 0..5 {
            match srv.launch() {
                Ok(()) => return Ok(srv),
                Err(e) => {
                    if e.contains("Address already in use") && srv.template.contains("{port") {
                        last = e;
                        srv.assign_ports(srv.ports.len());
                        continue;
                    }
                    return Err(e);
                }
            }
        }
        Err(last)
    }
}

pub struct TestServer {
    pub prefix: PathBuf,
    pub ports: Vec<u16>,
    /// `ports[0]`.
    pub port: u16,
    child: Option<Child>,
    /// Config path relative to the prefix.
    pub conf: String,
    nginx: bool,
    wait_pid: bool,
    template: String,
    conf_templates: Vec<(String, String)>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

pub fn substitute(text: &str, ports: &[u16], prefix: &Path) -> String {
    let mut t = text.replace("{prefix}", &prefix.display().to_string());
    for (i, p) in ports.iter().enumerate().rev() {
        t = t.replace(&format!("{{port{i}}}"), &p.to_string());
    }
    if let Some(p) = ports.first() {
        t = t.replace("{port}", &p.to_string());
    }
    t
}

impl TestServer {
    fn assign_ports(&mut self, n: usize) {
        self.ports = (0..n.max(1)).map(|_| free_port()).collect();
        self.port = self.ports[0];
        let main = substitute(&self.template, &self.ports, &self.prefix);
        self.write_conf(&main);
        for (rel, text) in &self.conf_templates {
            let p = self.prefix.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, substitute(text, &self.ports, &self.prefix)).unwrap();
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.prefix.join(rel)
    }
    pub fn conf_path(&self) -> PathBuf {
        self.prefix.join(&self.conf)
    }
    pub fn error_log(&self) -> String {
        read_lossy(&self.prefix.join("logs/error.log"))
    }
    pub fn access_log(&self) -> String {
        read_lossy(&self.prefix.join("logs/access.log"))
    }
    pub fn stderr(&self) -> String {
        read_lossy(&self.prefix.join("stderr.txt"))
    }
    /// The process started: the master (the pid file's) by default.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server not running").id()
    }
    /// The process that serves (holds the worker threads or processes).
    pub fn serving_pid(&self) -> u32 {
        super::procs::worker_pid(self)
    }
    /// Replaces the main config file (text gets substitutions).
    pub fn write_conf(&self, text: &str) {
        fs::write(self.conf_path(), substitute(text, &self.ports, &self.prefix)).unwrap();
    }
    /// Writes a file under the prefix.
    pub fn write(&self, rel: &str, data: impl AsRef<[u8]>) {
        let p = self.prefix.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }

    /// The ports the initial config listens on (those whose placeholder
    /// appears in the main template or an extra config file).
    fn initial_ports(&self) -> Vec<u16> {
        let texts: Vec<&str> = std::iter::once(self.template.as_str())
            .chain(self.conf_templates.iter().map(|(_, t)| t.as_str()))
            .collect();
        self.ports
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                texts.iter().any(|t| t.contains(&format!("{{port{i}}}")) || (*i == 0 && t.contains("{port}")))
            })
            .map(|(_, p)| *p)
            .collect()
    }

    fn command(&self) -> Command {
        let mut c = Command::new(if self.nginx { NGINX } else { BIN });
        c.arg("-p").arg(format!("{}/", self.prefix.display())).arg("-c").arg(&self.conf);
        if self.nginx {
            c.arg("-e").arg("logs/error.log");
        }
        c
    }

    fn launch(&mut self) -> Result<(), String> {
        let _ = fs::remove_file(self.prefix.join("logs/sluice.pid"));
        self.spawn_and_wait()
    }

    /// Starts the server again on the same prefix, config and ports after
    /// it exited (or was killed), leaving whatever pid file it left behind
    /// in place; ready once the ports accept and the pid file names the
    /// new process.
    pub fn relaunch(&mut self) -> Result<(), String> {
        self.spawn_and_wait()
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let err = fs::File::create(self.prefix.join("stderr.txt")).unwrap();
        let out = fs::File::create(self.prefix.join("stdout.txt")).unwrap();
        let child = self
            .command()
            .args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn failed: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!(
                    "server exited early ({st})\n--- stderr:\n{}\n--- error.log:\n{}",
                    self.stderr(),
                    self.error_log()
                ));
            }
            let pid = self.child.as_ref().map_or(0, |c| c.id());
            let pid_ok = !self.wait_pid
                || fs::read_to_string(self.prefix.join("logs/sluice.pid")).is_ok_and(|s| s.trim() == pid.to_string());
            // Probed only once the pid file is there: a master binds the
            // ports before its workers serve them, and each probe is a
            // session some tests count in their logs.
            let ports_ok = pid_ok && self.initial_ports().iter().all(|p| port_accepts(*p));
            if ports_ok && pid_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.as_mut().unwrap().kill();
                let _ = self.child.as_mut().unwrap().wait();
                self.child = None;
                return Err(format!(
                    "server did not accept on {:?} within 15 s (pid file ok: {pid_ok})\n--- stderr:\n{}\n--- error.log:\n{}",
                    self.initial_ports(),
                    self.stderr(),
                    self.error_log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs the binary against this prefix/config with extra args (e.g.
    /// `["-s", "reload"]`), bounded to 20 s.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut c = self.command();
        c.args(args);
        run_bounded(c, Duration::from_secs(20))
    }

    /// `-s NAME`; asserts the signalling command succeeded.
    pub fn signal(&self, name: &str) {
        let out = self.run(&["-s", name]);
        assert!(out.status.success(), "-s {name} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    }

    /// Sends a signal (e.g. "HUP") straight to the server process.
    pub fn kill(&self, sig: &str) {
        let st = Command::new("kill").arg(format!("-{sig}")).arg(self.pid().to_string()).status().unwrap();
        assert!(st.success(), "kill -{sig} failed");
    }

    /// Waits up to `limit` for the server process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut()?;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    /// `-s quit` and wait for the process to exit (panics after 20 s).
    pub fn quit(&mut self) -> ExitStatus {
        self.signal("quit");
        self.wait_exit(Duration::from_secs(20)).expect("server did not exit within 20 s of -s quit")
    }

    fn kill_term(&mut self) {
        if let Some(c) = self.child.as_mut()
            && c.try_wait().unwrap().is_none()
        {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        }
        if self.wait_exit(Duration::from_secs(5)).is_none() {
            if let Some(c) = self.child.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            self.child = None;
        }
    }

    // convenience requests -------------------------------------------------

    pub fn connect(&self) -> Conn {
        Conn::connect(self.port)
    }

    /// `GET path` with `Host: localhost` and `Connection: close`.
    pub fn get(&self, path: &str) -> Response {
        request(self.port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
    }

    /// A request with extra header lines (each without CRLF).
    pub fn get_with(&self, path: &str, headers: &[&str]) -> Response {
        let mut r = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for h in headers {
            r.push_str(h);
            r.push_str("\r\n");
        }
        r.push_str("\r\n");
        request(self.port, &r)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// Waits until the access log contains at least `n` lines.
    pub fn wait_access_lines(&self, n: usize) -> Vec<String> {
        wait_lines(&self.prefix.join("logs/access.log"), n, LOG_WAIT)
    }

    /// Waits until the error log contains `needle`; returns the whole log.
    pub fn wait_error_log(&self, needle: &str) -> String {
        wait_contains(&self.prefix.join("logs/error.log"), needle, LOG_WAIT)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill_term();
        if std::env::var_os("SLUICE_TEST_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.prefix);
        }
    }
}

/// Runs a command with piped output, killing it after `limit`.
pub fn run_bounded(mut c: Command, limit: Duration) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(id.to_string()).status();
            panic!("command {c:?} did not finish within {limit:?}");
        }
    }
}

/// Runs the sluice binary with these args in `cwd` (bounded to 20 s).
pub fn sluice(args: &[&str], cwd: &Path) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).current_dir(cwd);
    run_bounded(c, Duration::from_secs(20))
}

pub fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `-t` on a configuration whose `http` block holds `http`: refused by
/// the server under test (sluice or nginx), saying `why`.
pub fn assert_refused(http: &str, why: &str) {
    let t = builder().http(http).prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains(why), "{http}\nwanted: {why}\ngot: {err}");
}
pub fn stdout_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
