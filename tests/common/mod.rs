//! Shared helpers for sluice's integration tests: a server under test in its
//! own temporary prefix on its own loopback ports, a raw HTTP/1.x client
//! over `std::net::TcpStream` with bounded reads, and wrappers for `curl`
//! and log files.
//!
//! Every network read is bounded (`READ_TIMEOUT` per read, `RESPONSE_DEADLINE`
//! per response) so a hang fails the test in seconds.

#![allow(dead_code)]

use std::collections::HashSet;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice");
pub const NGINX: &str = "/usr/sbin/nginx";
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);
/// Access logs are flushed at most ~1 s after a write; allow for load.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// nginx's 43-byte transparent GIF (ngx_http_empty_gif_module.c).
pub const EMPTY_GIF: [u8; 43] = [
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x4c, 0x01, 0x00, 0x3b,
];

/// The program name in messages: "nginx" in validation mode
/// (SLUICE_TEST_NGINX set), else "sluice".
pub fn prog() -> &'static str {
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() { "nginx" } else { "sluice" }
}

// ---------------------------------------------------------------------------
// temp dirs and ports

static COUNTER: AtomicU64 = AtomicU64::new(0);
static USED_PORTS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    let dir = std::env::temp_dir().join(format!("sluice-it-{tag}-{}-{n}-{nanos}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_u64() -> u64 {
    // std-only randomness: RandomState is seeded randomly per process and
    // per instance.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::SeqCst));
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos());
    h.finish()
}

/// A loopback port that is free right now and not handed out before by this
/// test process. Chosen below the kernel's ephemeral range (32768+) so that
/// client connections made by other tests (curl, wrk) cannot be sitting on
/// it as a source port.
pub fn free_port() -> u16 {
    let mut used = USED_PORTS.lock().unwrap();
    let used = used.get_or_insert_with(HashSet::new);
    for _ in 0..1000 {
        let p = 20000 + (rand_u64() % 12000) as u16;
        if used.contains(&p) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            used.insert(p);
            return p;
        }
    }
    // Fall back to whatever the kernel gives.
    let p = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    used.insert(p);
    p
}

/// True if something accepts connections on 127.0.0.1:port.
pub fn port_accepts(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_ok()
}

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
    /// Extra command-line arguments for the server process (e.g. `-g`).
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
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
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server not running").id()
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
        let err = fs::File::create(self.prefix.join("stderr.txt")).unwrap();
        let out = fs::File::create(self.prefix.join("stdout.txt")).unwrap();
        let child = self
            .command()
            .args(&self.args)
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
            let ports_ok = self.initial_ports().iter().all(|p| port_accepts(*p));
            let pid_ok = !self.wait_pid || self.prefix.join("logs/sluice.pid").exists();
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
pub fn stdout_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

// ---------------------------------------------------------------------------
// files and logs

pub fn read_lossy(p: &Path) -> String {
    fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// Polls `path` until it has at least `n` lines; panics with the content
/// otherwise.
pub fn wait_lines(path: &Path, n: usize, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let text = read_lossy(path);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            return lines;
        }
        if Instant::now() > deadline {
            panic!("{} has {} lines after {limit:?}, expected {n}:\n{text}", path.display(), lines.len());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `path` until it contains `needle`; returns the content.
pub fn wait_contains(path: &Path, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let text = read_lossy(path);
        if text.contains(needle) {
            return text;
        }
        if Instant::now() > deadline {
            panic!("{} does not contain {needle:?} after {limit:?}:\n{text}", path.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Deterministic pseudo-random bytes.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

// ---------------------------------------------------------------------------
// raw HTTP client

#[derive(Debug, Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status line and header lines as received (without the final CRLF).
    pub head: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// Header value, panicking with the response head if absent.
    pub fn must(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("no {name} header in:\n{}", self.head))
    }
}

pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).unwrap_or_else(|e| panic!("write: {e}"));
    }

    /// Like `send` but returns the error (the server may have closed).
    pub fn try_send(&mut self, data: impl AsRef<[u8]>) -> std::io::Result<()> {
        self.stream.write_all(data.as_ref())
    }

    /// Reads more bytes into the buffer; Ok(0) on EOF.
    fn fill(&mut self, deadline: Instant) -> std::io::Result<usize> {
        if Instant::now() > deadline {
            return Err(std::io::Error::new(ErrorKind::TimedOut, "response deadline passed"));
        }
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) -> ! {
        panic!(
            "{what}: {e}; received so far ({} bytes): {:?}",
            self.buf.len(),
            String::from_utf8_lossy(&self.buf[..self.buf.len().min(2000)])
        )
    }

    /// Reads one response to a GET-like request.
    pub fn read_response(&mut self) -> Response {
        self.read_response_to("GET")
    }

    /// Reads one response; `method` decides whether a body follows (HEAD).
    /// A 1xx response is returned on its own.
    pub fn read_response_to(&mut self, method: &str) -> Response {
        match self.try_read_response(method) {
            Ok(r) => r,
            Err(e) => self.fail("reading response", e),
        }
    }

    pub fn try_read_response(&mut self, method: &str) -> Result<Response, String> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            match self.fill(deadline) {
                Ok(0) => return Err("connection closed before a complete response head".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read error before response head complete: {e}")),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for l in lines {
            let (k, v) = l.split_once(':').ok_or_else(|| format!("bad header line {l:?}"))?;
            headers.push((k.to_string(), v.trim().to_string()));
        }
        let mut resp = Response { version, status, reason, headers, body: Vec::new(), head };
        if method == "HEAD" || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        let te = resp.header("Transfer-Encoding").map(|s| s.to_ascii_lowercase());
        if te.as_deref() == Some("chunked") {
            resp.body = self.read_chunked(deadline)?;
        } else if let Some(cl) = resp.header("Content-Length") {
            let n: usize = cl.parse().map_err(|_| format!("bad Content-Length {cl:?}"))?;
            while self.buf.len() < n {
                match self.fill(deadline) {
                    Ok(0) => return Err(format!("closed after {} of {n} body bytes", self.buf.len())),
                    Ok(_) => {}
                    Err(e) => return Err(format!("read error in body ({} of {n}): {e}", self.buf.len())),
                }
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            resp.body = self.read_to_close_inner(deadline)?;
        }
        Ok(resp)
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                    return Err("closed in chunk size".into());
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
                .map_err(|_| format!("bad chunk size line {line:?}"))?;
            self.buf.drain(..line_end + 2);
            if size == 0 {
                // trailers until empty line
                loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        let empty = i == 0;
                        self.buf.drain(..i + 2);
                        if empty {
                            return Ok(body);
                        }
                        continue;
                    }
                    if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                        return Err("closed in trailers".into());
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                    return Err("closed in chunk data".into());
                }
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }

    fn read_to_close_inner(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        loop {
            match self.fill(deadline) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
                Err(e) => return Err(format!("read error waiting for close: {e}")),
            }
        }
        Ok(std::mem::take(&mut self.buf))
    }

    /// Everything (remaining buffered plus new) until the server closes.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        match self.read_to_close_inner(deadline) {
            Ok(v) => v,
            Err(e) => self.fail("reading until close", e),
        }
    }

    /// True if the server closes (EOF or reset) within `within`, with no
    /// further bytes; panics if bytes arrive.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        if !self.buf.is_empty() {
            self.fail("unexpected extra bytes", "server sent more than expected");
        }
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut tmp = [0u8; 4096];
        let r = self.stream.read(&mut tmp);
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        match r {
            Ok(0) => true,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                self.fail("unexpected extra bytes", "server sent data instead of closing")
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Bytes buffered but not consumed by a response read.
    pub fn leftover(&self) -> &[u8] {
        &self.buf
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// Connects, sends `raw`, reads one response.
pub fn request(port: u16, raw: &str) -> Response {
    let mut c = Conn::connect(port);
    c.send(raw.as_bytes());
    c.read_response_to(raw.split(' ').next().unwrap_or("GET"))
}

/// Connects, sends `raw` bytes, reads until the server closes.
pub fn request_to_close(port: u16, raw: &[u8]) -> Vec<u8> {
    let mut c = Conn::connect(port);
    c.send(raw);
    c.read_to_close()
}

// ---------------------------------------------------------------------------
// curl

pub struct CurlOut {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl CurlOut {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Runs `curl -sS --max-time 10 ARGS`.
pub fn curl(args: &[&str]) -> CurlOut {
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10"]).args(args);
    let o = run_bounded(c, Duration::from_secs(20));
    CurlOut { status: o.status, stdout: o.stdout, stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

// ---------------------------------------------------------------------------
// small matchers (std only, no regex crate)

/// Parses an HTTP-date `Sun, 06 Nov 1994 08:49:37 GMT` strictly; returns
/// seconds since the epoch.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 29 || &s[3..5] != ", " || &s[28..] != "T" || &s[25..29] != " GMT" {
        return None;
    }
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let wd = DAYS.iter().position(|d| *d == &s[0..3])?;
    let num = |a: usize, n: usize| -> Option<i64> {
        let t = &s[a..a + n];
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    if &s[7..8] != " " || &s[11..12] != " " || &s[16..17] != " " || &s[19..20] != ":" || &s[22..23] != ":" {
        return None;
    }
    let day = num(5, 2)?;
    let mon = MONTHS.iter().position(|m| *m == &s[8..11])? as i64 + 1;
    let year = num(12, 4)?;
    let (h, mi, se) = (num(17, 2)?, num(20, 2)?, num(23, 2)?);
    if h > 23 || mi > 59 || se > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let t = civil_to_epoch(year, mon, day, h, mi, se);
    if (t.div_euclid(86400)).rem_euclid(7) as usize != wd {
        return None;
    }
    Some(t)
}

pub const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Seconds since the epoch of a UTC civil time (Howard Hinnant's algorithm).
pub fn civil_to_epoch(year: i64, mon: i64, day: i64, h: i64, mi: i64, se: i64) -> i64 {
    let y = if mon <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mon + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    days * 86400 + h * 3600 + mi * 60 + se
}

/// Parses `[22/Nov/2026:14:23:06 +0000]` (`$time_local` in brackets);
/// returns seconds since the epoch.
pub fn parse_time_local(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 28 || b[0] != b'[' || b[27] != b']' || b[3] != b'/' || b[7] != b'/' || b[12] != b':' || b[21] != b' '
    {
        return None;
    }
    let num = |a: usize, n: usize| -> Option<i64> {
        let t = &s[a..a + n];
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    let day = num(1, 2)?;
    let mon = MONTHS.iter().position(|m| *m == &s[4..7])? as i64 + 1;
    let year = num(8, 4)?;
    if b[15] != b':' || b[18] != b':' {
        return None;
    }
    let (h, mi, se) = (num(13, 2)?, num(16, 2)?, num(19, 2)?);
    let sign = match b[22] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let off = sign * (num(23, 2)? * 3600 + num(25, 2)? * 60);
    Some(civil_to_epoch(year, mon, day, h, mi, se) - off)
}

pub fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Formats seconds since the epoch as an HTTP-date.
pub fn http_date(t: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The file's mtime in seconds since the epoch.
pub fn mtime(p: &Path) -> i64 {
    fs::metadata(p).unwrap().modified().unwrap().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// nginx's ETag for a file: `"<hex mtime>-<hex size>"`.
pub fn nginx_etag(p: &Path) -> String {
    let md = fs::metadata(p).unwrap();
    format!("\"{:x}-{:x}\"", mtime(p), md.len())
}

/// Asserts that every line in `lines` containing `needle` exists; returns the
/// first such line.
pub fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no line containing {needle:?} in:\n{text}"))
}

// ---------------------------------------------------------------------------
// several independent checks in one test, all reported

/// Runs checks that may panic, collects the failures, and reports them all
/// at the end, so one test lists every deviating case at once.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
}

impl Checks {
    pub fn new() -> Checks {
        Checks::default()
    }

    pub fn run(&mut self, label: &str, f: impl FnOnce()) {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            self.failures.push(format!("[{label}] {msg}"));
        }
    }

    pub fn finish(self) {
        if !self.failures.is_empty() {
            panic!("{} check(s) failed:\n{}", self.failures.len(), self.failures.join("\n"));
        }
    }
}

// ---------------------------------------------------------------------------
// wrk

/// wrk's binary, or a panic telling how to get it.
pub fn wrk_bin() -> String {
    for p in ["/usr/bin/wrk", "/usr/local/bin/wrk"] {
        if Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("wrk is not installed: run .ci/run (which installs it), or `apt-get install -y wrk`");
}

/// Starts `wrk ARGS` with output captured; finish with `wrk_finish`.
pub fn wrk_start(args: &[&str]) -> Child {
    Command::new(wrk_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wrk")
}

#[derive(Debug)]
pub struct WrkResult {
    pub requests: u64,
    /// The "Socket errors:" line, if wrk printed one.
    pub socket_errors: Option<String>,
    /// The "Non-2xx or 3xx responses:" line, if any.
    pub non_2xx: Option<String>,
    pub output: String,
}

impl WrkResult {
    /// Socket errors summed (connect, read, write, timeout).
    pub fn error_count(&self) -> u64 {
        let Some(l) = &self.socket_errors else { return 0 };
        l.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse::<u64>().ok()).sum()
    }
}

/// Waits (bounded) for wrk and parses its summary.
pub fn wrk_finish(child: Child, limit: Duration) -> WrkResult {
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(r) => r.expect("wrk output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(id.to_string()).status();
            panic!("wrk did not finish within {limit:?}");
        }
    };
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "wrk failed ({}):\n{output}", out.status);
    let requests = output
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.trim().split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk output:\n{output}"));
    let line = |p: &str| output.lines().find(|l| l.trim_start().starts_with(p)).map(|l| l.trim().to_string());
    WrkResult { requests, socket_errors: line("Socket errors:"), non_2xx: line("Non-2xx or 3xx responses:"), output }
}
