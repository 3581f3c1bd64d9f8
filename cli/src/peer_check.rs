//! The doctor's two-process check (its "probe"): does sharing memory and signals actually
//! work on a backend?
//!
//! The doctor re-executes itself as a child (`devipc __probe-child <backend>`, with the
//! same environment; `devipc-child` runs it) and talks to it over the child's
//! stdin/stdout, one message `@@ key value` (child to parent) or line (parent to child) at
//! a time:
//!
//! 1. the child starts the same backend and says `pid <process id>`;
//! 2. the parent allocates a buffer, writes pattern A into its first half, exports it and
//!    two signals (`ping`, `pong`) with trustlist validation, grants them to the child's
//!    process id, and sends the three tokens as text;
//! 3. the child imports all three (`imported <microseconds>`), checks pattern A
//!    (`verified`), writes pattern B into the second half and raises `pong`;
//! 4. the parent waits for `pong` and checks pattern B;
//! 5. [`ROUNDS`] signal round trips: the parent raises `ping`, the child waits for it and
//!    raises `pong`, the parent waits for `pong`; each round is timed;
//! 6. the child drops its imports, says `done` and exits 0.
//!
//! Every wait has a deadline and the child kills itself after [`CHILD_WATCHDOG`], so a
//! broken backend makes the probe fail, never hang.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use devipc::{BackendChoice, DeviceId, ExportOptions, MemToken, ProcessId, Runtime, SignalToken};
use devipc_child::{
    Child, ChildError, Command, FOREVER, OtherMessages, hear, run_role, say, start_watchdog,
};
use serde::Serialize;

/// Size of the probe buffer (Ascend rounds it up to its allocation granularity).
pub const SIZE: usize = 64 << 10;
/// Signal round trips timed by the probe.
pub const ROUNDS: usize = 200;
/// Deadline of every signal wait.
pub const WAIT: Duration = Duration::from_secs(20);
/// A child still running after this exits with status 97.
pub const CHILD_WATCHDOG: Duration = Duration::from_secs(60);
/// The hidden subcommand the child runs.
pub const CHILD_COMMAND: &str = "__probe-child";

const HALF: usize = SIZE / 2;

/// Pattern A (parent to child) at byte `i`.
fn pattern_a(i: usize) -> u8 {
    (i % 251) as u8 ^ 0x5a
}

/// Pattern B (child to parent) at byte `i`.
fn pattern_b(i: usize) -> u8 {
    (i % 241) as u8 ^ 0xa5
}

/// One step of the probe (in the JSON report as is).
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Short name, stable for scripts (`spawn`, `export`, `import`, ...).
    pub name: &'static str,
    /// Whether it succeeded.
    pub passed: bool,
    /// Wall time of the step in milliseconds.
    pub ms: f64,
    /// What happened (a figure, or the error).
    pub detail: String,
}

/// Statistics of the timed signal round trips, in microseconds (in the JSON report as
/// `signal_round_trip_us`, whose name carries the unit).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RoundTrips {
    /// Rounds timed.
    pub rounds: usize,
    /// Fastest round.
    #[serde(rename = "min")]
    pub min_us: f64,
    /// Median round.
    #[serde(rename = "median")]
    pub median_us: f64,
    /// 99th percentile.
    #[serde(rename = "p99")]
    pub p99_us: f64,
    /// Slowest round.
    #[serde(rename = "max")]
    pub max_us: f64,
}

/// The probe's result on one backend (the JSON report's `probe`).
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// Every step passed.
    pub passed: bool,
    /// Wall time of the whole probe in milliseconds.
    pub total_ms: f64,
    /// The steps run, in order; the first failing one is the last.
    pub steps: Vec<Step>,
    /// Signal round-trip figures, when that step ran.
    #[serde(rename = "signal_round_trip_us")]
    pub round_trips: Option<RoundTrips>,
    /// Whatever the child wrote on stderr, when the probe failed.
    pub child_stderr: Option<String>,
}

type StepResult<T> = Result<T, String>;

/// Starts `devipc __probe-child <backend>`: its messages in order (anything else is an
/// error), its stderr kept whole for the report.
fn spawn_child(choice: BackendChoice) -> StepResult<Child> {
    Command::new(CHILD_COMMAND)
        .map_err(|e| format!("cannot find this program: {e}"))?
        .args([CHILD_COMMAND, &choice.to_string()])
        .capture_stderr(usize::MAX)
        .other_messages(OtherMessages::Refuse)
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))
}

/// The value of the child's next message, which must be `key`; a `fail` message or the
/// child's exit is an error.
fn expect(c: &mut Child, key: &str) -> StepResult<String> {
    c.expect(key, FOREVER).map_err(|e| match e {
        ChildError::Failed(why) => format!("child: {why}"),
        ChildError::Exited(_) => format!("the child exited before saying `{key}`"),
        ChildError::Unexpected { key: other, .. } => {
            format!("expected `{key}` from the child, got `{other}`")
        }
        e => e.to_string(),
    })
}

fn send(c: &mut Child, line: &str) -> StepResult<()> {
    c.send(line).map_err(|e| e.to_string())
}

/// Closes the child's stdin, waits for its exit and returns its stderr.
fn finish(mut c: Child) -> (StepResult<()>, String) {
    let result = match c.wait(FOREVER) {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("the child exited with {s}")),
        Err(e) => Err(format!("waiting for the child: {e}")),
    };
    (result, c.stderr())
}

/// Kills the child (after a failure) and returns its stderr.
fn kill(mut c: Child) -> String {
    c.kill();
    c.stderr()
}

/// Runs the probe for `choice`, whose runtime `rt` this process already started.
pub fn run(choice: BackendChoice, rt: &Runtime) -> ProbeReport {
    let started = Instant::now();
    let mut steps = Vec::new();
    let mut round_trips = None;
    let mut child: Option<Child> = None;
    let outcome = probe_steps(rt, choice, &mut steps, &mut round_trips, &mut child);
    let mut child_stderr = None;
    let passed = match (outcome, child) {
        (Ok(()), Some(c)) => {
            let t = Instant::now();
            let (exit, stderr) = finish(c);
            let ok = exit.is_ok();
            steps.push(Step {
                name: "child-exit",
                passed: ok,
                ms: ms(t.elapsed()),
                detail: match exit {
                    Ok(()) => "exited 0 after releasing its imports".to_owned(),
                    Err(e) => e,
                },
            });
            if !ok {
                child_stderr = Some(stderr);
            }
            ok
        }
        (_, c) => {
            child_stderr = c.map(kill);
            false
        }
    };
    ProbeReport {
        passed,
        total_ms: ms(started.elapsed()),
        steps,
        round_trips,
        child_stderr,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs `f` as the step `name`, recording its time and outcome.
fn step<T>(
    steps: &mut Vec<Step>,
    name: &'static str,
    f: impl FnOnce() -> StepResult<(T, String)>,
) -> StepResult<T> {
    let t = Instant::now();
    let result = f();
    let elapsed = ms(t.elapsed());
    match result {
        Ok((value, detail)) => {
            steps.push(Step {
                name,
                passed: true,
                ms: elapsed,
                detail,
            });
            Ok(value)
        }
        Err(e) => {
            steps.push(Step {
                name,
                passed: false,
                ms: elapsed,
                detail: e.clone(),
            });
            Err(e)
        }
    }
}

fn probe_steps(
    rt: &Runtime,
    choice: BackendChoice,
    steps: &mut Vec<Step>,
    round_trips: &mut Option<RoundTrips>,
    slot: &mut Option<Child>,
) -> StepResult<()> {
    let device = DeviceId(0);
    let peer = step(steps, "spawn", || {
        let mut c = spawn_child(choice)?;
        let pid = expect(&mut c, "pid");
        *slot = Some(c);
        let pid: u32 = pid?
            .parse()
            .map_err(|e| format!("the child's pid is not a number: {e}"))?;
        Ok((
            ProcessId(pid),
            format!("child started {choice} as process {pid}"),
        ))
    })?;
    let c = slot.as_mut().ok_or("no child")?;

    let (buffer, ping, pong) = step(steps, "export", || {
        let e = |what: &str, err: devipc::Error| format!("{what}: {err}");
        let buffer = rt.allocate(device, SIZE).map_err(|x| e("allocate", x))?;
        let a: Vec<u8> = (0..HALF).map(pattern_a).collect();
        buffer.write(0, &a).map_err(|x| e("write pattern A", x))?;
        let token = buffer
            .export(ExportOptions::granted_only())
            .map_err(|x| e("export the buffer", x))?;
        buffer
            .grant(&token, &[peer])
            .map_err(|x| e("grant the buffer", x))?;
        let ping = rt.create_signal(device).map_err(|x| e("create ping", x))?;
        let pong = rt.create_signal(device).map_err(|x| e("create pong", x))?;
        let mut tokens = Vec::new();
        for s in [&ping, &pong] {
            let t = s
                .export(ExportOptions::granted_only())
                .map_err(|x| e("export a signal", x))?;
            s.grant(&t, &[peer]).map_err(|x| e("grant a signal", x))?;
            tokens.push(t);
        }
        send(c, &format!("mem {token}"))?;
        send(c, &format!("ping {}", tokens[0]))?;
        send(c, &format!("pong {}", tokens[1]))?;
        let detail = format!(
            "{} bytes ({}), 2 signals, granted to {peer}",
            buffer.len(),
            token.mechanism()
        );
        Ok(((buffer, ping, pong), detail))
    })?;

    step(steps, "import", || {
        let us = expect(c, "imported")?;
        Ok((
            (),
            format!("child imported the buffer and both signals in {us} us"),
        ))
    })?;
    step(steps, "bytes-to-child", || {
        expect(c, "verified")?;
        Ok(((), format!("child read {HALF} bytes of pattern A")))
    })?;
    step(steps, "bytes-to-parent", || {
        pong.wait(Some(WAIT))
            .map_err(|e| format!("waiting for the child's pong: {e}"))?;
        let mut got = vec![0u8; SIZE - HALF];
        buffer
            .read(HALF, &mut got)
            .map_err(|e| format!("read: {e}"))?;
        if let Some(i) = (0..got.len()).find(|&i| got[i] != pattern_b(i)) {
            return Err(format!(
                "byte {} is {:#04x}, the child wrote {:#04x}",
                HALF + i,
                got[i],
                pattern_b(i)
            ));
        }
        Ok(((), format!("read {} bytes of pattern B", got.len())))
    })?;
    let stats = step(steps, "signal-round-trips", || {
        let mut rounds = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            let t = Instant::now();
            ping.notify()
                .map_err(|e| format!("round {round}: notify: {e}"))?;
            pong.wait(Some(WAIT))
                .map_err(|e| format!("round {round}: wait: {e}"))?;
            rounds.push(t.elapsed().as_secs_f64() * 1e6);
        }
        expect(c, "done")?;
        rounds.sort_by(f64::total_cmp);
        let pick = |q: f64| rounds[((rounds.len() - 1) as f64 * q).round() as usize];
        let stats = RoundTrips {
            rounds: rounds.len(),
            min_us: rounds[0],
            median_us: pick(0.5),
            p99_us: pick(0.99),
            max_us: rounds[rounds.len() - 1],
        };
        let detail = format!(
            "{ROUNDS} round trips: median {:.1} us (min {:.1}, p99 {:.1}, max {:.1})",
            stats.median_us, stats.min_us, stats.p99_us, stats.max_us
        );
        Ok((stats, detail))
    })?;
    *round_trips = Some(stats);
    Ok(())
}

/// The child's side: `devipc __probe-child <backend>`. Exit status 0 when every step of
/// its side passed; on an error it says `fail <reason>` and exits 1.
pub fn child_main(choice: &str) -> ExitCode {
    start_watchdog(
        CHILD_WATCHDOG,
        "devipc probe child: watchdog expired, giving up".to_owned(),
    );
    if run_role("devipc probe child", || child(choice)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn child(choice: &str) -> StepResult<()> {
    let choice: BackendChoice = choice.parse().map_err(|e| format!("{e}"))?;
    let rt = Runtime::from_choice(choice).map_err(|e| format!("starting {choice}: {e}"))?;
    say("pid", &rt.process_id().to_string());
    let hear_key = |key: &str| -> StepResult<String> {
        let line = hear().ok_or_else(|| format!("the parent closed the pipe before `{key}`"))?;
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(' '))
            .map(str::to_owned)
            .ok_or_else(|| format!("expected `{key}` from the parent, got `{line}`"))
    };
    let mem: MemToken = hear_key("mem")?
        .parse()
        .map_err(|e| format!("mem token: {e}"))?;
    let ping: SignalToken = hear_key("ping")?
        .parse()
        .map_err(|e| format!("ping token: {e}"))?;
    let pong: SignalToken = hear_key("pong")?
        .parse()
        .map_err(|e| format!("pong token: {e}"))?;
    let device = DeviceId(0);
    let t = Instant::now();
    let buffer = rt
        .import(&mem, device)
        .map_err(|e| format!("import the buffer: {e}"))?;
    let ping = rt
        .import_signal(&ping, device)
        .map_err(|e| format!("import ping: {e}"))?;
    let pong = rt
        .import_signal(&pong, device)
        .map_err(|e| format!("import pong: {e}"))?;
    say(
        "imported",
        &format!("{:.1}", t.elapsed().as_secs_f64() * 1e6),
    );

    let mut got = vec![0u8; HALF];
    buffer.read(0, &mut got).map_err(|e| format!("read: {e}"))?;
    if let Some(i) = (0..HALF).find(|&i| got[i] != pattern_a(i)) {
        return Err(format!(
            "byte {i} is {:#04x}, the parent wrote {:#04x}",
            got[i],
            pattern_a(i)
        ));
    }
    say("verified", "");
    let b: Vec<u8> = (0..SIZE - HALF).map(pattern_b).collect();
    buffer
        .write(HALF, &b)
        .map_err(|e| format!("write pattern B: {e}"))?;
    pong.notify().map_err(|e| format!("notify pong: {e}"))?;
    for round in 0..ROUNDS {
        ping.wait(Some(WAIT))
            .map_err(|e| format!("round {round}: wait for ping: {e}"))?;
        pong.notify()
            .map_err(|e| format!("round {round}: notify pong: {e}"))?;
    }
    drop((buffer, ping, pong));
    say("done", "");
    Ok(())
}
