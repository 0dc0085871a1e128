//! Process lifecycle: command line, config test and dump, signals to a
//! running instance, daemonizing, and the master that owns listeners and
//! worker generations.

pub mod build_info;
pub mod daemon;
pub mod default_conf;
mod handoff;
pub mod master;
pub mod pidfile;
mod prepare;
pub mod rlimits;
mod serving;
pub mod signal;
pub mod supervisor;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::cli::{self, Cli};
use crate::config::{self, LoadOptions, Source};
use crate::log::error::Level;

pub const DEFAULT_PREFIX: &str = match option_env!("SLUICE_PREFIX") {
    Some(p) => p,
    None => "/usr/local/sluice/",
};

/// The configuration file read without `-c`, relative to the prefix unless
/// absolute: nginx's `--conf-path`. A distribution package sets it at build
/// time (`SLUICE_CONF_PATH=/etc/sluice/sluice.conf`) so that a bare
/// `sluice -t` or `sluice -s reload` finds the installed configuration.
pub const DEFAULT_CONF: &str = match option_env!("SLUICE_CONF_PATH") {
    Some(p) => p,
    None => "conf/sluice.conf",
};

pub fn hostname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| rustix::system::uname().nodename().to_string_lossy().into_owned())
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// How the configuration is found: `-c` (relative to the prefix, as in
/// nginx), else the default path, else the embedded default.
pub fn load_options(cli: &Cli) -> LoadOptions {
    let prefix = absolute(cli.prefix.as_deref().unwrap_or(Path::new(DEFAULT_PREFIX)));
    let source = match &cli.conf {
        Some(c) => Source::File(if c.is_absolute() { c.clone() } else { prefix.join(c) }),
        None => {
            let p = prefix.join(DEFAULT_CONF);
            if p.exists() { Source::File(p) } else { default_conf::source() }
        }
    };
    LoadOptions { prefix, source, globals: cli.globals.clone(), error_log: cli.error_log.clone() }
}

/// The file given by `-e` (relative to the prefix), which gets the lines
/// printed before a configuration runs, as nginx's early log does; None
/// without `-e` or with `-e stderr`.
fn early_log(opts: &LoadOptions) -> Option<PathBuf> {
    match opts.error_log.as_deref() {
        None | Some("stderr") => None,
        Some(p) if Path::new(p).is_absolute() => Some(PathBuf::from(p)),
        Some(p) => Some(opts.prefix.join(p)),
    }
}

/// An `[emerg]` before or while a configuration starts: on stderr, and in
/// the `-e` log as nginx writes it there.
pub(crate) fn emerg(opts: &LoadOptions, msg: impl std::fmt::Display) {
    eprintln!("sluice: [emerg] {msg}");
    if let Some(p) = early_log(opts) {
        crate::log::error::append_line(&p, Level::Emerg, format_args!("{msg}"));
    }
}

/// The whole program; returns the exit code.
pub fn main_entry(args: &[String]) -> i32 {
    crate::worker::trim::tune_allocator();
    let cli = match cli::parse(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            eprint!("{}", cli::usage());
            return 1;
        }
    };
    if cli.version {
        eprint!("{}", build_info::version_text(cli.version_full));
    }
    if cli.help {
        eprint!("{}", cli::usage());
        return 0;
    }
    if cli.version && !cli.test && cli.signal.is_none() {
        return 0;
    }
    let opts = load_options(&cli);
    let name = match &opts.source {
        Source::File(p) => p.display().to_string(),
        Source::Text { name, .. } => name.display().to_string(),
    };
    let early = early_log(&opts);
    // A serving process started by a master takes the master's channel and
    // sockets before anything else.
    let serving = match serving::attach() {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            emerg(&opts, e);
            return 1;
        }
    };
    let cfg = match config::load(&opts) {
        Ok(c) => c,
        Err(e) => {
            emerg(&opts, &e);
            if cli.test {
                eprintln!("sluice: configuration file {name} test failed");
            }
            return 1;
        }
    };
    if !cli.test && cli.signal.is_none() {
        // The parse tree is gone: its pages go back to the kernel instead
        // of staying resident for as long as the process runs (a
        // configuration of 10,000 servers freed about 100 MB here).
        crate::worker::trim::release_free_memory();
    }
    if let Some(s) = serving {
        // The master printed the notices and warnings already.
        return master::run(cfg, opts, Some(s));
    }
    if cli.signal.is_none() {
        if !(cli.test && cli.quiet) {
            for n in &cfg.notices {
                eprintln!("sluice: [notice] {n}");
            }
        }
        for w in &cfg.warnings {
            eprintln!("sluice: [warn] {w}");
            if let Some(p) = &early {
                crate::log::error::append_line(p, Level::Warn, format_args!("{w}"));
            }
        }
    }
    if cli.test {
        // nginx's order: the syntax verdict, then what opening files found.
        if !cli.quiet {
            eprintln!("sluice: the configuration file {name} syntax is ok");
        }
        if let Err(e) = prepare::check_roots(&cfg).and_then(|()| prepare::log_files(&cfg)) {
            emerg(&opts, &e);
            eprintln!("sluice: configuration file {name} test failed");
            return 1;
        }
        if !cli.quiet {
            eprintln!("sluice: configuration file {name} test is successful");
        }
        if cli.dump {
            // A file included twice is dumped once, as nginx does.
            let mut seen = std::collections::HashSet::new();
            for f in cfg.files.iter().filter(|f| seen.insert(&f.path)) {
                println!("# configuration file {}:", f.path.display());
                print!("{}", f.text);
                if !f.text.ends_with('\n') {
                    println!();
                }
                println!();
            }
        }
        // The process ends now: freeing the configuration piece by piece
        // would only add to `-t`'s time (a fifth of it with 10,000 servers).
        std::mem::forget(cfg);
        return 0;
    }
    if let Some(sig) = &cli.signal {
        let sent = signal::send(&cfg, sig);
        // As for `-t`: nothing to free before exiting.
        std::mem::forget(cfg);
        return match sent {
            Ok(()) => 0,
            Err(e) => {
                // nginx: a missing or unreadable pid file is an error, a
                // failed kill() an alert.
                let level = if e.starts_with("kill(") { "alert" } else { "error" };
                eprintln!("sluice: [{level}] {e}");
                1
            }
        };
    }
    if let Source::Text { .. } = &opts.source {
        eprintln!(
            "sluice: no configuration file at {}; serving {} on http://127.0.0.1:8080/ (autoindex on)",
            opts.prefix.join(DEFAULT_CONF).display(),
            std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
        );
    }
    if cfg.main.daemon && !daemon::is_child() {
        return daemon::run_parent();
    }
    if daemon::is_child() {
        daemon::detach();
    }
    if cfg.main.master_process { supervisor::run(cfg, opts) } else { master::run(cfg, opts, None) }
}
