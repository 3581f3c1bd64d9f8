//! The calls of a signal with generations, over a backend's two vendor calls: `post`
//! (claim, record, publish) and `wait` (wait for the publish, stream wait, mark waited),
//! with the caller's deadline, waits sliced so that a destroy of the signal on another
//! thread ends them, and devipc's errors.

use std::time::{Duration, Instant};

use devipc_core::{Error, Result, SignalGenerations};

use crate::word_file::WordFile;

use super::{GenerationError, Generations, MAX_GENERATION};
use crate::futex::WaitError;

/// How often a sliced wait looks whether its signal is being destroyed.
pub const RELEASE_POLL: Duration = Duration::from_millis(50);

/// The generation words of a signal's word file, as devipc's error when the page is too
/// small for them.
pub fn words(word: &WordFile) -> Result<Generations<'_>> {
    Generations::of(word).ok_or_else(|| {
        Error::invalid_argument("the signal's word file is too small for generations")
    })
}

/// Where the generations of `word`'s signal stand.
pub fn generations(word: &WordFile) -> Result<SignalGenerations> {
    let gens = words(word)?;
    Ok(SignalGenerations {
        posted: gens.posted(),
        waited: gens.waited(),
    })
}

/// Posts the next generation: claims it (waiting, up to `timeout`, for the consumer's
/// waits a ring back), calls `record(slot)` (the vendor record of the slot's event on the
/// caller's stream), and publishes it. `k` is the number of ring events the caller holds;
/// `signal` names the signal in errors; `released()` says a destroy of it began on another
/// thread. A post that timed out claimed nothing and may be retried. A failed record is
/// its error; its generation is given back or, when a later post was claimed meanwhile,
/// published as poisoned.
pub fn post(
    gens: &Generations<'_>,
    k: usize,
    signal: u64,
    timeout: Option<Duration>,
    released: impl Fn() -> bool,
    record: impl FnOnce(usize) -> Result<()>,
) -> Result<u64> {
    let started = Instant::now();
    let until = timeout.and_then(|t| started.checked_add(t));
    let what = || {
        format!(
            "posting signal {signal} (waiting for the generation a ring back to be posted \
             and waited for)"
        )
    };
    let claim = in_slices(until, &released, |end| gens.claim(k, end))
        .map_err(|e| sliced_error(e, signal, what(), started))?;
    let recorded = record(claim.slot);
    if recorded.is_err() && gens.give_back(claim) {
        return recorded.map(|()| 0);
    }
    gens.publish(claim, recorded.is_ok())
        .map_err(|e| generation_error(e, &what()))?;
    recorded.map(|()| claim.generation)
}

/// Waits for generation `generation`: until it is published (the calling thread, up to
/// `timeout`), then `stream_wait(slot)` (the vendor stream wait on the slot's event), then
/// marks it waited. Generation 0 is no wait; one past [`MAX_GENERATION`] is an error.
pub fn wait(
    gens: &Generations<'_>,
    k: usize,
    signal: u64,
    generation: u64,
    timeout: Option<Duration>,
    released: impl Fn() -> bool,
    stream_wait: impl FnOnce(usize, Option<Instant>) -> Result<()>,
) -> Result<()> {
    if generation == 0 {
        return Ok(());
    }
    if generation > MAX_GENERATION {
        return Err(Error::invalid_argument(format!(
            "generation {generation} is past the largest a signal posts ({MAX_GENERATION})"
        )));
    }
    let started = Instant::now();
    let until = timeout.and_then(|t| started.checked_add(t));
    let what = || format!("waiting for generation {generation} of signal {signal}");
    let slot = in_slices(until, &released, |end| {
        gens.wait_published(generation, k, end)
    })
    .map_err(|e| sliced_error(e, signal, what(), started))?;
    stream_wait(slot, until)?;
    gens.mark_waited(generation)
        .map_err(|e| generation_error(e, &what()))
}

/// How [`in_slices`] ended without a result.
enum Sliced {
    /// The caller's deadline passed.
    Expired,
    /// `released()` held: the signal is being destroyed on another thread.
    Released,
    /// A step failed otherwise.
    Failed(GenerationError),
}

/// Runs `step` with deadlines at most [`RELEASE_POLL`] apart until it returns something
/// other than a timeout, `until` passes or `released()` holds (checked before every
/// slice).
fn in_slices<T>(
    until: Option<Instant>,
    released: &impl Fn() -> bool,
    mut step: impl FnMut(Option<Instant>) -> Result<T, GenerationError>,
) -> Result<T, Sliced> {
    loop {
        if released() {
            return Err(Sliced::Released);
        }
        let now = Instant::now();
        let end = now
            .checked_add(RELEASE_POLL)
            .map(|e| until.map_or(e, |u| u.min(e)));
        match step(end) {
            Err(GenerationError::Wait(WaitError::Timeout(_))) => {
                if until.is_some_and(|u| Instant::now() >= u) {
                    return Err(Sliced::Expired);
                }
            }
            Err(other) => return Err(Sliced::Failed(other)),
            Ok(v) => return Ok(v),
        }
    }
}

fn sliced_error(e: Sliced, signal: u64, what: String, started: Instant) -> Error {
    match e {
        Sliced::Expired => Error::timed_out(what, started),
        Sliced::Released => Error::UnknownHandle {
            kind: "signal",
            id: signal,
        },
        Sliced::Failed(e) => generation_error(e, &what),
    }
}

fn generation_error(e: GenerationError, what: &str) -> Error {
    match e {
        GenerationError::Wait(WaitError::Timeout(after)) => Error::Timeout {
            what: what.to_owned(),
            after,
        },
        GenerationError::Wait(WaitError::Sys { op, source }) => {
            Error::io(format!("{what}: {op}"), source)
        }
        other => Error::invalid_argument(format!("{what}: {other}")),
    }
}
