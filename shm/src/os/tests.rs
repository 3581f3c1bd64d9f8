//! Tests of the system-call wrappers: bounds and atomicity of mapped regions,
//! reservations, socket credentials and readiness, and futex waits.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use super::*;

fn temp_file(len: usize) -> File {
    let path = std::env::temp_dir().join(format!("devipc-emu-sys-{}-{}", std::process::id(), len));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all(&vec![0u8; len]).unwrap();
    std::fs::remove_file(&path).unwrap();
    f
}

#[test]
fn region_bounds_are_checked() {
    let f = temp_file(8192);
    let r = MappedRegion::map_file(&f, 8192).unwrap();
    assert!(r.write_at(8188, &[1, 2, 3, 4]));
    assert!(!r.write_at(8189, &[1, 2, 3, 4]));
    assert!(!r.write_at(usize::MAX, &[1]));
    let mut b = [0u8; 4];
    assert!(r.read_at(8188, &mut b));
    assert_eq!(b, [1, 2, 3, 4]);
    assert!(r.atomic_u32(8188).is_some());
    assert!(r.atomic_u32(8190).is_none());
    assert!(r.atomic_u32(8192).is_none());
    assert!(MappedRegion::map_file(&f, 0).is_err());
}

#[test]
fn copies_are_exact_at_every_alignment_and_length() {
    let f = temp_file(256);
    let r = MappedRegion::map_file(&f, 256).unwrap();
    for offset in 0..24 {
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + offset + 1) as u8).collect();
            assert!(r.write_at(0, &[0xAA; 128]));
            assert!(r.write_at(offset, &data));
            let mut all = [0u8; 128];
            assert!(r.read_at(0, &mut all));
            let mut want = [0xAAu8; 128];
            want[offset..offset + len].copy_from_slice(&data);
            assert_eq!(all, want, "offset {offset} len {len}");
            let mut back = vec![0u8; len];
            assert!(r.read_at(offset, &mut back));
            assert_eq!(back, data, "offset {offset} len {len}");
        }
    }
}

/// `MappedRegion` is `Sync`, so copies may race with other copies and with the
/// `AtomicU32` words of the same region. Before the copies were atomic this was a data
/// race (a plain `memcpy` against atomic stores), which ThreadSanitizer reports (and
/// no longer does):
/// `RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer"
/// TSAN_OPTIONS=suppressions=$PWD/shm/tsan-std.supp cargo +nightly test -p devipc-shm
/// --lib --target x86_64-unknown-linux-gnu racing_copies`. In a normal run it checks
/// that a reader only ever sees whole words some writer stored.
#[test]
fn racing_copies_and_atomics_see_only_written_words() {
    use std::sync::atomic::Ordering::Relaxed;
    let f = temp_file(4096);
    let r = MappedRegion::map_file(&f, 4096).unwrap();
    let go = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        s.spawn(|| {
            let w = r.atomic_u32(64).unwrap();
            go.wait();
            for i in 0..2_000u32 {
                w.store(if i % 2 == 0 { 0x1111_1111 } else { 0x2222_2222 }, Relaxed);
            }
        });
        s.spawn(|| {
            go.wait();
            for n in 0..200 {
                let fill = [if n % 2 == 0 { 0x33u8 } else { 0x44 }; 4096];
                assert!(r.write_at(0, &fill[..60]));
                assert!(r.write_at(68, &fill[68..]));
            }
        });
        go.wait();
        let mut buf = [0u8; 4096];
        for _ in 0..200 {
            assert!(r.read_at(0, &mut buf));
            let word = u32::from_ne_bytes(buf[64..68].try_into().unwrap());
            assert!(
                [0, 0x1111_1111, 0x2222_2222].contains(&word),
                "torn word {word:#x}"
            );
        }
    });
}

#[test]
fn reservation_is_aligned_and_maps_files() {
    let align = 2 << 20;
    let res = Reservation::new(3 * page_size(), align).unwrap();
    assert_eq!(res.base() % align, 0);
    let f = temp_file(page_size());
    let region = MappedRegion::map_file(&f, page_size()).unwrap();
    res.map_file(page_size(), &f, page_size()).unwrap();
    region.write_at(0, b"hello");
    let at = (res.base() + page_size()) as *const u8;
    // SAFETY: the page at `at` is mapped read-write to `f` until `unmap` below.
    let first = unsafe { std::ptr::read_volatile(at) };
    assert_eq!(first, b'h');
    res.unmap(page_size(), page_size()).unwrap();
    assert!(res.map_file(1, &f, page_size()).is_err());
    assert!(res.map_file(3 * page_size(), &f, page_size()).is_err());
    assert!(Reservation::new(page_size(), 3 * page_size()).is_err());
}

/// Set in a child re-run of this test binary: connect to the socket at this path.
const PEER_CHILD_ENV: &str = "DEVIPC_SHM_PEER_CHILD_SOCKET";

#[test]
fn peer_credentials_of_a_socketpair_are_this_process() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    // SAFETY: getegid has no preconditions and cannot fail.
    let gid = unsafe { libc::getegid() };
    let want = PeerCred {
        pid: std::process::id(),
        uid: effective_uid(),
        gid,
    };
    assert_eq!(peer_credentials(&a).unwrap(), want);
    assert_eq!(peer_credentials(&b).unwrap(), want);
    // Not a socket: a typed error, no garbage credentials.
    let f = temp_file(1);
    assert_eq!(
        peer_credentials(&f).unwrap_err().raw_os_error(),
        Some(libc::ENOTSOCK)
    );
}

/// The child role of the test below; does nothing unless started by it.
#[test]
fn peer_credentials_child_role() {
    let Some(path) = std::env::var_os(PEER_CHILD_ENV) else {
        return;
    };
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    // The parent asks the kernel who we are; the child also reports what the kernel
    // says about the listening parent.
    let server = peer_credentials(&s).unwrap();
    writeln!(s, "{} {}", std::process::id(), server.pid).unwrap();
}

#[test]
fn peer_credentials_name_the_other_process() {
    let dir = std::env::temp_dir().join(format!("devipc-shm-peercred-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "os::tests::peer_credentials_child_role",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEER_CHILD_ENV, &path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_readable(&listener, Some(Duration::from_secs(60))).unwrap(),
        "the child never connected"
    );
    let (stream, _) = listener.accept().unwrap();
    let cred = peer_credentials(&stream).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut line).unwrap();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cred.pid, child.id());
    assert_eq!(cred.uid, effective_uid());
    assert_eq!(
        line.trim(),
        format!("{} {}", child.id(), std::process::id()),
        "the child's own pid and its view of the listener"
    );
}

#[test]
fn send_nosignal_reports_a_closed_peer_as_an_error() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    assert_eq!(send_nosignal(&a, b"hi").unwrap(), 2);
    drop(b);
    // Without MSG_NOSIGNAL this would raise SIGPIPE (ignored by the Rust runtime, so
    // the test checks the error, which is what an embedding host would see too).
    assert_eq!(
        send_nosignal(&a, b"hi").unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

#[test]
fn wait_readable_times_out_then_sees_a_pending_connection() {
    let dir = std::env::temp_dir().join(format!("devipc-shm-poll-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let start = std::time::Instant::now();
    assert!(!wait_readable(&listener, Some(Duration::from_millis(50))).unwrap());
    assert!(start.elapsed() >= Duration::from_millis(50));
    let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
    assert!(wait_readable(&listener, Some(Duration::ZERO)).unwrap());
    assert!(wait_readable(&listener, None).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn poll_reports_which_descriptors_are_ready() {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
    let start = std::time::Instant::now();
    let mut fds = [
        PollFd::new(a.as_fd(), true, false),
        PollFd::new(c.as_fd(), true, false),
    ];
    assert_eq!(poll(&mut fds, Some(Duration::from_millis(50))).unwrap(), 0);
    assert!(start.elapsed() >= Duration::from_millis(50));
    (&b).write_all(b"x").unwrap();
    let mut fds = [
        PollFd::new(a.as_fd(), true, false),
        PollFd::new(c.as_fd(), true, false),
    ];
    assert_eq!(poll(&mut fds, None).unwrap(), 1);
    assert!(fds[0].is_ready() && !fds[1].is_ready());
    // Room to write is readiness too; a closed peer shows as ready for reading.
    drop(b);
    let mut fds = [
        PollFd::new(c.as_fd(), false, true),
        PollFd::new(a.as_fd(), true, false),
    ];
    assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 2);
    assert_eq!(poll(&mut [], Some(Duration::from_millis(1))).unwrap(), 0);
}

/// (Filling a listener's queue, which gives `WouldBlock`, takes thousands of
/// descriptors: the rendezvous tests of the facade do it, away from this crate's test
/// that counts descriptors.)
#[test]
fn connect_unix_nonblocking_connects_blocking_streams() {
    let dir = std::env::temp_dir().join(format!("devipc-shm-connect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    assert_eq!(
        connect_unix_nonblocking(&path).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let s = connect_unix_nonblocking(&path).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    assert_eq!(peer_credentials(&accepted).unwrap().pid, std::process::id());
    let mut buf = [0u8; 1];
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let start = std::time::Instant::now();
    let err = std::io::Read::read(&mut &s, &mut buf).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    assert!(
        start.elapsed() >= Duration::from_millis(20),
        "the read waited for its timeout: the stream blocks"
    );
    let long = dir.join("x".repeat(200));
    assert_eq!(
        connect_unix_nonblocking(&long).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    drop(listener);
    std::fs::remove_file(&path).unwrap();
    // A socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert_eq!(
        connect_unix_nonblocking(&path).unwrap_err().kind(),
        io::ErrorKind::ConnectionRefused
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn open_directory_path_names_a_directory_only() {
    let dir = std::env::temp_dir().join(format!("devipc-shm-odp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("file"), b"x").unwrap();
    let fd = open_directory_path(&dir).unwrap();
    let through = format!("/proc/self/fd/{}/file", fd.as_raw_fd());
    assert_eq!(std::fs::read(through).unwrap(), b"x");
    let err = open_directory_path(&dir.join("file")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn futex_wait_times_out_and_detects_changed_value() {
    let w = AtomicU32::new(5);
    assert_eq!(
        futex_wait(&w, 4, Some(Duration::from_millis(10))).unwrap(),
        FutexWait::ValueChanged
    );
    assert_eq!(
        futex_wait(&w, 5, Some(Duration::from_millis(10))).unwrap(),
        FutexWait::TimedOut
    );
    assert_eq!(futex_wake(&w, 1).unwrap(), 0);
}

/// A descriptor sent over a socket pair arrives as a new descriptor for the same open file.
#[test]
fn a_descriptor_sent_with_scm_rights_names_the_same_file() {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    let (a, b) = UnixStream::pair().unwrap();
    let mut file = unlinked_temp_file();
    file.write_all(b"shared bytes").unwrap();
    assert_eq!(send_with_fds(&a, b"x", &[file.as_fd()]).unwrap(), 1);
    let mut buf = [0u8; 4];
    let (n, fds) = recv_with_fds(&b, &mut buf).unwrap();
    assert_eq!((n, &buf[..1], fds.len()), (1, &b"x"[..], 1));
    let mut got = std::fs::File::from(fds.into_iter().next().unwrap());
    got.rewind().unwrap();
    let mut text = String::new();
    got.read_to_string(&mut text).unwrap();
    assert_eq!(text, "shared bytes");
    // No descriptor, or too many, is refused before the kernel.
    assert!(send_with_fds(&a, b"x", &[]).is_err());
    assert!(send_with_fds(&a, b"", &[file.as_fd()]).is_err());
    // The end of the stream.
    drop(a);
    let (n, fds) = recv_with_fds(&b, &mut buf).unwrap();
    assert_eq!((n, fds.len()), (0, 0));
}

/// `pidfd_getfd` on this process duplicates one of its own descriptors (allowed: a
/// process may inspect itself), naming the same file.
#[test]
fn pidfd_getfd_duplicates_another_process_descriptor() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    let file = unlinked_temp_file();
    // Linux 5.6+ (devipc's HIP VMM mechanism needs it; Debian 12 ships 6.1).
    let pidfd = pidfd_open(std::process::id() as i32).unwrap();
    let dup = pidfd_getfd(&pidfd, file.as_raw_fd()).unwrap();
    let dup = std::fs::File::from(dup);
    assert_eq!(
        dup.metadata().unwrap().ino(),
        file.metadata().unwrap().ino()
    );
    assert_ne!(dup.as_raw_fd(), file.as_raw_fd());
    // A number that is not open there is EBADF.
    let err = pidfd_getfd(&pidfd, 1 << 20).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EBADF));
}

/// An unlinked temporary file (a stand-in for a dma-buf or memfd).
fn unlinked_temp_file() -> std::fs::File {
    let mut name = [0u8; 8];
    random_bytes(&mut name).unwrap();
    let path = std::env::temp_dir().join(format!("devipc-fd-test-{}", u64::from_le_bytes(name)));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}
