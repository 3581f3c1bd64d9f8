use super::*;

fn who(pid: i32) -> ProcessIdentity {
    ProcessIdentity {
        pid,
        start_time: 1000 + pid as u64,
        pid_ns: 4026531836,
    }
}

fn sample() -> ObjectMeta {
    let info = ObjectInfo {
        id: ObjectId::new(0xab12, 42).unwrap(),
        vendor: Vendor::Acl,
        kind: ObjectKind::MemKey,
        device: 1,
        size: 4096,
        charged: 0,
        segment_len: 0,
        exporter: who(10),
        parent: ObjectId::new(0xab12, 41),
        offset: 8192,
    };
    let mut m = ObjectMeta::new(info, ObjectFlags::EXPORTED, 0xdead_0000_0000_0001, who(10));
    m.trust(&[20, 30, 20]).unwrap();
    m.add_holder(who(20)).unwrap();
    m.add_holder(who(20)).unwrap();
    m
}

#[test]
fn text_round_trips() {
    let m = sample();
    let text = m.encode();
    assert_eq!(ObjectMeta::decode(&text).unwrap(), m);
    assert!(text.contains("trust 20 30\n"));
    assert!(text.contains("holder 20 1020 4026531836 2\n"));
    let mut bare = m.clone();
    bare.trustlist.clear();
    bare.clear_holders();
    assert_eq!(ObjectMeta::decode(&bare.encode()).unwrap(), bare);
}

#[test]
fn holders_count_and_release() {
    let mut m = sample();
    assert_eq!(m.hold_count(who(20)), 2);
    assert_eq!(m.remove_holder(who(20)).unwrap(), 1);
    assert_eq!(m.remove_holder(who(20)).unwrap(), 0);
    assert!(matches!(
        m.remove_holder(who(20)),
        Err(EmuError::NotHolder { .. })
    ));
    assert_eq!(m.holders().len(), 1);
    m.add_holder(who(5)).unwrap();
    assert_eq!(m.reclaim(|p| p.pid != 5), 1);
    assert_eq!(m.remove_holder_entirely(who(10)), 1);
    assert!(m.holders().is_empty());
}

#[test]
fn trust_rules() {
    let mut m = sample();
    assert!(m.is_trusted(30));
    assert!(!m.is_trusted(40));
    m.flags.insert(ObjectFlags::PID_VALIDATION_DISABLED);
    assert!(m.is_trusted(40));
    let many: Vec<i32> = (0..MAX_TRUSTLIST as i32 + 1).collect();
    assert!(matches!(
        m.trust(&many),
        Err(EmuError::LimitExceeded { .. })
    ));
    assert_eq!(m.trustlist(), &[20, 30]);
    assert!(m.set_trustlist(&many).is_err());
    assert_eq!(m.trustlist(), &[20, 30]);
    m.set_trustlist(&[7, 7, 8]).unwrap();
    assert_eq!(m.trustlist(), &[7, 8]);
}

#[test]
fn corrupt_inputs_are_errors() {
    let good = sample().encode();
    let cases: Vec<String> = vec![
        String::new(),
        "garbage".into(),
        good.replace("devipc-emu-object 2", "devipc-emu-object 3"),
        good.replace("devipc-emu-object 2", "devipc-emu-object 1"),
        good.replace("holder 20 1020 4026531836 2", "holder 20 1020 2"),
        good.replace("exporter 10 1010 4026531836", "exporter 10 1010"),
        good.replace("exporter 10 1010 4026531836", "exporter 10 1010 x"),
        good.replace("kind memkey", "kind blob"),
        good.replace("vendor acl", "vendor cuda"),
        good.replace("device 1", "device -1"),
        good.replace("device 1", "device +1"),
        good.replace("size 4096", "size 4096 4096"),
        good.replace("flags 0x2", "flags 2"),
        good.replace("flags 0x2", "flags 0x"),
        good.replace("aux 0xdead000000000001", "aux 0x1dead000000000001"),
        good.replace("holder 20 1020 4026531836 2", "holder 20 1020 4026531836 0"),
        good.replace("holder 20 1020 4026531836 2", "holder 10 1010 4026531836 2"),
        good.replace("trust 20 30", "trust 20 20"),
        good.replace("trust 20 30", "trust"),
        good.replace("trust 20 30", "trust  20"),
        good.replace("id ", "idx "),
        good.replace("offset 8192\n", ""),
        format!("{good}offset 1\n"),
        format!("{good}trust 7\n"),
        good.replace("parent ", "parent x"),
        "x".repeat(MAX_META_BYTES + 1),
    ];
    for (i, c) in cases.iter().enumerate() {
        assert!(ObjectMeta::decode(c).is_err(), "case {i} parsed: {c:?}");
    }
}

#[test]
fn version_1_processes_are_of_the_readers_namespace() {
    let text = "devipc-emu-object 1\nid 00ab12000000002a\nvendor hip\nkind memory\n\
                device 0\nsize 4096\ncharged 4096\nsegment 4096\nexporter 10 1010\n\
                parent -\noffset 0\nflags 0x1\naux 0x0\nholder 10 1010 1\n";
    let m = ObjectMeta::decode(text).unwrap();
    let ns = ProcessIdentity::current_pid_ns();
    assert_eq!(m.info().exporter.pid_ns, ns);
    assert_eq!(m.holders()[0].process.pid_ns, ns);
    assert!(m.encode().starts_with("devipc-emu-object 2\n"));
    assert!(ObjectMeta::decode(&text.replace("holder 10 1010 1", "holder 10 1010 7 1")).is_err());
}
