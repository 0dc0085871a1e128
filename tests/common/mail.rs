//! Mail peers for the mail tests: scripted IMAP, POP3 and SMTP backends
//! that record what reaches them, and a line-reading client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::READ_TIMEOUT;

/// What a backend received, one command a line.
pub type Log = Arc<Mutex<Vec<String>>>;

#[derive(Clone, Copy)]
pub enum Proto {
    Imap,
    Pop3,
    Smtp,
}

/// A scripted backend: greets, records every command (IMAP literals
/// joined into their line, answered with `+ OK`), and answers it.
pub fn backend(p: Proto) -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind backend");
    let port = l.local_addr().unwrap().port();
    let log: Log = Arc::default();
    let rec = log.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let rec = rec.clone();
            std::thread::spawn(move || {
                let greeting: &[u8] = match p {
                    Proto::Imap => b"* OK backend imap\r\n",
                    Proto::Pop3 => b"+OK backend pop3\r\n",
                    Proto::Smtp => b"220 backend smtp\r\n",
                };
                if c.write_all(greeting).is_err() {
                    return;
                }
                let mut r = BufReader::new(c.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    // IMAP literals: {N} at the line's end.
                    while let Some((head, n)) = line
                        .trim_end()
                        .strip_suffix('}')
                        .and_then(|t| t.rsplit_once('{'))
                        .map(|(h, n)| (h.to_string(), n.to_string()))
                    {
                        let Ok(n) = n.parse::<usize>() else { break };
                        let _ = c.write_all(b"+ OK\r\n");
                        let mut lit = vec![0u8; n];
                        if r.read_exact(&mut lit).is_err() {
                            return;
                        }
                        let mut rest = String::new();
                        let _ = r.read_line(&mut rest);
                        line = format!("{head}{}{rest}", String::from_utf8_lossy(&lit));
                    }
                    let cmd = line.trim_end().to_string();
                    rec.lock().unwrap().push(cmd.clone());
                    let up = cmd.to_ascii_uppercase();
                    if matches!(p, Proto::Smtp) && up == "QUIT" {
                        let _ = c.write_all(b"221 bye\r\n");
                        return;
                    }
                    let reply = match p {
                        Proto::Imap => {
                            let (tag, rest) = cmd.split_once(' ').unwrap_or((&cmd, ""));
                            format!("{tag} OK {} done\r\n", rest.split(' ').next().unwrap_or(""))
                        }
                        Proto::Pop3 => format!("+OK {}\r\n", up.split(' ').next().unwrap_or("")),
                        Proto::Smtp if up.starts_with("EHLO") => "250-backend\r\n250 8BITMIME\r\n".into(),
                        Proto::Smtp => format!("250 {} ok\r\n", up.split(' ').next().unwrap_or("")),
                    };
                    if c.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, log)
}

/// A client: line reads with a timeout.
pub struct Client {
    pub w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        w.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Client { r: BufReader::new(w.try_clone().unwrap()), w }
    }

    pub fn line(&mut self) -> String {
        let mut s = String::new();
        let _ = self.r.read_line(&mut s);
        s
    }

    /// An SMTP reply: its lines up to the last (`NNN ` rather than `NNN-`).
    pub fn reply(&mut self) -> String {
        let mut all = String::new();
        loop {
            let l = self.line();
            all.push_str(&l);
            if l.len() < 4 || l.as_bytes()[3] != b'-' {
                return all;
            }
        }
    }

    pub fn send(&mut self, s: &str) {
        self.w.write_all(format!("{s}\r\n").as_bytes()).expect("send");
    }

    /// Reads until the server closes (or resets): whether it did.
    pub fn drains_to_close(&mut self) -> bool {
        let mut b = [0u8; 256];
        loop {
            match self.r.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    }

    /// Whether the server closed the connection (a reset counts: nginx
    /// resets a connection it closes with unread bytes).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 64];
        match self.r.read(&mut b) {
            Ok(0) => true,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
            other => {
                eprintln!("not closed: {other:?} {:?}", other.as_ref().map(|n| String::from_utf8_lossy(&b[..*n])));
                false
            }
        }
    }
}

/// An `auth_http` server: reads each request head, records it, and
/// answers what `reply` makes of it (`reply` gets a lookup of the head's
/// fields by name, "" for one not there).
pub fn auth_http(reply: impl Fn(&dyn Fn(&str) -> String) -> String + Send + 'static) -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind auth");
    let me = l.local_addr().expect("addr").port();
    let log: Log = Arc::default();
    let rec = log.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let h = |name: &str| {
                head.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string)).unwrap_or_default()
            };
            let answer = reply(&h);
            rec.lock().unwrap().push(head.clone());
            let _ = c.write_all(answer.as_bytes());
        }
    });
    (me, log)
}
