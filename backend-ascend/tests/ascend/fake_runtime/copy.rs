//! Host reads and writes: the device of the range bound for the copy, and the staged
//! copies of cross-device key imports (through one bounded staging buffer and stream,
//! released and the device restored when a copy fails; unsupported without async
//! copies).

use devipc_core::{DeviceId, DeviceIpc, DevicePtr, Error};
use devipc_testkit::RawIo;
use serial_test::serial;

use super::*;

#[test]
#[serial]
fn write_and_read_bind_the_device_of_the_range() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(1), 1).unwrap();
    fake::with(|s| s.current = Some(0));
    calls();
    b.write_raw(alloc.ptr.offset(10).unwrap(), &[1, 2, 3])
        .unwrap();
    let mut buf = [0u8; 4];
    b.read_raw(alloc.ptr, &mut buf).unwrap();
    let c = calls();
    assert_eq!(
        c,
        [
            "aclrtGetDevice",
            "aclrtSetDevice(1)",
            "aclrtMemcpy(3,3,1)",
            "aclrtSetDevice(0)",
            "aclrtGetDevice",
            "aclrtSetDevice(1)",
            "aclrtMemcpy(4,4,2)",
            "aclrtSetDevice(0)",
        ]
    );
    // Memory devipc did not map: the thread's device as it is.
    b.write_raw(DevicePtr(0x1234), &[1]).unwrap();
    assert_eq!(calls(), ["aclrtMemcpy(1,1,1)"]);
    b.free(alloc).unwrap();
}

fn copies() -> Vec<fake::CopyCall> {
    fake::with(|s| std::mem::take(&mut s.copies))
}

/// The staging buffer and stream of the last staged copy.
fn staging_and_stream() -> (usize, usize) {
    fake::with(|s| (s.last_malloc, s.last_stream))
}

#[test]
#[serial]
fn a_cross_device_key_import_is_written_and_read_through_a_staging_buffer() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 8192, 4096, 100);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let same = b.import(&token, DeviceId(1)).unwrap();
    fake::with(|s| s.current = Some(1));
    calls();
    copies();

    let data: Vec<u8> = (0..100).collect();
    b.write_raw(cross.ptr, &data).unwrap();
    let (staging, stream) = staging_and_stream();
    assert_eq!(
        calls(),
        [
            "aclrtGetDevice".to_owned(),
            "aclrtSetDevice(0)".to_owned(),
            "aclrtMalloc(100,0)".to_owned(),
            "aclrtCreateStream".to_owned(),
            "aclrtMemcpy(100,100,1)".to_owned(),
            "aclrtMemcpyAsync(100,100,3)".to_owned(),
            format!("aclrtSynchronizeStream({stream:#x})"),
            format!("aclrtDestroyStream({stream:#x})"),
            format!("aclrtFree({staging:#x})"),
            "aclrtSetDevice(1)".to_owned(),
        ]
    );
    let c = copies();
    assert_eq!(
        c,
        [
            fake::CopyCall {
                dst: staging,
                dest_max: 100,
                src: data.as_ptr().addr(),
                count: 100,
                kind: 1,
                stream: None,
            },
            fake::CopyCall {
                dst: cross.ptr.0 as usize,
                dest_max: 100,
                src: staging,
                count: 100,
                kind: 3,
                stream: Some(stream),
            },
        ]
    );

    let mut back = [0u8; 64];
    b.read_raw(cross.ptr.offset(8).unwrap(), &mut back).unwrap();
    let (staging, stream) = staging_and_stream();
    assert_eq!(
        calls(),
        [
            "aclrtGetDevice".to_owned(),
            "aclrtSetDevice(0)".to_owned(),
            "aclrtMalloc(64,0)".to_owned(),
            "aclrtCreateStream".to_owned(),
            "aclrtMemcpyAsync(64,64,3)".to_owned(),
            format!("aclrtSynchronizeStream({stream:#x})"),
            "aclrtMemcpy(64,64,2)".to_owned(),
            format!("aclrtDestroyStream({stream:#x})"),
            format!("aclrtFree({staging:#x})"),
            "aclrtSetDevice(1)".to_owned(),
        ]
    );
    let c = copies();
    assert_eq!(
        (c[0].dst, c[0].src, c[0].stream),
        (staging, cross.ptr.0 as usize + 8, Some(stream))
    );
    assert_eq!((c[1].dst, c[1].src), (back.as_ptr().addr(), staging));

    // On the exporter's device the plain synchronous copy is allowed.
    b.read_raw(same.ptr, &mut back).unwrap();
    assert_eq!(calls(), ["aclrtGetDevice", "aclrtMemcpy(64,64,2)"]);
    b.close(cross).unwrap();
    b.close(same).unwrap();
}

#[test]
#[serial]
fn large_staged_copies_go_in_bounded_chunks_through_one_buffer() {
    const MIB: usize = 1 << 20;
    assert_eq!(devipc_ascend::STAGING_CHUNK, 4 * MIB);
    let len = 9 * MIB + 5;
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 16 << 20, 0, 16 << 20);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let base = cross.ptr.0 as usize;
    let data = vec![7u8; len];
    calls();
    copies();
    b.write_raw(cross.ptr, &data).unwrap();
    let (staging, stream) = staging_and_stream();
    let c = calls();
    assert_eq!(count(&c, "aclrtMalloc"), 1, "{c:?}");
    assert!(c.contains(&format!("aclrtMalloc({},0)", 4 * MIB)), "{c:?}");
    assert_eq!(count(&c, "aclrtCreateStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtSynchronizeStream"), 3, "{c:?}");
    assert_eq!(count(&c, "aclrtDestroyStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtFree"), 1, "{c:?}");
    let chunks = [(0, 4 * MIB), (4 * MIB, 4 * MIB), (8 * MIB, MIB + 5)];
    let mut want = Vec::new();
    for (offset, n) in chunks {
        want.push(fake::CopyCall {
            dst: staging,
            dest_max: 4 * MIB,
            src: data.as_ptr().addr() + offset,
            count: n,
            kind: 1,
            stream: None,
        });
        want.push(fake::CopyCall {
            dst: base + offset,
            dest_max: n,
            src: staging,
            count: n,
            kind: 3,
            stream: Some(stream),
        });
    }
    assert_eq!(copies(), want);

    let mut back = vec![0u8; len];
    b.read_raw(cross.ptr, &mut back).unwrap();
    let (staging, stream) = staging_and_stream();
    let mut want = Vec::new();
    for (offset, n) in chunks {
        want.push(fake::CopyCall {
            dst: staging,
            dest_max: 4 * MIB,
            src: base + offset,
            count: n,
            kind: 3,
            stream: Some(stream),
        });
        want.push(fake::CopyCall {
            dst: back.as_ptr().addr() + offset,
            dest_max: n,
            src: staging,
            count: n,
            kind: 2,
            stream: None,
        });
    }
    assert_eq!(copies(), want);
    let c = calls();
    // Each chunk's async copy is synchronised before the buffer is copied or reused.
    let n = names(&c);
    let order: Vec<&str> = n
        .iter()
        .copied()
        .filter(|x| x.starts_with("aclrtMemcpy") || *x == "aclrtSynchronizeStream")
        .collect();
    assert_eq!(
        order,
        [
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
        ]
    );
    b.close(cross).unwrap();
}

#[test]
#[serial]
fn a_failing_staged_copy_releases_the_buffer_and_the_stream_and_restores_the_device() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 16 << 20, 0, 16 << 20);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    fake::with(|s| s.current = Some(1));
    let data = vec![1u8; 9 << 20];
    let mut back = vec![0u8; 9 << 20];

    // (function failing, on which call, whether a write (else a read), what is released)
    let cases: [(&'static str, usize, bool, bool, bool); 9] = [
        ("aclrtMalloc", 1, true, false, false),
        ("aclrtCreateStream", 1, true, true, false),
        ("aclrtMemcpy", 1, true, true, true),
        ("aclrtMemcpyAsync", 2, true, true, true),
        ("aclrtSynchronizeStream", 3, true, true, true),
        ("aclrtMemcpyAsync", 1, false, true, true),
        ("aclrtSynchronizeStream", 2, false, true, true),
        ("aclrtMemcpy", 3, false, true, true),
        ("aclrtMalloc", 1, false, false, false),
    ];
    for (name, nth, write, freed, destroyed) in cases {
        calls();
        fail_nth(name, nth, 507_899);
        let err = if write {
            b.write_raw(cross.ptr, &data).unwrap_err()
        } else {
            b.read_raw(cross.ptr, &mut back).unwrap_err()
        };
        let case = format!("{name} #{nth}, write {write}");
        assert!(
            matches!(&err, Error::Vendor { api, code: 507_899, .. } if *api == name),
            "{case}: {err:?}"
        );
        let c = calls();
        assert_eq!(count(&c, "aclrtFree"), usize::from(freed), "{case}: {c:?}");
        assert_eq!(
            count(&c, "aclrtDestroyStream"),
            usize::from(destroyed),
            "{case}: {c:?}"
        );
        if destroyed {
            let n = names(&c);
            let destroy = n.iter().position(|x| *x == "aclrtDestroyStream").unwrap();
            let free = n.iter().position(|x| *x == "aclrtFree").unwrap();
            assert!(destroy < free, "the stream goes before its buffer: {c:?}");
        }
        assert_eq!(
            c.last().map(String::as_str),
            Some("aclrtSetDevice(1)"),
            "{case}"
        );
        assert_eq!(fake::with(|s| s.current), Some(1), "{case}");
        fake::with(|s| s.fail_nth.clear());
    }

    // A release that fails after a complete transfer is the call's error; the other
    // object is still released.
    calls();
    fail("aclrtDestroyStream", 107_017);
    let err = b.write_raw(cross.ptr, &data[..100]).unwrap_err();
    assert_eq!(err.vendor_code(), Some(107_017), "{err}");
    assert!(err.to_string().contains("aclrtDestroyStream"), "{err}");
    assert_eq!(count(&calls(), "aclrtFree"), 1);
    unfail("aclrtDestroyStream");
    fail("aclrtFree", 107_000);
    let err = b.read_raw(cross.ptr, &mut back[..100]).unwrap_err();
    assert!(err.to_string().contains("aclrtFree"), "{err}");
    unfail("aclrtFree");

    // All well again.
    b.write_raw(cross.ptr, &data).unwrap();
    b.close(cross).unwrap();
}

#[test]
#[serial]
fn without_async_copies_a_cross_device_key_import_is_unsupported_for_host_copies() {
    let mut api = fake_api();
    api.aclrtMemcpyAsync = None;
    let b = backend(api);
    assert_eq!(b.api().missing_optional(), ["aclrtMemcpyAsync"]);
    let token = exported_key_token(&b, DeviceId(1), 8192, 0, 8192);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let same = b.import(&token, DeviceId(1)).unwrap();
    calls();
    let mut buf = [0u8; 16];
    let err = b.read_raw(cross.ptr, &mut buf).unwrap_err();
    match &err {
        Error::Unsupported { what, .. } => {
            assert!(what.contains("aclrtMemcpyAsync"), "{what}");
            assert!(what.contains("another device"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(matches!(
        b.write_raw(cross.ptr, &buf),
        Err(Error::Unsupported { .. })
    ));
    assert!(calls().is_empty(), "nothing is called before the refusal");
    // Same-device imports and allocations copy as before.
    b.read_raw(same.ptr, &mut buf).unwrap();
    b.write_raw(same.ptr, &buf).unwrap();
    b.close(cross).unwrap();
    b.close(same).unwrap();
}
