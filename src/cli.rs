//! nginx's command line: `-c FILE`, `-p PREFIX`, `-e FILE`, `-t`, `-T`,
//! `-q`, `-s SIGNAL`, `-g DIRECTIVES`, `-v`, `-V`, `-h`, with nginx's parsing
//! (flags may be grouped, values may be attached: `-tq`, `-cfile`).

use std::path::PathBuf;

#[derive(Debug, Default, PartialEq)]
pub struct Cli {
    pub help: bool,
    pub version: bool,
    pub version_full: bool,
    pub test: bool,
    pub dump: bool,
    pub quiet: bool,
    pub signal: Option<String>,
    pub prefix: Option<PathBuf>,
    pub conf: Option<PathBuf>,
    /// `-e FILE` (nginx 1.19.5+): the error log used before the
    /// configuration's `error_log` applies, and the main level's when it
    /// names none; `stderr` is standard error.
    pub error_log: Option<String>,
    pub globals: Option<String>,
}

/// The usage text, with the build's default prefix and configuration file
/// as nginx prints its own.
pub fn usage() -> String {
    format!(
        "Usage: sluice [-?hvVtTq] [-s signal] [-p prefix]
              [-e filename] [-c filename] [-g directives]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and build details and exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to the master process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: {})
  -e filename   : set error log file (default: logs/error.log)
  -c filename   : set configuration file (default: {})
  -g directives : set global directives out of configuration file

With no configuration file at the default path, sluice serves the current
directory on http://127.0.0.1:8080 with autoindex on.
",
        crate::process::DEFAULT_PREFIX,
        crate::process::DEFAULT_CONF
    )
}

pub fn parse(args: &[String]) -> Result<Cli, String> {
    let mut cli = Cli::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let Some(flags) = a.strip_prefix('-') else {
            return Err(format!("invalid option: \"{a}\""));
        };
        if flags.is_empty() {
            return Err(format!("invalid option: \"{a}\""));
        }
        let chars: Vec<char> = flags.chars().collect();
        let mut j = 0;
        while j < chars.len() {
            let c = chars[j];
            j += 1;
            match c {
                '?' | 'h' => cli.help = true,
                'v' => cli.version = true,
                'V' => {
                    cli.version = true;
                    cli.version_full = true;
                }
                't' => cli.test = true,
                'T' => {
                    cli.test = true;
                    cli.dump = true;
                }
                'q' => cli.quiet = true,
                'c' | 'p' | 'e' | 'g' | 's' => {
                    let value: String = if j < chars.len() {
                        let v: String = chars[j..].iter().collect();
                        j = chars.len();
                        v
                    } else {
                        i += 1;
                        match args.get(i) {
                            Some(v) => v.clone(),
                            None => {
                                let what = match c {
                                    'c' | 'e' => "file name",
                                    'p' => "directory name",
                                    'g' => "parameter",
                                    _ => "parameter",
                                };
                                return Err(format!("option \"-{c}\" requires {what}"));
                            }
                        }
                    };
                    match c {
                        'c' => cli.conf = Some(PathBuf::from(value)),
                        'p' => cli.prefix = Some(PathBuf::from(value)),
                        'e' => cli.error_log = Some(value),
                        'g' => cli.globals = Some(value),
                        _ => {
                            if !matches!(value.as_str(), "stop" | "quit" | "reopen" | "reload") {
                                return Err(format!("invalid option: \"-s {value}\""));
                            }
                            cli.signal = Some(value);
                        }
                    }
                }
                _ => return Err(format!("invalid option: \"{c}\"")),
            }
        }
        i += 1;
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Cli, String> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn nginx_forms() {
        let c = p(&["-tq", "-c", "a.conf", "-pprefix/", "-g", "daemon off;"]).unwrap();
        assert!(c.test && c.quiet);
        assert_eq!(c.conf, Some(PathBuf::from("a.conf")));
        assert_eq!(c.prefix, Some(PathBuf::from("prefix/")));
        assert_eq!(c.globals.as_deref(), Some("daemon off;"));
        let c = p(&["-s", "reload"]).unwrap();
        assert_eq!(c.signal.as_deref(), Some("reload"));
        assert!(p(&["-T"]).unwrap().dump);
        // nginx-tests' own command line.
        let c = p(&["-p", "/t/", "-c", "nginx.conf", "-e", "error.log", "-g", "pid /t/nginx.pid;"]).unwrap();
        assert_eq!(c.error_log.as_deref(), Some("error.log"));
        assert_eq!(p(&["-estderr"]).unwrap().error_log.as_deref(), Some("stderr"));
    }

    #[test]
    fn errors() {
        assert_eq!(p(&["-s", "bogus"]).unwrap_err(), "invalid option: \"-s bogus\"");
        assert_eq!(p(&["-c"]).unwrap_err(), "option \"-c\" requires file name");
        assert_eq!(p(&["-e"]).unwrap_err(), "option \"-e\" requires file name");
        assert_eq!(p(&["-x"]).unwrap_err(), "invalid option: \"x\"");
        assert_eq!(p(&["file"]).unwrap_err(), "invalid option: \"file\"");
    }
}
