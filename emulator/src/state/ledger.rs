//! The `ledger`: the state directory's one fixed bookkeeping file.
//!
//! It holds the id salt, the id counter and the bytes in use per device, and its `flock`
//! is the *ledger lock*: the directory-wide critical section for creating and freeing
//! objects, so that a charge, the files of the object it pays for, and the metadata
//! recording it appear and disappear together (see the crate docs for the lock order).
//!
//! Binary layout (little endian, [`LEDGER_LEN`] bytes), written whole when created and
//! from offset 16 on (the counter and usage) by one `pwrite` under the lock afterwards:
//!
//! ```text
//! 0    8   magic "DVEMLDG1"
//! 8    4   salt (24 bits, non-zero)
//! 12   4   revocation epoch: odd while a revocation is under way, bumped by atomics on
//!          a mapping of this word only (never by the writes below), read lock-free by
//!          every copy that checks its pages are live (super::segment)
//! 16   8   last counter handed out (ids use counter + 1 onwards)
//! 24   8*MAX_DEVICES  bytes in use, per device
//! ```

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::dir::EmuDir;
use super::ids::{MAX_COUNTER, ObjectId, SALT_MASK};
use super::layout::LEDGER;
use super::lock::{FileLock, LockMode, OpenMode};
use crate::config::MAX_DEVICES;
use crate::error::EmuError;

const MAGIC: &[u8; 8] = b"DVEMLDG1";
/// Size of the ledger file in bytes.
pub const LEDGER_LEN: usize = 24 + 8 * MAX_DEVICES as usize;
/// Where the revocation epoch lives in the ledger (a 4-byte aligned little-endian `u32`).
pub const EPOCH_OFFSET: usize = 12;
/// Where the id counter (and the part [`LedgerGuard::commit`] writes) starts.
const COUNTER_OFFSET: usize = 16;

/// The ledger's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerData {
    /// The directory's id salt.
    pub salt: u32,
    /// The last id counter handed out.
    pub counter: u64,
    /// Bytes in use per device, across all processes.
    pub used: [u64; MAX_DEVICES as usize],
}

impl LedgerData {
    /// Serialises to the binary layout.
    pub fn encode(&self) -> [u8; LEDGER_LEN] {
        let mut b = [0u8; LEDGER_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.salt.to_le_bytes());
        b[16..24].copy_from_slice(&self.counter.to_le_bytes());
        for (i, u) in self.used.iter().enumerate() {
            b[24 + 8 * i..32 + 8 * i].copy_from_slice(&u.to_le_bytes());
        }
        b
    }

    /// Parses the binary layout; total.
    pub fn decode(b: &[u8]) -> Result<LedgerData, String> {
        if b.len() != LEDGER_LEN {
            return Err(format!("length {} instead of {LEDGER_LEN}", b.len()));
        }
        if &b[..8] != MAGIC {
            return Err("bad magic".into());
        }
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let salt = u32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        if salt == 0 || salt > SALT_MASK {
            return Err(format!("bad salt {salt:#x}"));
        }
        let counter = word(16);
        if counter > MAX_COUNTER {
            return Err(format!("counter {counter} out of range"));
        }
        let mut used = [0u64; MAX_DEVICES as usize];
        for (i, u) in used.iter_mut().enumerate() {
            *u = word(24 + 8 * i);
        }
        Ok(LedgerData {
            salt,
            counter,
            used,
        })
    }
}

/// Handle to a state directory's ledger.
#[derive(Debug, Clone)]
pub struct Ledger {
    path: PathBuf,
    salt: u32,
}

impl Ledger {
    /// Opens the ledger of `dir`, creating and initialising it (with a random salt) if it
    /// does not exist yet. Safe against concurrent first use by several processes.
    pub fn open(dir: &EmuDir) -> Result<Ledger, EmuError> {
        let path = dir.join(LEDGER);
        let lock = FileLock::open(&path, OpenMode::Create, LockMode::Exclusive)?;
        let len = lock
            .file()
            .metadata()
            .map_err(|e| EmuError::io("fstat", &path, e))?
            .len();
        let salt = if len == 0 {
            let data = LedgerData {
                salt: random_salt()?,
                counter: 0,
                used: [0; MAX_DEVICES as usize],
            };
            write(lock.file(), &path, &data)?;
            data.salt
        } else {
            read(lock.file(), &path)?.salt
        };
        Ok(Ledger { path, salt })
    }

    /// The directory's id salt (fixed for its lifetime).
    pub fn salt(&self) -> u32 {
        self.salt
    }

    /// Takes the ledger lock and reads the contents.
    pub fn lock(&self) -> Result<LedgerGuard, EmuError> {
        let lock = FileLock::open(&self.path, OpenMode::Existing, LockMode::Exclusive)?;
        let data = read(lock.file(), &self.path)?;
        if data.salt != self.salt {
            return Err(EmuError::Corrupt {
                path: self.path.clone(),
                reason: "the salt changed: the ledger was replaced".into(),
            });
        }
        Ok(LedgerGuard {
            lock,
            data,
            dirty: false,
        })
    }

    /// Reads the contents under a shared lock (a consistent snapshot).
    pub fn snapshot(&self) -> Result<LedgerData, EmuError> {
        let lock = FileLock::open(&self.path, OpenMode::Existing, LockMode::Shared)?;
        read(lock.file(), &self.path)
    }
}

/// The held ledger lock with the contents read under it. Changes are written by
/// [`LedgerGuard::commit`]; dropping without commit discards them.
#[derive(Debug)]
pub struct LedgerGuard {
    lock: FileLock,
    data: LedgerData,
    dirty: bool,
}

impl LedgerGuard {
    /// The contents as read (plus uncommitted changes).
    pub fn data(&self) -> &LedgerData {
        &self.data
    }

    /// Mints the next object id.
    pub fn mint_id(&mut self) -> Result<ObjectId, EmuError> {
        let next = self.data.counter + 1;
        let id = ObjectId::new(self.data.salt, next).ok_or(EmuError::LimitExceeded {
            what: "object ids in one state directory",
            limit: MAX_COUNTER as usize,
        })?;
        self.data.counter = next;
        self.dirty = true;
        Ok(id)
    }

    /// Charges `bytes` to `device` unless that would exceed `limit`.
    pub fn charge(&mut self, device: u32, bytes: u64, limit: u64) -> Result<(), EmuError> {
        let slot = self.slot(device)?;
        let used = self.data.used[slot];
        match used.checked_add(bytes) {
            Some(total) if total <= limit => {
                self.data.used[slot] = total;
                self.dirty = true;
                Ok(())
            }
            _ => Err(EmuError::OutOfMemory {
                device,
                requested: bytes,
                used,
                limit,
            }),
        }
    }

    /// Returns `bytes` to `device` (saturating at 0; gc repairs any drift).
    pub fn release(&mut self, device: u32, bytes: u64) -> Result<(), EmuError> {
        let slot = self.slot(device)?;
        self.data.used[slot] = self.data.used[slot].saturating_sub(bytes);
        self.dirty = true;
        Ok(())
    }

    /// Replaces the per-device usage (gc's recomputation).
    pub fn set_used(&mut self, used: [u64; MAX_DEVICES as usize]) {
        if self.data.used != used {
            self.data.used = used;
            self.dirty = true;
        }
    }

    /// Writes the changes, keeping the lock held.
    pub fn commit(&mut self) -> Result<(), EmuError> {
        if self.dirty {
            // From the counter on: the magic and salt never change, and the epoch word
            // belongs to the atomics (a write of a stale copy would undo a bump).
            let bytes = self.data.encode();
            self.lock
                .file()
                .write_all_at(&bytes[COUNTER_OFFSET..], COUNTER_OFFSET as u64)
                .map_err(|e| EmuError::io("write", self.lock.path(), e))?;
            self.dirty = false;
        }
        Ok(())
    }

    fn slot(&self, device: u32) -> Result<usize, EmuError> {
        if device >= MAX_DEVICES {
            return Err(EmuError::InvalidDevice {
                device,
                count: MAX_DEVICES,
            });
        }
        Ok(device as usize)
    }
}

fn read(file: &File, path: &std::path::Path) -> Result<LedgerData, EmuError> {
    let mut buf = vec![0u8; LEDGER_LEN + 1];
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(EmuError::io("read", path, e)),
        }
    }
    LedgerData::decode(&buf[..got]).map_err(|reason| EmuError::Corrupt {
        path: path.to_owned(),
        reason,
    })
}

fn write(file: &File, path: &std::path::Path, data: &LedgerData) -> Result<(), EmuError> {
    file.write_all_at(&data.encode(), 0)
        .map_err(|e| EmuError::io("write", path, e))
}

fn random_salt() -> Result<u32, EmuError> {
    loop {
        let mut b = [0u8; 4];
        devipc_shm::os::random_bytes(&mut b).map_err(|e| EmuError::sys("getrandom", e))?;
        let salt = u32::from_le_bytes(b) & SALT_MASK;
        if salt != 0 {
            return Ok(salt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_rejects_garbage() {
        let mut d = LedgerData {
            salt: 0x123456,
            counter: 77,
            used: [0; MAX_DEVICES as usize],
        };
        d.used[3] = 1 << 33;
        let b = d.encode();
        assert_eq!(LedgerData::decode(&b).unwrap(), d);
        assert!(LedgerData::decode(&b[..LEDGER_LEN - 1]).is_err());
        assert!(LedgerData::decode(&[]).is_err());
        let mut bad = b;
        bad[0] = b'X';
        assert!(LedgerData::decode(&bad).is_err());
        let mut zero_salt = b;
        zero_salt[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert!(LedgerData::decode(&zero_salt).is_err());
        let mut big_counter = b;
        big_counter[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(LedgerData::decode(&big_counter).is_err());
    }
}
