//! The SSI stage of a streaming body: the page's pieces go through the
//! parser, text goes out (or into a block being defined, or nowhere in a
//! false `if` branch) and commands run, as nginx's
//! `ngx_http_ssi_body_filter` runs them. A command that fails is logged
//! and replaced by `errmsg` (nothing with `ssi_silent_errors on`).
//!
//! The subrequests of the `include`s in a piece of the page run at the
//! same time, as nginx starts each as the parser meets it; their answers
//! take their places in the output in page order. An include with
//! `wait="yes"` or `set=` first lets those before it finish, and is itself
//! run to its end before the page goes on (an include's `set` is seen by
//! everything after it).

use std::rc::Rc;
use std::sync::Arc;

use super::expr::{Scope, condition, escape_entity, escape_url};
use super::parse::{Command, Event, Parser};
use crate::http::handler::ctx::ReqCtx;
use crate::log::error::Level;
use crate::log_req;
use crate::worker::WorkerCtx;

/// The `if` state (nginx allows no `if` inside another).
#[derive(Default, Clone, Copy)]
struct Cond {
    open: bool,
    /// A branch was taken: later `elif`/`else` branches are not.
    chosen: bool,
}

pub struct Ssi {
    parser: Parser,
    events: Vec<Event>,
    /// nginx's defaults until a `config` command sets them.
    errmsg: std::borrow::Cow<'static, [u8]>,
    timefmt: std::borrow::Cow<'static, [u8]>,
    silent: bool,
    /// Whether text and commands take effect here (false in an `if`
    /// branch not taken).
    output: bool,
    cond: Cond,
    /// Blocks defined so far, and the one being defined.
    blocks: Vec<(Vec<u8>, Vec<Event>)>,
    recording: Option<(Vec<u8>, Vec<Event>)>,
    captures: Vec<Vec<u8>>,
    named: Vec<(Arc<str>, Vec<u8>)>,
    shared: Rc<super::Shared>,
    /// A subrequest failed the whole request (an in-memory answer past
    /// `subrequest_output_buffer_size`): nothing more is processed, and
    /// the response ends without what is left.
    pub aborted: bool,
    /// Includes met in this piece, run together at its end.
    queued: Vec<Queued>,
}

/// An include whose subrequest is still to run, and where its answer goes.
struct Queued {
    /// The offset in the piece's output.
    at: usize,
    path: Vec<u8>,
    args: Option<Vec<u8>>,
    /// `stub`'s block, for an empty or failed answer.
    block: Option<Vec<Event>>,
}

/// What a command did wrong: logged, then `errmsg` goes out.
type Fail = String;

impl Ssi {
    pub fn new(ctx: &ReqCtx<'_, '_>) -> Ssi {
        let conf = &ctx.conf.ssi;
        Ssi {
            parser: Parser::new(conf.value_len),
            events: Vec::new(),
            errmsg: super::ERRMSG.into(),
            timefmt: super::TIMEFMT.into(),
            silent: conf.silent_errors,
            output: true,
            cond: Cond::default(),
            blocks: Vec::new(),
            recording: None,
            captures: Vec::new(),
            named: Vec::new(),
            shared: ctx.ssi.clone().unwrap_or_default(),
            aborted: false,
            queued: Vec::new(),
        }
    }

    /// The store of SSI variables that this page's subrequests share.
    pub fn shared(&self) -> &Rc<super::Shared> {
        &self.shared
    }

    /// Processes the next piece of the page; what goes out is appended to
    /// `out`.
    pub async fn feed(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], out: &mut Vec<u8>) {
        self.parser.feed(input, &mut self.events);
        self.drain(w, ctx, input, out).await;
    }

    /// The end of the page.
    pub async fn finish(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
        self.parser.finish(&mut self.events);
        self.drain(w, ctx, &[], out).await;
    }

    /// Runs the parser's events of the piece `input`.
    async fn drain(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], out: &mut Vec<u8>) {
        // Text alone (most pieces) goes out without the machinery below.
        match self.events[..] {
            [] => return,
            [Event::Span(a, b)] if self.output && self.recording.is_none() => {
                self.events.clear();
                out.extend_from_slice(&input[a..b]);
                return;
            }
            _ => {}
        }
        let mut events = std::mem::take(&mut self.events);
        for e in events.drain(..) {
            if self.aborted {
                return;
            }
            self.event(w, ctx, input, e, out).await;
        }
        // The list's room serves the next piece.
        self.events = events;
        if !self.queued.is_empty() {
            Box::pin(self.run_queued(w, ctx, out)).await;
        }
    }

    /// Runs the queued includes' subrequests at the same time and puts
    /// each answer at its place in `out`.
    async fn run_queued(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
        let mut queued = std::mem::take(&mut self.queued);
        if queued.is_empty() || self.aborted {
            return;
        }
        let fetches = queued
            .iter_mut()
            .map(|q| {
                let f = crate::http::handler::subrequest::fetch(
                    w,
                    ctx,
                    std::mem::take(&mut q.path),
                    q.args.take(),
                    false,
                    Some(self.shared.clone()),
                );
                Box::pin(f) as std::pin::Pin<Box<dyn std::future::Future<Output = _> + '_>>
            })
            .collect();
        let answers: Vec<Result<crate::http::handler::subrequest::Answer, _>> = join_all(fetches).await;
        // The answers go into their places as the output is put together
        // again (a stub block's own includes run in its place).
        let whole = std::mem::take(out);
        let answered = answers
            .iter()
            .map(|a| a.as_ref().map_or(0, |a: &crate::http::handler::subrequest::Answer| a.body.len()))
            .sum::<usize>();
        out.reserve(whole.len() + answered);
        let mut from = 0;
        for (q, answer) in queued.into_iter().zip(answers) {
            out.extend_from_slice(&whole[from..q.at]);
            from = q.at;
            let r = self.place(w, ctx, answer, q.block, out).await;
            if let Err(msg) = r {
                self.fail(ctx, &msg, out);
            }
        }
        out.extend_from_slice(&whole[from..]);
    }

    /// An include's answer in the page: its body, or its `stub` block for
    /// an empty or failed one.
    async fn place(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        answer: Result<crate::http::handler::subrequest::Answer, crate::http::handler::subrequest::Failed>,
        block: Option<Vec<Event>>,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        use crate::http::handler::subrequest::Failed;
        match answer {
            Ok(a) if !(block.is_some() && (a.body.is_empty() || a.status >= 400)) => {
                out.extend_from_slice(&a.body);
                Ok(())
            }
            Ok(_) | Err(Failed::Body) if block.is_some() => {
                for e in block.unwrap_or_default() {
                    Box::pin(self.event(w, ctx, &[], e, out)).await;
                }
                // Includes in the block run now, in its place.
                Box::pin(self.run_queued(w, ctx, out)).await;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(Failed::Cycle) => Err(String::new()),
            Err(Failed::TooBig) => {
                self.aborted = true;
                Err(String::new())
            }
            Err(Failed::Body) => Ok(()),
        }
    }

    /// One event of the piece `input` (a block's events are all owned).
    async fn event(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], e: Event, out: &mut Vec<u8>) {
        match e {
            Event::Span(a, b) => {
                if let Some((_, block)) = &mut self.recording {
                    block.push(Event::Text(input[a..b].to_vec()));
                } else if self.output {
                    out.extend_from_slice(&input[a..b]);
                }
            }
            Event::Text(t) => {
                if let Some((_, b)) = &mut self.recording {
                    b.push(Event::Text(t));
                } else if self.output {
                    out.extend_from_slice(&t);
                }
            }
            Event::Error(msg) => {
                if let Some((_, b)) = &mut self.recording {
                    b.push(Event::Error(msg));
                } else if self.output {
                    self.fail(ctx, &msg, out);
                }
            }
            Event::Command(c) => {
                if let Err(msg) = Box::pin(self.command(w, ctx, c, out)).await
                    && !self.aborted
                {
                    self.fail(ctx, &msg, out);
                }
            }
        }
    }

    /// An empty message: logged already.
    fn fail(&self, ctx: &ReqCtx<'_, '_>, msg: &str, out: &mut Vec<u8>) {
        if !msg.is_empty() {
            log_req!(ctx, Level::Error, "{}", msg);
        }
        if !self.silent {
            out.extend_from_slice(&self.errmsg);
        }
    }

    fn scope<'s, 'c, 'a>(&'s self, ctx: &'s ReqCtx<'c, 'a>) -> Scope<'s, 'c, 'a> {
        Scope { ctx, shared: &self.shared, captures: &self.captures, named: &self.named, timefmt: &self.timefmt }
    }

    async fn command(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        c: Command,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        if let Some((_, b)) = &mut self.recording
            && c.name() != b"endblock"
        {
            b.push(Event::Command(c));
            return Ok(());
        }
        let name = String::from_utf8_lossy(c.name());
        let name: &str = &name;
        let conditional = matches!(name, "if" | "elif" | "else" | "endif");
        if !self.output && !conditional {
            return Ok(());
        }
        let spec: &[(&str, bool)] = match name {
            "include" => &[("file", false), ("virtual", false), ("stub", false), ("set", false), ("wait", false)],
            "echo" => &[("var", true), ("default", false), ("encoding", false)],
            "set" => &[("var", true), ("value", true)],
            "config" => &[("errmsg", false), ("timefmt", false)],
            "if" | "elif" => &[("expr", true)],
            "block" => &[("name", true)],
            "else" | "endif" | "endblock" => &[],
            _ => return Err(format!("invalid SSI command: \"{name}\"")),
        };
        check_params(name, &c, spec)?;
        let p = |n: &str| c.param(n);
        match name {
            "echo" => self.echo(ctx, &c, out),
            "set" => {
                let scope = self.scope(ctx);
                let value = scope.evaluate(p("value").unwrap_or_default())?;
                let var = p("var").unwrap_or_default().to_vec();
                self.shared.set(&var, value);
                Ok(())
            }
            "config" => {
                if let Some(v) = p("timefmt") {
                    self.timefmt = v.to_vec().into();
                }
                if let Some(v) = p("errmsg") {
                    self.errmsg = v.to_vec().into();
                }
                Ok(())
            }
            "include" => self.include(w, ctx, &c, out).await,
            "block" => {
                self.recording = Some((p("name").unwrap_or_default().to_vec(), Vec::new()));
                Ok(())
            }
            "endblock" => match self.recording.take() {
                Some((n, b)) => {
                    self.blocks.retain(|(m, _)| *m != n);
                    self.blocks.push((n, b));
                    Ok(())
                }
                None => Err("invalid context of SSI command: \"endblock\"".into()),
            },
            "if" => {
                if self.cond.open {
                    return Err("the \"if\" command inside the \"if\" command".into());
                }
                self.branch(ctx, p("expr"))?;
                self.cond.open = true;
                Ok(())
            }
            "elif" => {
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"elif\"".into());
                }
                if self.cond.chosen {
                    self.output = false;
                    return Ok(());
                }
                self.branch(ctx, p("expr"))
            }
            "else" => {
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"else\"".into());
                }
                self.output = !self.cond.chosen;
                self.cond.chosen = true;
                Ok(())
            }
            _ => {
                // endif
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"endif\"".into());
                }
                self.cond = Cond::default();
                self.output = true;
                Ok(())
            }
        }
    }

    /// An `if`/`elif` branch: taken when the expression holds. An
    /// expression that fails changes nothing (nginx's: the `if` is not
    /// open then, its `else` and `endif` are errors too).
    fn branch(&mut self, ctx: &ReqCtx<'_, '_>, expr: Option<&[u8]>) -> Result<(), Fail> {
        let d = condition(&self.scope(ctx), expr.unwrap_or_default())?;
        self.output = false;
        if let Some((caps, named)) = d.captures {
            self.captures = caps;
            self.named.extend(named);
        }
        if d.truth {
            self.output = true;
            self.cond.chosen = true;
        }
        Ok(())
    }

    fn echo(&self, ctx: &ReqCtx<'_, '_>, c: &Command, out: &mut Vec<u8>) -> Result<(), Fail> {
        let scope = self.scope(ctx);
        let var = c.param("var").unwrap_or_default();
        let name = scope.evaluate(var)?;
        let value = match scope.lookup(&name)? {
            Some(v) => v,
            None => match c.param("default") {
                Some(d) => scope.evaluate(d)?,
                None => b"(none)".to_vec(),
            },
        };
        match c.param("encoding") {
            None | Some(b"entity") => escape_entity(&value, out),
            Some(b"url") => escape_url(&value, out),
            Some(b"none") => out.extend_from_slice(&value),
            Some(other) => {
                return Err(format!("unknown encoding \"{}\" in the \"echo\" command", String::from_utf8_lossy(other)));
            }
        }
        Ok(())
    }

    async fn include(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        c: &Command,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        let (file, virt) = (c.param("file"), c.param("virtual"));
        let uri = match (file, virt) {
            (Some(f), Some(v)) => {
                return Err(format!(
                    "inclusion may be either virtual=\"{}\" or file=\"{}\"",
                    String::from_utf8_lossy(v),
                    String::from_utf8_lossy(f)
                ));
            }
            (Some(u), None) | (None, Some(u)) => u,
            (None, None) => return Err("no parameter in \"include\" SSI command".into()),
        };
        if let (Some(f), Some(_)) = (file, c.param("wait")) {
            return Err(format!("\"wait\" cannot be used with file=\"{}\"", String::from_utf8_lossy(f)));
        }
        if let Some(wait) = c.param("wait")
            && wait != b"yes"
            && wait != b"no"
        {
            return Err(format!("invalid value \"{}\" in the \"wait\" parameter", String::from_utf8_lossy(wait)));
        }
        let set = c.param("set");
        let stub = c.param("stub");
        if set.is_some() && stub.is_some() {
            return Err("\"set\" and \"stub\" cannot be used together in \"include\" SSI command".into());
        }
        let block = match stub {
            Some(name) => match self.blocks.iter().find(|(n, _)| n == name) {
                Some((_, b)) => Some(b.clone()),
                None => {
                    return Err(format!("\"stub\"=\"{}\" for \"include\" not found", String::from_utf8_lossy(name)));
                }
            },
            None => None,
        };
        let mut target = self.scope(ctx).evaluate(uri)?;
        // nginx's NGX_HTTP_SSI_ADD_PREFIX: a relative URI is relative to
        // the directory of the page's.
        if target.first() != Some(&b'/') {
            let path = &ctx.req.path;
            let dir = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
            let mut abs = path[..dir].to_vec();
            abs.extend_from_slice(&target);
            target = abs;
        }
        let (path, args) = crate::http::handler::subrequest::parse_uri_owned(target)
            .map_err(|target| format!("unsafe URI \"{}\" was detected", String::from_utf8_lossy(&target)))?;
        if set.is_none() && c.param("wait") != Some(b"yes") {
            self.queued.push(Queued { at: out.len(), path, args, block });
            return Ok(());
        }
        // This one is waited for: those before it finish first.
        Box::pin(self.run_queued(w, ctx, out)).await;
        if self.aborted {
            return Err(String::new());
        }
        let answer =
            crate::http::handler::subrequest::fetch(w, ctx, path, args, set.is_some(), Some(self.shared.clone())).await;
        if matches!(answer, Err(crate::http::handler::subrequest::Failed::TooBig)) {
            self.aborted = true;
            return Err(String::new());
        }
        if let Some(var) = set {
            let a = answer.map_err(|_| "include subrequest failed".to_string())?;
            self.shared.set(var, a.body);
            return Ok(());
        }
        self.place(w, ctx, answer, block, out).await
    }
}

/// Polls every future until all are done; their outputs in order.
async fn join_all<'f, T>(mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'f>>>) -> Vec<T> {
    let mut done: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, d) in futs.iter_mut().zip(done.iter_mut()) {
            if d.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *d = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// nginx's checks of a command's parameters: each known, none twice,
/// the mandatory ones there.
fn check_params(name: &str, c: &Command, spec: &[(&str, bool)]) -> Result<(), Fail> {
    for (i, (p, _)) in c.params().enumerate() {
        let p = String::from_utf8_lossy(p);
        if !spec.iter().any(|(s, _)| *s == p) {
            return Err(format!("invalid parameter name: \"{p}\" in \"{name}\" SSI command"));
        }
        if c.params().take(i).any(|(q, _)| q == p.as_bytes()) {
            return Err(format!("duplicate \"{p}\" parameter in \"{name}\" SSI command"));
        }
    }
    for (s, mandatory) in spec {
        if *mandatory && c.param(s).is_none() {
            return Err(format!("mandatory \"{s}\" parameter is absent in \"{name}\" SSI command"));
        }
    }
    Ok(())
}
