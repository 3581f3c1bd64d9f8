//! The stream-ordered data plane in one process, on both emulated backends: copies
//! between local buffers, imports and host memory, batches, events, requests, the bounds
//! every span is held to, and a stream shared by several threads. The multi-process
//! lifetime of transfers is `data_plane_lifetime`.

use std::time::Duration;

use devipc::{BackendKind, DeviceBuffer, Error, ExportOptions, Runtime};

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn each_backend(f: impl Fn(Runtime)) {
    for kind in [BackendKind::Hip, BackendKind::Ascend] {
        f(Runtime::emulated(kind).unwrap_or_else(|e| panic!("{kind}: {e}")));
    }
}

#[test]
fn host_and_device_copies_through_an_import_are_byte_exact() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let n = 256 << 10;
        let src = rt.allocate(0, n).unwrap();
        let dst = rt.allocate(0, n).unwrap();
        let stream = rt.create_stream(0).unwrap();
        let data = pattern(n, 7);
        let back = stream
            .write(&src.span(0..n).unwrap(), data.clone())
            .unwrap()
            .into_host()
            .unwrap();
        assert_eq!(back, data, "{kind}: the source comes back for reuse");

        // Through an import of the source (a view of this process's own export).
        let token = src.export(ExportOptions::any_process()).unwrap();
        let import = rt.import(&token, 0).unwrap();
        let mut copy = stream
            .copy(&dst.span(0..n).unwrap(), &import.span(0..n).unwrap())
            .unwrap();
        copy.wait(Some(Duration::from_secs(10))).unwrap();
        assert!(copy.is_complete().unwrap(), "{kind}");
        let read = stream.read(&dst.span(1000..5000).unwrap()).unwrap();
        assert_eq!(read.into_host().unwrap(), data[1000..5000], "{kind}");
    });
}

#[test]
fn a_batch_copies_every_pair_and_names_the_first_refused_one() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let src = rt.allocate(0, 64 << 10).unwrap();
        let dst = rt.allocate(0, 64 << 10).unwrap();
        src.write(0, &pattern(64 << 10, 3)).unwrap();
        let stream = rt.create_stream(0).unwrap();
        let pairs: Vec<_> = (0..16)
            .map(|i| {
                let at = i * 4096;
                // Reversed order: block i lands at 15 - i.
                (
                    dst.span((15 - i) * 4096..(16 - i) * 4096).unwrap(),
                    src.span(at..at + 4096).unwrap(),
                )
            })
            .collect();
        let mut batch = stream.copy_batch(&pairs).unwrap();
        batch.wait(None).unwrap();
        let mut got = vec![0u8; 64 << 10];
        dst.read(0, &mut got).unwrap();
        let want = pattern(64 << 10, 3);
        for i in 0..16 {
            assert_eq!(
                got[(15 - i) * 4096..(16 - i) * 4096],
                want[i * 4096..(i + 1) * 4096],
                "{kind}: block {i}"
            );
        }

        // A pair of unequal lengths is refused with its index, before anything runs.
        let mut bad = pairs[..3].to_vec();
        bad.push((dst.span(0..10).unwrap(), src.span(0..11).unwrap()));
        let e = stream.copy_batch(&bad).unwrap_err();
        assert!(
            matches!(&e, Error::Copy { index: 3, count: 4, source } if matches!(**source, Error::InvalidArgument { .. })),
            "{kind}: {e}"
        );
        assert_eq!(e.kind(), "copy");
    });
}

#[test]
fn spans_are_bounded_by_their_buffers() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let buf = rt.allocate(0, 4096).unwrap();
        let len = buf.len();
        #[allow(
            clippy::reversed_empty_ranges,
            reason = "a reversed range must be refused"
        )]
        let reversed = 10..5;
        for range in [
            0..len + 1,
            len..len + 1,
            reversed,
            usize::MAX - 1..usize::MAX,
        ] {
            let e = buf.span(range.clone()).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. }),
                "{kind} {range:?}: {e}"
            );
        }
        assert_eq!(DeviceBuffer::whole(&buf).len(), len);
        let span = buf.span(100..200).unwrap();
        assert_eq!(span.len(), 100);
        assert_eq!(span.ptr().0, buf.ptr().0 + 100);
        assert!(
            span.slice(0..101).is_err(),
            "{kind}: a slice stays inside its span"
        );
        let token = buf
            .export_range(0..len / 2, ExportOptions::any_process())
            .unwrap();
        let view = rt.import(&token, 0).unwrap();
        assert!(
            view.span(0..len / 2 + 1).is_err(),
            "{kind}: an import's span stays in its range"
        );
        // Host copies must match their span.
        let stream = rt.create_stream(0).unwrap();
        assert!(matches!(
            stream.write(&span, vec![0; 99]).unwrap_err(),
            Error::Copy { index: 0, .. } | Error::InvalidArgument { .. }
        ));
    });
}

#[test]
fn events_order_streams_and_report_completion() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let n = 1 << 20;
        let a = rt.allocate(0, n).unwrap();
        let b = rt.allocate(0, n).unwrap();
        let c = rt.allocate(0, n).unwrap();
        a.write(0, &pattern(n, 9)).unwrap();
        let first = rt.create_stream(0).unwrap();
        let second = rt.create_stream(0).unwrap();
        let event = rt.create_event(0).unwrap();
        assert!(
            event.is_complete().unwrap(),
            "{kind}: never recorded is complete"
        );
        let copy_ab = first
            .copy(&b.span(0..n).unwrap(), &a.span(0..n).unwrap())
            .unwrap();
        event.record(&first).unwrap();
        second.wait_event(&event).unwrap();
        let copy_bc = second
            .copy(&c.span(0..n).unwrap(), &b.span(0..n).unwrap())
            .unwrap();
        event.wait(Some(Duration::from_secs(10))).unwrap();
        drop(copy_ab);
        second.synchronize().unwrap();
        drop(copy_bc);
        let mut got = vec![0u8; n];
        c.read(0, &mut got).unwrap();
        assert_eq!(
            got,
            pattern(n, 9),
            "{kind}: the second copy ran after the first"
        );
        // An event of another device is refused by a stream.
        if rt.device_count().unwrap() > 1 {
            let other = rt.create_event(1).unwrap();
            assert!(first.record(&other).is_err(), "{kind}");
        }
    });
}

#[test]
fn one_stream_serves_several_threads() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let n = 64 << 10;
        let threads = 4;
        let src = rt.allocate(0, n * threads).unwrap();
        let dst = rt.allocate(1, n * threads).unwrap();
        src.write(0, &pattern(n * threads, 5)).unwrap();
        let stream = rt.create_stream(1).unwrap();
        std::thread::scope(|s| {
            for t in 0..threads {
                let (stream, src, dst) = (stream.clone(), &src, &dst);
                s.spawn(move || {
                    for round in 0..8 {
                        let part = n / 8;
                        let at = t * n + round * part;
                        let mut r = stream
                            .copy(
                                &dst.span(at..at + part).unwrap(),
                                &src.span(at..at + part).unwrap(),
                            )
                            .unwrap();
                        r.wait(Some(Duration::from_secs(10))).unwrap();
                    }
                });
            }
        });
        let mut got = vec![0u8; n * threads];
        dst.read(0, &mut got).unwrap();
        assert_eq!(got, pattern(n * threads, 5), "{kind}");
    });
}

#[test]
fn signals_take_streams_of_their_vendor_runtime_and_device() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        let signal = rt.create_signal(0).unwrap();
        let on0 = rt.create_stream(0).unwrap();
        signal.notify_on_stream(&on0).unwrap();
        signal
            .wait_on_stream(&on0, Some(Duration::from_secs(10)))
            .unwrap();
        let on1 = rt.create_stream(1).unwrap();
        let e = signal.notify_on_stream(&on1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{kind}: {e}");
        let other = match kind {
            BackendKind::Hip => BackendKind::Ascend,
            _ => BackendKind::Hip,
        };
        let foreign = Runtime::emulated(other).unwrap().create_stream(0).unwrap();
        let e = signal
            .wait_on_stream(&foreign, Some(Duration::from_millis(10)))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{kind}: {e}");
        assert_ne!(
            on0.as_raw(),
            0,
            "{kind}: devipc's stream is not the default one"
        );
    });
}

#[test]
fn a_batch_keeps_every_source_it_names_until_it_ran() {
    each_backend(|rt| {
        let kind = rt.info().kind;
        // More sources than the request's scan of kept objects (it switches to a set).
        let sources: Vec<_> = (0..40u8)
            .map(|i| {
                let b = rt.allocate(0, 4096).unwrap();
                b.write(0, &[i; 4096]).unwrap();
                b
            })
            .collect();
        let dst = rt.allocate(0, 40 * 4096).unwrap();
        let stream = rt.create_stream(0).unwrap();
        devipc::testing::hold_stream(&stream).unwrap();
        let pairs: Vec<_> = sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    dst.span(i * 4096..(i + 1) * 4096).unwrap(),
                    s.span(0..4096).unwrap(),
                )
            })
            .collect();
        let mut batch = stream.copy_batch(&pairs).unwrap();
        drop(pairs);
        drop(sources); // every source buffer dropped while the copies are queued
        devipc::testing::release_stream(&stream).unwrap();
        batch.wait(Some(Duration::from_secs(20))).unwrap();
        let mut got = vec![0u8; 40 * 4096];
        dst.read(0, &mut got).unwrap();
        for i in 0..40 {
            assert!(
                got[i * 4096..(i + 1) * 4096].iter().all(|&b| b == i as u8),
                "{kind}: source {i}"
            );
        }
    });
}
