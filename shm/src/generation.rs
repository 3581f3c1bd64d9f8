//! [`Generations`]: the host half of a signal with generations, in its word file.
//!
//! A stream-ordered signal is a ring of K interprocess events (HIP IPC events, Ascend
//! `ACL_EVENT_IPC` events) plus these words. `post(stream)` takes the next generation `g`,
//! records event `g % K` on the stream and publishes `g`; `wait(stream, g)` waits on the host
//! only until `g` is *published* (its record is queued, which is at once in a pipeline that
//! runs ahead), then makes the stream wait for event `g % K` on the device. A vendor stream
//! wait takes the record that is the latest when it is called, so the two rules that make
//! the ring exact are:
//!
//! - **publish after record**: a waiter never issues its stream wait before the record of
//!   its generation was queued (else it would wait for an older record);
//! - **back-pressure**: generation `g` reuses slot `g % K` only once generation `g - K` was
//!   published there and a wait for it (or a later one) was issued, so a later post never
//!   replaces the record an earlier wait needs (else the waiter would wait for a *later*
//!   generation: safe, but a producer that waits for its consumer's ack before posting
//!   again would deadlock), and never records on a slot whose previous claimant has not
//!   recorded yet.
//!
//! So a later post never satisfies an earlier wait's successor, and a wait for `g` takes
//! exactly `g`'s record unless a wait for `g` or later was already issued (then it may take a
//! later one: an over-wait, never an under-wait).
//!
//! Several posters (threads, processes) claim generations with a compare-and-swap and
//! publish each in its own slot, in any order: no poster ever waits for another, so one
//! that stalls or dies between its claim and its publish delays only the waits for its own
//! generation and, a ring later, the claim that would reuse its slot (both end at their
//! timeouts). A waiter looks at its generation's slot, not at a global counter; `posted`
//! (what [`Generations::posted`] reports) moves over every generation published without a
//! gap. A post whose record failed gives its claim back when nobody claimed after it, else
//! publishes its generation with [`POISON_BIT`] set: a wait for it reports that instead of
//! ordering nothing silently.
//!
//! Values read back are checked where honest writers keep an invariant (claims at most a
//! ring ahead of the waits, no wait for a generation never claimed, the ring length the
//! events were opened with, a slot holding a generation of its own residue) and reported as
//! [`GenerationError::Corrupt`], never a panic or a wait without end.
//!
//! # Layout (byte offsets in the word file's page)
//!
//! | offset | what |
//! | --- | --- |
//! | 0..8 | not used here (the HIP binary semaphore is word 0) |
//! | 8 | `claimed`: u64, the latest generation a poster claimed |
//! | 16 | `posted`: u64, the latest generation published |
//! | 24 | `waited`: u64, the latest generation a wait was issued for |
//! | 32 | `posted_seq`: u32 futex word, bumped at each publish |
//! | 36 | `waited_seq`: u32 futex word, bumped when `waited` grows |
//! | 40 | ring state: 0 none yet, 1 ready, 2 unsupported |
//! | 44 | ring length K (1..=[`MAX_RING`]) |
//! | 48 + 8 s | the latest generation published in slot `s` (u64; [`POISON_BIT`] set for a failed post) |
//! | 176, 180 | how many threads (of every process) sleep on `posted_seq`, `waited_seq` |
//! | 256 + 64 s | slot `s`'s interprocess event handle ([`HANDLE_LEN`] bytes) |
//! | 1280 | the owner's length (u32), then the owner ([`MAX_OWNER`] bytes at most): what the signal's token names besides the word file (HIP: its event's handle; Ascend: its notify's key), so that a token naming one signal's object and another's words is refused |
//!
//! A publish or a waited mark wakes only when a thread sleeps on its sequence word (the
//! count is raised before the sleep and a fence pairs it with the waker's, so no wake is
//! lost; a sleeper killed leaves it high, which only costs wakes).
//!
//! Everything here is a host word: a process that can open the word file (devipc's private
//! runtime directory, mode 0700) can make the signal's waits wrong, but not reach memory.
//! Values read back are validated (a ring length out of range, a slot older than its
//! generation) and reported as [`GenerationError::Corrupt`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::Instant;

use crate::futex::WaitError;
use crate::os;
use crate::word_file::WordFile;

mod drive;

pub use drive::{RELEASE_POLL, generations, post, wait, words};

/// The bytes of one interprocess event handle (HIP and ACL: 64).
pub const HANDLE_LEN: usize = 64;

/// The most events a ring may have.
pub const MAX_RING: usize = 16;

/// The bit a slot's generation carries when its post failed (its record was never queued).
pub const POISON_BIT: u64 = 1 << 63;

/// The largest generation (below [`POISON_BIT`]).
pub const MAX_GENERATION: u64 = POISON_BIT - 1;

const CLAIMED: usize = 8;
const POSTED: usize = 16;
const WAITED: usize = 24;
const POSTED_SEQ: usize = 32;
const WAITED_SEQ: usize = 36;
const RING_STATE: usize = 40;
const RING_LEN: usize = 44;
const SLOTS: usize = 48;
const POSTED_WAITERS: usize = 176;
const WAITED_WAITERS: usize = 180;
const HANDLES: usize = 256;
const OWNER_LEN: usize = HANDLES + HANDLE_LEN * MAX_RING;
const OWNER: usize = OWNER_LEN + 4;

/// The most bytes [`Generations::set_owner`] keeps.
pub const MAX_OWNER: usize = 80;

const STATE_READY: u32 = 1;
const STATE_UNSUPPORTED: u32 = 2;

/// Why a generation call failed.
#[derive(Debug)]
pub enum GenerationError {
    /// A futex wait timed out or failed.
    Wait(WaitError),
    /// The words hold values no devipc process writes.
    Corrupt(&'static str),
    /// The post of this generation failed in the posting process: its record was never
    /// queued, so it orders nothing.
    Poisoned(u64),
}

impl std::fmt::Display for GenerationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GenerationError::Wait(e) => e.fmt(f),
            GenerationError::Corrupt(what) => {
                write!(f, "the signal's generation words are corrupt: {what}")
            }
            GenerationError::Poisoned(g) => write!(
                f,
                "the post of generation {g} failed in the posting process, so it orders nothing"
            ),
        }
    }
}

impl std::error::Error for GenerationError {}

impl From<WaitError> for GenerationError {
    fn from(e: WaitError) -> Self {
        GenerationError::Wait(e)
    }
}

/// What the ring holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ring {
    /// Not published yet.
    Absent,
    /// The creator could not make interprocess events (the vendor runtime has none).
    Unsupported,
    /// The slots' event handles, in slot order.
    Ready(Vec<[u8; HANDLE_LEN]>),
}

/// A generation claimed by [`Generations::claim`], to publish or give back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a claim is published or given back, else later posts wait for it"]
pub struct Claim {
    /// The generation.
    pub generation: u64,
    /// Its slot in the ring.
    pub slot: usize,
}

/// The generation words of one word file.
#[derive(Debug, Clone, Copy)]
pub struct Generations<'a> {
    file: &'a WordFile,
}

fn word64(file: &WordFile, offset: usize) -> &AtomicU64 {
    file.word64(offset)
        .expect("the layout fits a page (checked in Generations::of)")
}

fn word32(file: &WordFile, offset: usize) -> &AtomicU32 {
    file.word(offset / 4)
        .expect("the layout fits a page (checked in Generations::of)")
}

impl<'a> Generations<'a> {
    /// The generation words of `file`; `None` when the page is too small for the layout
    /// (never on Linux's 4 KiB and larger pages).
    pub fn of(file: &'a WordFile) -> Option<Generations<'a>> {
        // The owner's last word ends the layout.
        file.word((OWNER + MAX_OWNER) / 4 - 1)
            .map(|_| Generations { file })
    }

    /// Publishes the ring's event handles (the creator, once, before exporting).
    /// `false` when `handles` is empty or longer than [`MAX_RING`].
    pub fn publish_ring(&self, handles: &[[u8; HANDLE_LEN]]) -> bool {
        if handles.is_empty() || handles.len() > MAX_RING {
            return false;
        }
        for (s, h) in handles.iter().enumerate() {
            if !self.file.write_bytes(HANDLES + HANDLE_LEN * s, h) {
                return false;
            }
        }
        word32(self.file, RING_LEN).store(handles.len() as u32, Ordering::Release);
        word32(self.file, RING_STATE).store(STATE_READY, Ordering::Release);
        true
    }

    /// Writes the signal's owner: the vendor name its tokens carry besides this file's
    /// name. `false` when it is empty or longer than [`MAX_OWNER`].
    pub fn set_owner(&self, owner: &[u8]) -> bool {
        if owner.is_empty() || owner.len() > MAX_OWNER || !self.file.write_bytes(OWNER, owner) {
            return false;
        }
        word32(self.file, OWNER_LEN).store(owner.len() as u32, Ordering::Release);
        true
    }

    /// Whether `owner` is the owner written (`false` when none was).
    pub fn owned_by(&self, owner: &[u8]) -> bool {
        let len = word32(self.file, OWNER_LEN).load(Ordering::Acquire) as usize;
        if len != owner.len() || len == 0 || len > MAX_OWNER {
            return false;
        }
        let mut have = vec![0u8; len];
        self.file.read_bytes(OWNER, &mut have) && have == owner
    }

    /// Records that the creator could make no ring.
    pub fn mark_unsupported(&self) {
        word32(self.file, RING_STATE).store(STATE_UNSUPPORTED, Ordering::Release);
    }

    /// The ring as published.
    pub fn ring(&self) -> Result<Ring, GenerationError> {
        match word32(self.file, RING_STATE).load(Ordering::Acquire) {
            0 => Ok(Ring::Absent),
            STATE_UNSUPPORTED => Ok(Ring::Unsupported),
            STATE_READY => {
                let len = self.ring_len()?;
                let mut handles = vec![[0u8; HANDLE_LEN]; len];
                for (s, h) in handles.iter_mut().enumerate() {
                    if !self.file.read_bytes(HANDLES + HANDLE_LEN * s, h) {
                        return Err(GenerationError::Corrupt("a ring handle is out of the page"));
                    }
                }
                Ok(Ring::Ready(handles))
            }
            _ => Err(GenerationError::Corrupt("unknown ring state")),
        }
    }

    fn ring_len(&self) -> Result<usize, GenerationError> {
        let len = word32(self.file, RING_LEN).load(Ordering::Acquire) as usize;
        if (1..=MAX_RING).contains(&len) {
            Ok(len)
        } else {
            Err(GenerationError::Corrupt("the ring length is out of range"))
        }
    }

    /// The latest generation published with every one before it.
    pub fn posted(&self) -> u64 {
        word64(self.file, POSTED).load(Ordering::Acquire)
    }

    /// The latest generation a wait was issued for.
    pub fn waited(&self) -> u64 {
        word64(self.file, WAITED).load(Ordering::Acquire)
    }

    /// The ring length, checked against the `k` events the caller opened (a length that
    /// changed since is [`GenerationError::Corrupt`], never an index out of range).
    fn checked_len(&self, k: usize) -> Result<u64, GenerationError> {
        if self.ring_len()? != k {
            return Err(GenerationError::Corrupt(
                "the ring length changed after its events were opened",
            ));
        }
        Ok(k as u64)
    }

    /// The generation slot `slot` holds and whether its post failed.
    fn slot(&self, slot: usize) -> (u64, bool) {
        let v = word64(self.file, SLOTS + 8 * slot).load(Ordering::Acquire);
        (v & !POISON_BIT, v & POISON_BIT != 0)
    }

    /// Claims the next generation once its slot is free: the generation a ring's length
    /// (`k`, the caller's events) before it was published and a wait for it (or a later
    /// one) was issued. Waits until `until` at most (`None`: no limit); a claim that timed
    /// out claimed nothing.
    pub fn claim(&self, k: usize, until: Option<Instant>) -> Result<Claim, GenerationError> {
        let k = self.checked_len(k)?;
        let (claimed, waited) = (word64(self.file, CLAIMED), word64(self.file, WAITED));
        let waited_seq = word32(self.file, WAITED_SEQ);
        let posted_seq = word32(self.file, POSTED_SEQ);
        loop {
            let (seq, pseq) = (
                waited_seq.load(Ordering::Acquire),
                posted_seq.load(Ordering::Acquire),
            );
            // In this order, honest words keep `c <= w + k` and `w <= c2`.
            let c = claimed.load(Ordering::Acquire);
            let w = waited.load(Ordering::Acquire);
            let c2 = claimed.load(Ordering::Acquire);
            if w > c2 {
                return Err(GenerationError::Corrupt(
                    "a wait was issued for a generation never claimed",
                ));
            }
            if c > w.saturating_add(k) {
                return Err(GenerationError::Corrupt(
                    "the claims run more than the ring ahead of the waits",
                ));
            }
            let g = c + 1;
            if g > MAX_GENERATION {
                return Err(GenerationError::Corrupt(
                    "the generation counter is exhausted",
                ));
            }
            let slot = (g % k) as usize;
            if g > k {
                if w < g - k {
                    wait_changed(waited_seq, word32(self.file, WAITED_WAITERS), seq, until)?;
                    continue;
                }
                if self.slot(slot).0 < g - k {
                    // Claimed a ring back but not published yet: its poster records on this
                    // slot's event still (stalled or dead: the claim times out).
                    wait_changed(posted_seq, word32(self.file, POSTED_WAITERS), pseq, until)?;
                    continue;
                }
            }
            if claimed
                .compare_exchange(c, g, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(Claim {
                    generation: g,
                    slot,
                });
            }
        }
    }

    /// Gives back a claim whose record failed, when no later claim was made; `false`
    /// when one was (then [`Generations::publish`] it poisoned).
    pub fn give_back(&self, claim: Claim) -> bool {
        word64(self.file, CLAIMED)
            .compare_exchange(
                claim.generation,
                claim.generation - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Publishes a claimed generation after its record was queued (`recorded`), or as
    /// poisoned (its record failed and it could not be given back). Never waits: posters
    /// publish in any order, each in its own slot, and `posted` moves over every
    /// generation published without a gap.
    pub fn publish(&self, claim: Claim, recorded: bool) -> Result<(), GenerationError> {
        let value = if recorded {
            claim.generation
        } else {
            claim.generation | POISON_BIT
        };
        word64(self.file, SLOTS + 8 * claim.slot).store(value, Ordering::Release);
        self.advance_posted()?;
        let posted_seq = word32(self.file, POSTED_SEQ);
        posted_seq.fetch_add(1, Ordering::AcqRel);
        wake_sleepers(posted_seq, word32(self.file, POSTED_WAITERS))?;
        Ok(())
    }

    /// Moves `posted` over the generations published since.
    fn advance_posted(&self) -> Result<(), GenerationError> {
        let k = self.ring_len()? as u64;
        let posted = word64(self.file, POSTED);
        loop {
            let p = posted.load(Ordering::Acquire);
            let next = p + 1;
            if self.slot((next % k) as usize).0 < next {
                return Ok(());
            }
            let _ = posted.compare_exchange(p, next, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Waits until generation `g` (1 to [`MAX_GENERATION`]) is published, until `until`
    /// at most, and returns the ring slot (of `k`, the caller's events) that holds its
    /// record, or a later one's (see the module docs).
    pub fn wait_published(
        &self,
        g: u64,
        k: usize,
        until: Option<Instant>,
    ) -> Result<usize, GenerationError> {
        let k = self.checked_len(k)?;
        let slot = (g % k) as usize;
        let posted_seq = word32(self.file, POSTED_SEQ);
        loop {
            let seq = posted_seq.load(Ordering::Acquire);
            let (h, poisoned) = self.slot(slot);
            // 0: never published in.
            if h != 0 && h % k != g % k {
                return Err(GenerationError::Corrupt(
                    "a slot holds a generation of another slot",
                ));
            }
            if h >= g {
                return if h == g && poisoned {
                    Err(GenerationError::Poisoned(g))
                } else {
                    Ok(slot)
                };
            }
            wait_changed(posted_seq, word32(self.file, POSTED_WAITERS), seq, until)?;
        }
    }

    /// Records that a wait for `g` was issued (the slot of `g` may be reused), waking
    /// posters held back by it.
    pub fn mark_waited(&self, g: u64) -> Result<(), GenerationError> {
        if word64(self.file, WAITED).fetch_max(g, Ordering::AcqRel) < g {
            let seq = word32(self.file, WAITED_SEQ);
            seq.fetch_add(1, Ordering::AcqRel);
            wake_sleepers(seq, word32(self.file, WAITED_WAITERS))?;
        }
        Ok(())
    }
}

/// Wakes the threads sleeping on `seq` after it moved, if `sleepers` counts any.
fn wake_sleepers(seq: &AtomicU32, sleepers: &AtomicU32) -> Result<(), WaitError> {
    // Pairs with the fence in `wait_changed`: a sleeper counted after this load sees the
    // moved sequence before it sleeps.
    fence(Ordering::SeqCst);
    if sleepers.load(Ordering::Relaxed) != 0 {
        crate::futex::wake_all(seq)?;
    }
    Ok(())
}

/// Sleeps until `word` moves from `seen` (or a spurious wake), or `until` passed, counted
/// in `sleepers` meanwhile.
fn wait_changed(
    word: &AtomicU32,
    sleepers: &AtomicU32,
    seen: u32,
    until: Option<Instant>,
) -> Result<(), WaitError> {
    let left = match until {
        None => None,
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return Err(WaitError::Timeout(std::time::Duration::ZERO));
            }
            Some(d - now)
        }
    };
    sleepers.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let slept = if word.load(Ordering::Acquire) != seen {
        Ok(())
    } else {
        os::futex_wait(word, seen, left).map(|_| ())
    };
    sleepers.fetch_sub(1, Ordering::Relaxed);
    slept.map_err(|source| WaitError::Sys {
        op: "futex wait",
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A fresh word file (unlinked at once: its mapping stays valid).
    fn file() -> WordFile {
        let p = std::env::temp_dir().join(format!("devipc-generation-{}", std::process::id()));
        let dir = crate::private_dir::open_private_dir(&p).unwrap();
        let f = WordFile::create(&dir).unwrap();
        f.unlink().unwrap();
        f
    }

    fn soon() -> Option<Instant> {
        Some(Instant::now() + Duration::from_millis(30))
    }

    #[test]
    fn the_ring_round_trips_and_is_validated() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        assert_eq!(g.ring().unwrap(), Ring::Absent);
        assert!(!g.publish_ring(&[]));
        assert!(!g.publish_ring(&[[1; HANDLE_LEN]; MAX_RING + 1]));
        let handles = vec![[7u8; HANDLE_LEN], [9u8; HANDLE_LEN]];
        assert!(g.publish_ring(&handles));
        assert_eq!(g.ring().unwrap(), Ring::Ready(handles));
        word32(&f, RING_LEN).store(99, Ordering::Release);
        assert!(matches!(g.ring(), Err(GenerationError::Corrupt(_))));
    }

    fn timed_out<T: std::fmt::Debug>(r: Result<T, GenerationError>) -> bool {
        matches!(r, Err(GenerationError::Wait(WaitError::Timeout(_))))
    }

    #[test]
    fn the_owner_is_written_once_and_compared() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        assert!(!g.owned_by(b"key"), "no owner yet");
        assert!(!g.set_owner(&[]));
        assert!(!g.set_owner(&[1; MAX_OWNER + 1]));
        assert!(g.set_owner(&[7; 65]));
        assert!(g.owned_by(&[7; 65]));
        assert!(!g.owned_by(&[7; 64]));
        assert!(!g.owned_by(&[8; 65]));
    }

    #[test]
    fn a_post_waits_for_the_wait_k_generations_back() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        g.publish_ring(&[[0; HANDLE_LEN]; 2]);
        for want in 1..=2 {
            let c = g.claim(2, soon()).unwrap();
            assert_eq!((c.generation, c.slot), (want, (want % 2) as usize));
            g.publish(c, true).unwrap();
        }
        // Slot of 3 is 1's: no wait for 1 was issued yet.
        assert!(timed_out(g.claim(2, soon())));
        assert_eq!(g.wait_published(1, 2, soon()).unwrap(), 1);
        g.mark_waited(1).unwrap();
        let c = g.claim(2, soon()).unwrap();
        assert_eq!(c.generation, 3);
        // 3 is not published yet: a wait for it times out; 2's slot still holds 2.
        assert!(timed_out(g.wait_published(3, 2, soon())));
        assert_eq!(g.wait_published(2, 2, soon()).unwrap(), 0);
        g.publish(c, true).unwrap();
        assert_eq!(g.wait_published(3, 2, soon()).unwrap(), 1);
        assert_eq!(g.posted(), 3);
        assert_eq!(g.waited(), 1);
    }

    #[test]
    fn a_stalled_poster_delays_only_its_own_generation_and_its_slot() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        g.publish_ring(&[[0; HANDLE_LEN]; 4]);
        let stalled = g.claim(4, soon()).unwrap();
        let c2 = g.claim(4, soon()).unwrap();
        g.publish(c2, true).unwrap();
        assert_eq!(g.posted(), 0, "1 is not published: posted stays before it");
        assert_eq!(g.wait_published(2, 4, soon()).unwrap(), 2, "2 is waitable");
        assert!(timed_out(g.wait_published(1, 4, soon())));
        g.mark_waited(2).unwrap();
        for want in 3..=4 {
            let c = g.claim(4, soon()).unwrap();
            assert_eq!(c.generation, want);
            g.publish(c, true).unwrap();
        }
        // 5 reuses 1's slot, whose claimant has not recorded yet.
        assert!(timed_out(g.claim(4, soon())));
        g.publish(stalled, true).unwrap();
        assert_eq!(g.posted(), 4, "posted moves over 1 to 4 at once");
        assert_eq!(g.claim(4, soon()).unwrap().generation, 5);
    }

    #[test]
    fn a_failed_post_is_given_back_or_poisoned() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        g.publish_ring(&[[0; HANDLE_LEN]; 4]);
        let c = g.claim(4, soon()).unwrap();
        assert!(g.give_back(c));
        let c1 = g.claim(4, soon()).unwrap();
        assert_eq!(
            c1.generation, 1,
            "the given-back generation is claimed again"
        );
        let c2 = g.claim(4, soon()).unwrap();
        assert!(!g.give_back(c1), "a later claim exists");
        g.publish(c1, false).unwrap();
        g.publish(c2, true).unwrap();
        assert!(matches!(
            g.wait_published(1, 4, soon()),
            Err(GenerationError::Poisoned(1))
        ));
        assert_eq!(g.wait_published(2, 4, soon()).unwrap(), 2);
    }

    #[test]
    fn words_no_honest_writer_leaves_are_corrupt_not_a_hang() {
        let f = file();
        let g = Generations::of(&f).unwrap();
        g.publish_ring(&[[0; HANDLE_LEN]; 4]);
        let c = g.claim(4, soon()).unwrap();
        g.publish(c, true).unwrap();
        assert!(
            matches!(g.claim(3, None), Err(GenerationError::Corrupt(_))),
            "ring length"
        );
        assert!(matches!(
            g.wait_published(1, 5, None),
            Err(GenerationError::Corrupt(_))
        ));
        word64(&f, CLAIMED).store(1000, Ordering::Release);
        assert!(
            matches!(g.claim(4, None), Err(GenerationError::Corrupt(_))),
            "claims ahead"
        );
        word64(&f, CLAIMED).store(1, Ordering::Release);
        word64(&f, WAITED).store(100, Ordering::Release);
        assert!(
            matches!(g.claim(4, None), Err(GenerationError::Corrupt(_))),
            "waits ahead"
        );
        word64(&f, WAITED).store(0, Ordering::Release);
        word64(&f, SLOTS + 8).store(2, Ordering::Release);
        assert!(
            matches!(
                g.wait_published(1, 4, None),
                Err(GenerationError::Corrupt(_))
            ),
            "a slot holding another slot's generation"
        );
    }

    #[test]
    fn posts_publish_in_generation_order_across_threads() {
        let f = file();
        let f = Arc::new(f);
        Generations::of(&f)
            .unwrap()
            .publish_ring(&[[0; HANDLE_LEN]; MAX_RING]);
        let posters: Vec<_> = (0..4)
            .map(|_| {
                let f = Arc::clone(&f);
                std::thread::spawn(move || {
                    let g = Generations::of(&f).unwrap();
                    for _ in 0..200 {
                        let c = g.claim(MAX_RING, None).unwrap();
                        std::thread::yield_now();
                        g.publish(c, true).unwrap();
                    }
                })
            })
            .collect();
        let g = Generations::of(&f).unwrap();
        for want in 1..=800u64 {
            g.wait_published(
                want,
                MAX_RING,
                Some(Instant::now() + Duration::from_secs(20)),
            )
            .unwrap();
            g.mark_waited(want).unwrap();
        }
        for p in posters {
            p.join().unwrap();
        }
        assert_eq!((g.posted(), g.waited()), (800, 800));
    }
}
