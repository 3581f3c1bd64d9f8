//! The command line of `devipc-conformance`.
//!
//! ```text
//! devipc-conformance [--backend B]... [--rule PATTERN]... [--list] [--json] [--timeout SECS]
//!
//!   --backend B      ascend | hip | emulated-ascend | emulated-hip | hip-vmm |
//!                    emulated-hip-vmm, repeatable or a comma list; default:
//!                    emulated-ascend,emulated-hip,emulated-hip-vmm (the *-vmm targets run
//!                    the memory rules with every buffer allocated for hip-vmm-fd)
//!   --rule PATTERN   rule ids containing PATTERN, or matching it as a glob (* and ?);
//!                    repeatable; default: every rule
//!   --list           list the selected rules instead of running them
//!   --json           print the machine-readable report (schema: crate::report)
//!   --timeout SECS   longest one rule may run, peers included (default 120)
//! ```
//!
//! Exit code: 0 when nothing failed (skips are not failures), 1 when a rule failed, the
//! probe of a backend failed or a run left state behind, 2 on a usage error. A child
//! invocation (`__role ...`, see [`crate::child`]) is dispatched before any of this.

use std::io::Write;
use std::time::Duration;

use crate::catalogue;
use crate::process::ROLE_ARG;
use crate::report;
use crate::runner::{self, Options};
use crate::target::Target;

/// Parsed command line.
#[derive(Debug, Clone)]
pub struct Cli {
    /// What to run.
    pub options: Options,
    /// `--list`.
    pub list: bool,
    /// `--json`.
    pub json: bool,
}

const USAGE: &str = concat!(
    "usage: devipc-conformance [--backend ",
    "ascend|hip|emulated-ascend|emulated-hip|hip-vmm|emulated-hip-vmm",
    "]... [--rule PATTERN]... [--list] [--json] [--timeout SECS]"
);

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Cli, String> {
    let mut targets: Vec<Target> = Vec::new();
    let mut patterns = Vec::new();
    let mut list = false;
    let mut json = false;
    let mut timeout = Duration::from_secs(120);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match flag {
            "--backend" | "-b" => {
                for t in Target::parse_list(&value("--backend")?)? {
                    if !targets.contains(&t) {
                        targets.push(t);
                    }
                }
            }
            "--rule" | "-r" => patterns.push(value("--rule")?),
            "--list" => list = true,
            "--json" => json = true,
            "--timeout" => {
                let v = value("--timeout")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--timeout {v}: expected a positive number of seconds")
                    })?;
                timeout = Duration::from_secs_f64(secs);
            }
            "--help" | "-h" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    if targets.is_empty() {
        targets = Target::DEFAULT.to_vec();
    }
    Ok(Cli {
        options: Options {
            targets,
            patterns,
            timeout,
        },
        list,
        json,
    })
}

/// The program: dispatches child roles, else parses, runs and reports. Returns the exit
/// code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(ROLE_ARG) {
        return crate::child::main(&args[1..]);
    }
    let cli = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    if cli.list {
        let rules: Vec<_> = catalogue::all()
            .into_iter()
            .filter(|r| cli.options.selects(r))
            .filter(|r| cli.options.targets.iter().any(|&t| r.runs_on(t)))
            .collect();
        if cli.json {
            println!("{}", report::json_list(&rules));
        } else {
            print!("{}", report::list_table(&rules));
        }
        return 0;
    }
    let json = cli.json;
    let reports = runner::run(&cli.options, |target, r| {
        if !json {
            eprintln!("[{target}] {} {}", r.status.name(), r.rule.id);
        }
    });
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json_report(&reports)).unwrap_or_default()
        );
    } else {
        let mut out = std::io::stdout().lock();
        for t in &reports {
            let _ = writeln!(out, "{}", report::table(t));
        }
        let _ = writeln!(out, "{}", report::summary_line(report::total(&reports)));
    }
    i32::from(reports.iter().any(runner::TargetReport::failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_options() {
        let c = parse(&args("--backend hip,emulated-hip --backend ascend --rule vmm --rule=hip.* --json --timeout 2.5")).unwrap();
        assert_eq!(
            c.options.targets,
            [Target::Hip, Target::EmulatedHip, Target::Ascend]
        );
        assert_eq!(c.options.patterns, ["vmm", "hip.*"]);
        assert!(c.json && !c.list);
        assert_eq!(c.options.timeout, Duration::from_millis(2500));
        let d = parse(&[]).unwrap();
        assert_eq!(d.options.targets, Target::DEFAULT);
        assert_eq!(
            parse(&args("--backend emulated-hip-vmm,hip-vmm"))
                .unwrap()
                .options
                .targets,
            [Target::EmulatedHipVmm, Target::HipVmm]
        );
        assert!(parse(&args("--backend cuda")).is_err());
        assert!(parse(&args("--timeout -1")).is_err());
        assert!(parse(&args("--bogus")).is_err());
        assert!(parse(&args("--rule")).is_err());
    }
}
