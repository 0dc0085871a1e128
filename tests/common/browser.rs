//! A headless chromium driven through the Chrome DevTools Protocol over
//! `--remote-debugging-pipe`: chromium reads commands on fd 3 and writes
//! answers and events on fd 4, each a JSON text ended by a NUL byte. A
//! shell maps the child's stdin and stdout pipes onto those descriptors, so
//! neither a websocket client nor `unsafe` fd juggling is needed.
//!
//! What a test uses: `open` a URL in a fresh tab, `eval` JavaScript in it,
//! `wait_for` a condition in the page, `screenshot` to a PNG, `intercept`
//! the page's fetches, and `problems`: the console errors, uncaught
//! exceptions and browser log errors (CSP refusals among them) seen so far.
//!
//! `SLUICE_CHROMIUM` names another binary; without one and without
//! /usr/bin/chromium the test fails saying how to install it.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one protocol command may take (a screenshot of a tall page
/// on a loaded machine included).
const CALL_LIMIT: Duration = Duration::from_secs(20);

/// Answers an intercepted request: its URL to the body to fulfil it with
/// (as `application/json`), or None to let it through.
pub type Interceptor = Box<dyn FnMut(&str) -> Option<Vec<u8>>>;

pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    profile: PathBuf,
    problems: Vec<String>,
    intercept: Option<Interceptor>,
    /// The tab's load event came since the last `open`.
    loaded: bool,
}

/// The chromium binary, or a panic saying how to get one.
fn chromium() -> PathBuf {
    let p = std::env::var_os("SLUICE_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        p.exists(),
        "chromium is not installed ({} is missing): these tests drive a real headless browser. \
         Install Debian's package (`apt-get install chromium`; scripts/test-all does) \
         or set SLUICE_CHROMIUM to a chromium binary.",
        p.display()
    );
    p
}

impl Browser {
    /// Starts a headless chromium with a throw-away profile and attaches to
    /// a fresh blank tab with the console, log and page domains enabled.
    pub fn launch() -> Browser {
        let profile = super::temp_dir("chromium");
        let stderr = File::create(profile.join("stderr.txt")).expect("chromium stderr file");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 3<&0 4>&1 </dev/null >/dev/null")
            .arg(chromium())
            .args([
                "--headless",
                "--no-sandbox", // root in a container: no user namespaces for the sandbox
                "--disable-gpu",
                "--no-proxy-server",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--mute-audio",
                "--window-size=1280,1000",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.join("profile").display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start chromium: {e}"));
        let to = child.stdin.take().expect("chromium stdin");
        let mut out = child.stdout.take().expect("chromium stdout");
        let (tx, from) = channel();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let mut buf = [0u8; 64 * 1024];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = pending.drain(..=end).collect();
                    match serde_json::from_slice::<Value>(&msg[..end]) {
                        Ok(v) => {
                            if tx.send(v).is_err() {
                                return;
                            }
                        }
                        Err(e) => eprintln!("chromium sent bad JSON: {e}"),
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to,
            from,
            next_id: 0,
            session: None,
            profile,
            problems: Vec::new(),
            intercept: None,
            loaded: false,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("targetId").to_string();
        let attached = b.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        b.session = Some(attached["sessionId"].as_str().expect("sessionId").to_string());
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(domain, json!({}));
        }
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    /// Where chromium's own stderr goes (for a failing test's reader).
    pub fn stderr_path(&self) -> PathBuf {
        self.profile.join("stderr.txt")
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let mut msg = json!({"id": self.next_id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("JSON");
        bytes.push(0);
        self.to.write_all(&bytes).unwrap_or_else(|e| panic!("chromium went away ({method}): {e}"));
        self.next_id
    }

    /// Sends a command and waits for its answer, handling events that come
    /// first; panics on a protocol error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params).unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    pub fn try_call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send(method, params);
        let deadline = Instant::now() + CALL_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(msg) if msg["id"].as_u64() == Some(id) => {
                    if let Some(e) = msg.get("error") {
                        return Err(e.to_string());
                    }
                    return Ok(msg["result"].clone());
                }
                Ok(msg) => self.event(&msg),
                Err(RecvTimeoutError::Timeout) => return Err(format!("no answer in {CALL_LIMIT:?}")),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("chromium exited; see {}", self.stderr_path().display()));
                }
            }
        }
    }

    /// Handles events for `d`: the page's fetches are answered meanwhile.
    pub fn pump(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.from.recv_timeout(left) {
                Ok(msg) => self.event(&msg),
                Err(_) => return,
            }
        }
    }

    fn event(&mut self, msg: &Value) {
        let p = &msg["params"];
        match msg["method"].as_str().unwrap_or("") {
            "Runtime.exceptionThrown" => {
                let d = &p["exceptionDetails"];
                let what = d["exception"]["description"].as_str().or(d["text"].as_str()).unwrap_or("?");
                self.problems.push(format!("uncaught exception: {what}"));
            }
            "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert")) => {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|v| v["value"].as_str().or(v["description"].as_str()).unwrap_or("?").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                self.problems.push(format!("console.{}: {}", p["type"].as_str().unwrap_or(""), args.join(" ")));
            }
            "Log.entryAdded" if p["entry"]["level"] == "error" => {
                let e = &p["entry"];
                self.problems.push(format!(
                    "log ({}): {} {}",
                    e["source"].as_str().unwrap_or(""),
                    e["text"].as_str().unwrap_or(""),
                    e["url"].as_str().unwrap_or("")
                ));
            }
            "Page.loadEventFired" => self.loaded = true,
            "Fetch.requestPaused" => {
                let id = p["requestId"].as_str().unwrap_or("").to_string();
                let url = p["request"]["url"].as_str().unwrap_or("").to_string();
                let body = self.intercept.as_mut().and_then(|f| f(&url));
                match body {
                    Some(body) => self.send(
                        "Fetch.fulfillRequest",
                        json!({"requestId": id, "responseCode": 200, "body": base64(&body),
                               "responseHeaders": [{"name": "Content-Type", "value": "application/json"}]}),
                    ),
                    None => self.send("Fetch.continueRequest", json!({"requestId": id})),
                };
            }
            _ => {}
        }
    }

    /// From now on the tab's requests whose URL matches `pattern` (`*`
    /// wildcards) are answered by `f`.
    pub fn intercept(&mut self, pattern: &str, f: Interceptor) {
        self.intercept = Some(f);
        self.call("Fetch.enable", json!({"patterns": [{"urlPattern": pattern}]}));
    }

    /// Navigates the tab and waits for the page's load event.
    pub fn open(&mut self, url: &str) {
        self.loaded = false;
        let r = self.call("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.loaded {
            assert!(Instant::now() < deadline, "{url} did not load in 10 s");
            self.pump(Duration::from_millis(50));
        }
    }

    /// Evaluates `expr` in the page (promises awaited); its value as JSON,
    /// or the exception it threw.
    pub fn try_eval(&mut self, expr: &str) -> Result<Value, String> {
        let r = self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true, "awaitPromise": true}));
        match r.get("exceptionDetails") {
            Some(d) => Err(d["exception"]["description"].as_str().unwrap_or("exception").to_string()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// `try_eval`, panicking on an exception.
    pub fn eval(&mut self, expr: &str) -> Value {
        self.try_eval(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    /// Evaluates `expr` every 100 ms until it is truthy (an exception
    /// counts as not yet); its value, or a panic naming `what` and the last
    /// value after `limit`.
    pub fn wait_for(&mut self, what: &str, expr: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let (v, thrown) = match self.try_eval(expr) {
                Ok(v) => (v, false),
                Err(e) => (Value::String(e), true),
            };
            let truthy = !thrown
                && match &v {
                    Value::Null => false,
                    Value::Bool(b) => *b,
                    Value::Number(n) => n.as_f64() != Some(0.0),
                    Value::String(s) => !s.is_empty(),
                    _ => true,
                };
            if truthy {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not seen in {limit:?} (last {v}); problems: {:?}",
                self.problems
            );
            self.pump(Duration::from_millis(100));
        }
    }

    /// Console errors, uncaught exceptions and log errors seen so far.
    pub fn problems(&mut self) -> Vec<String> {
        self.pump(Duration::from_millis(50));
        self.problems.clone()
    }

    /// A PNG of the whole page at `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let h = m["cssContentSize"]["height"].as_f64().unwrap_or(1000.0).max(200.0);
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true,
                   "clip": {"x": 0, "y": 0, "width": 1280, "height": h, "scale": 1}}),
        );
        let png = unbase64(r["data"].as_str().expect("screenshot data"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.session = None;
        let _ = self.try_call("Browser.close", json!({}));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(self.profile.join("profile"));
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            s.push(if i <= c.len() { char::from(B64[(n >> (18 - 6 * i)) as usize & 63]) } else { '=' });
        }
    }
    s
}

fn unbase64(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for b in s.bytes().filter(|&b| b != b'=') {
        let v = B64.iter().position(|&c| c == b).unwrap_or_else(|| panic!("bad base64 byte {b}")) as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
