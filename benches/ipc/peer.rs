//! The peers: child processes of this program (re-executed with `DEVIPC_BENCH_ROLE`, by
//! `devipc-child`), spoken to over their stdin/stdout: messages `@@ key value` from the
//! child, lines to it. The parent side is [`Peer`];
//! the child side is [`child_role`] and the roles it plays: the exporter of P1, P2, P4 and
//! P5, and the two pongers of P3.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use devipc::raw::Mechanism;
use devipc::{
    AllocateOptions, BackendChoice, DevicePtr, ExportOptions, MemToken, ProcessId, Runtime,
    SharedBuffer, SignalToken,
};
use devipc_child::{Child, Command, FOREVER, OtherMessages, hear, say};
use devipc_shm::futex::BinarySemaphore;
use devipc_shm::word_file::WordFile;

use crate::raw::{RawAlloc, RawApi, RawVmm, RawVmmAlloc};
use crate::{BenchResult, DEV, ROLE_ENV, WAIT};

/// A child role of this program, spoken to over its stdin/stdout (through
/// `devipc-child`; its stderr goes to this program's).
pub struct Peer(Child);

impl Peer {
    /// Starts this program in child `role` on the backend `choice`.
    pub fn spawn(role: &str, choice: BackendChoice) -> BenchResult<Peer> {
        let child = Command::new(role)?
            .arg(choice.to_string())
            .env(ROLE_ENV, role)
            .other_messages(OtherMessages::Refuse)
            .spawn()?;
        Ok(Peer(child))
    }

    /// The value of the next message, which must be `key`.
    pub fn expect(&mut self, key: &str) -> BenchResult<String> {
        Ok(self.0.expect(key, FOREVER)?)
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) -> BenchResult<()> {
        Ok(self.0.send(line)?)
    }

    /// Sends an export command; returns the exporter's seconds per export and the
    /// exported items.
    pub fn batch(&mut self, command: &str) -> BenchResult<(f64, Vec<String>)> {
        self.send(command)?;
        let ns: f64 = self.expect("ns")?.parse()?;
        let mut items = Vec::new();
        loop {
            match self.0.expect_one_of(&["item", "end"], FOREVER)? {
                (k, _) if k == "end" => break,
                (_, item) => items.push(item),
            }
        }
        Ok((ns / 1e9 / items.len().max(1) as f64, items))
    }

    /// Tells the child to quit and waits for its successful exit.
    pub fn finish(mut self) -> BenchResult<()> {
        self.send("quit")?;
        let status = self.0.wait(FOREVER)?;
        if !status.success() {
            return Err(format!("a bench child exited with {status}").into());
        }
        Ok(())
    }
}

/// The child side: plays `role` (from `DEVIPC_BENCH_ROLE`) on the backend named by the
/// first argument.
pub fn child_role(role: &str) -> BenchResult<()> {
    let choice: BackendChoice = std::env::args().nth(1).ok_or("no backend")?.parse()?;
    match role {
        "exporter" => exporter(choice),
        "ponger-devipc" => ponger_devipc(choice),
        "ponger-futex" => ponger_futex(),
        other => Err(format!("unknown role {other}").into()),
    }
}

/// The exporting peer: answers `devipc N SIZE FILL [vmm]` (`vmm`: memory of
/// `allocate_with(HipVmmFd)`), `raw N SIZE`, `raw-vmm N SIZE`, `external N SIZE` with the
/// timed exports, `free` by releasing everything, `quit` by exiting.
fn exporter(choice: BackendChoice) -> BenchResult<()> {
    let rt = Runtime::from_choice(choice)?;
    let raw = RawApi::of(&rt)?;
    say("pid", &rt.process_id().to_string());
    let peer = ProcessId(
        hear()
            .ok_or("no peer")?
            .strip_prefix("peer ")
            .ok_or("expected peer")?
            .parse()?,
    );
    let mut buffers: Vec<SharedBuffer> = Vec::new();
    let mut raw_allocs: Vec<RawAlloc> = Vec::new();
    let mut mallocs: Vec<u64> = Vec::new();
    // Raw HIP VMM memory and its exported fds (kept open: the importer fetches them).
    let mut raw_vmm: Option<RawVmm> = None;
    let mut vmm_allocs: Vec<(RawVmmAlloc, Option<std::os::fd::OwnedFd>)> = Vec::new();
    let vmm_opts = AllocateOptions::mechanism(Mechanism::HipVmmFd);
    while let Some(line) = hear() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> BenchResult<usize> {
            Ok(words.get(i).ok_or("missing argument")?.parse()?)
        };
        let items: Vec<String>;
        let t: Duration;
        match words.first().copied() {
            Some("devipc") => {
                let (n, size, fill) = (num(1)?, num(2)?, num(3)? != 0);
                let vmm = words.get(4) == Some(&"vmm");
                let first = buffers.len();
                for _ in 0..n {
                    let b = if vmm {
                        rt.allocate_with(DEV, size, vmm_opts)?
                    } else {
                        rt.allocate(DEV, size)?
                    };
                    if fill {
                        b.write(0, &pattern(b.len()))?;
                    }
                    buffers.push(b);
                }
                let start = Instant::now();
                let mut tokens = Vec::with_capacity(n);
                for b in &buffers[first..] {
                    let token = b.export(ExportOptions::granted_only())?;
                    b.grant(&token, &[peer])?;
                    tokens.push(token);
                }
                t = start.elapsed();
                items = tokens.iter().map(ToString::to_string).collect();
            }
            Some("raw") => {
                let (n, size) = (num(1)?, num(2)?);
                let first = raw_allocs.len();
                for _ in 0..n {
                    raw_allocs.push(raw.alloc(size)?);
                }
                let pid = peer.0 as i32;
                let start = Instant::now();
                let mut handles = Vec::with_capacity(n);
                for a in &raw_allocs[first..] {
                    handles.push(raw.export(a, pid)?);
                }
                t = start.elapsed();
                items = handles;
            }
            Some("raw-vmm") => {
                let (n, size) = (num(1)?, num(2)?);
                if raw_vmm.is_none() {
                    raw_vmm = Some(RawVmm::of(&raw)?);
                }
                let vmm = raw_vmm.as_ref().ok_or("no VMM calls")?;
                let first = vmm_allocs.len();
                for _ in 0..n {
                    vmm_allocs.push((vmm.alloc(size)?, None));
                }
                let start = Instant::now();
                for (a, fd) in &mut vmm_allocs[first..] {
                    *fd = Some(vmm.export(a)?);
                }
                t = start.elapsed();
                items = vmm_allocs[first..]
                    .iter()
                    .filter_map(|(a, fd)| fd.as_ref().map(|fd| RawVmm::describe(a, fd)))
                    .collect();
            }
            Some("external") => {
                let (n, size) = (num(1)?, num(2)?);
                let first = mallocs.len();
                for _ in 0..n {
                    mallocs.push(raw.malloc(size)?);
                }
                let start = Instant::now();
                let mut tokens = Vec::with_capacity(n);
                for &p in &mallocs[first..] {
                    let token =
                        rt.export_external(DEV, DevicePtr(p), size, ExportOptions::granted_only())?;
                    rt.grant(&token, &[peer])?;
                    tokens.push(token);
                }
                t = start.elapsed();
                items = tokens.iter().map(ToString::to_string).collect();
            }
            Some("free") => {
                buffers.clear();
                for a in raw_allocs.drain(..) {
                    raw.free(a)?;
                }
                free_vmm(raw_vmm.as_ref(), &mut vmm_allocs)?;
                say("ok", "");
                continue;
            }
            Some("quit") => break,
            _ => return Err(format!("unknown command `{line}`").into()),
        }
        say("ns", &t.as_nanos().to_string());
        for item in items {
            say("item", &item);
        }
        say("end", "");
    }
    drop(buffers);
    for a in raw_allocs {
        raw.free(a)?;
    }
    free_vmm(raw_vmm.as_ref(), &mut vmm_allocs)?;
    // Framework memory exported by key: the runtime closes the keys when it goes away,
    // then the blocks can be freed.
    drop(rt);
    for p in mallocs {
        let _ = raw.free_malloc(p);
    }
    Ok(())
}

/// Closes the exported fds of raw VMM memory, then frees the memory.
fn free_vmm(
    vmm: Option<&RawVmm>,
    allocs: &mut Vec<(RawVmmAlloc, Option<std::os::fd::OwnedFd>)>,
) -> BenchResult<()> {
    for (a, fd) in allocs.drain(..) {
        drop(fd);
        vmm.ok_or("raw VMM memory without the VMM calls")?.free(a)?;
    }
    Ok(())
}

/// Waits for `ping`, raises `pong`, `rounds` times (devipc signals).
fn ponger_devipc(choice: BackendChoice) -> BenchResult<()> {
    let rt = Runtime::from_choice(choice)?;
    say("pid", &rt.process_id().to_string());
    let next = || -> BenchResult<String> { Ok(hear().ok_or("closed")?) };
    let ping: SignalToken = next()?.parse()?;
    let pong: SignalToken = next()?.parse()?;
    let rounds: usize = next()?.parse()?;
    let ping = rt.import_signal(&ping, DEV)?;
    let pong = rt.import_signal(&pong, DEV)?;
    say("ready", "");
    for _ in 0..rounds {
        ping.wait(WAIT)?;
        pong.notify()?;
    }
    next()?; // quit
    Ok(())
}

/// Waits for `ping`, raises `pong`, `rounds` times (raw futex semaphores).
fn ponger_futex() -> BenchResult<()> {
    say("pid", &std::process::id().to_string());
    let next = || -> BenchResult<String> { Ok(hear().ok_or("closed")?) };
    let dir = PathBuf::from(next()?);
    let name = next()?;
    let rounds: usize = next()?.parse()?;
    let words = WordFile::open(&dir, name.as_bytes())?;
    let ping = BinarySemaphore::new(words.word(0).ok_or("word 0")?);
    let pong = BinarySemaphore::new(words.word(1).ok_or("word 1")?);
    say("ready", "");
    for _ in 0..rounds {
        ping.wait_and_reset(WAIT)?;
        pong.record()?;
    }
    next()?; // quit
    Ok(())
}

/// The bytes the exporter writes into a filled buffer (and P4 checks).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The exporter's items as tokens.
pub fn parse_tokens(items: &[String]) -> BenchResult<Vec<MemToken>> {
    items
        .iter()
        .map(|t| t.parse().map_err(Into::into))
        .collect()
}
