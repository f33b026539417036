//! Mooncake's segment calls and replica clearing (issue 17) against the harness's cluster
//! (its daemon lends memory of its own and has no SSD tier): `batch_replica_clear`,
//! `mount_segment` (pool memory), `allocate_and_mount_segment` (daemon memory),
//! `unmount_segment` and `unmount_local_disk_segment`.
#![deny(warnings)]

mod common;

use common::{connect, pattern, prefix};
use mooncake_store::Error;

const MIB: u64 = 1 << 20;

#[test]
fn replica_clear_skips_leased_keys() {
    let s = connect(16 * MIB);
    let p = prefix("clear");
    let (idle, read) = (format!("{p}idle"), format!("{p}read"));
    s.put(&idle, b"i").unwrap();
    s.put(&read, b"r").unwrap();
    let missing = format!("{p}missing");
    // A put a moment ago counts as in use for one lease (docs/mooncake-api.md, "leases"):
    // until the idle key is past it, its clear answers ObjectHasLease and clears nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let results = loop {
        s.get(&read).unwrap(); // a read lease, renewed on every round
        let r = s
            .batch_replica_clear(&[idle.as_str(), read.as_str(), missing.as_str(), "a\0b"], None)
            .unwrap();
        if r[0] != Err(Error::ObjectHasLease) {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "the put's lease never ended");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        results,
        vec![Ok(()), Err(Error::ObjectHasLease), Err(Error::ObjectNotFound), Err(Error::InvalidParams)]
    );
    assert!(!s.is_exist(&idle).unwrap());
    assert!(s.is_exist(&read).unwrap());
    assert!(s.batch_replica_clear::<&str>(&[], None).unwrap().is_empty());
}

#[test]
fn replica_clear_on_one_daemon() {
    let s = connect(16 * MIB);
    let key = prefix("clear-one") + "k";
    s.put(&key, b"v").unwrap();
    // A put a moment ago is in use for one lease (docs/mooncake-api.md, "leases"); the
    // clear of a key past it is the C suite's (tests/integration/c_api_segments_test.c, a short lease).
    let here = s.get_hostname().unwrap();
    for name in ["127.0.0.1:1", here.as_str()] {
        assert_eq!(
            s.batch_replica_clear(&[&key], Some(name)).unwrap(),
            vec![Err(Error::ObjectHasLease)]
        );
    }
    assert!(s.is_exist(&key).unwrap());
    s.remove(&key, false).unwrap();
    assert_eq!(
        s.batch_replica_clear(&[&key], Some(&"h".repeat(300))),
        Err(Error::InvalidParams)
    );
    assert_eq!(s.batch_replica_clear(&[&key], Some("a\0b")), Err(Error::InvalidParams));
}

fn lend_and_unmount(s: &mooncake_store::Store, id: u64, p: &str) {
    for i in 0..8u8 {
        s.put(format!("{p}{i}"), &pattern(4096, i)).unwrap();
    }
    let drained = s.unmount_segment(id).unwrap();
    assert_eq!(drained.dropped, 0); // the daemon's own memory has room for what moved
    for i in 0..8u8 {
        assert_eq!(s.get(format!("{p}{i}")).unwrap().unwrap(), pattern(4096, i));
    }
    assert_eq!(s.unmount_segment(id), Err(Error::SegmentNotFound));
}

#[test]
fn pool_memory_is_lent() {
    let s = connect(16 * MIB);
    let mut lent = s.alloc(4 << 20).unwrap();
    let id = s.mount_segment(&mut lent).unwrap();
    assert_ne!(id, 0);
    lend_and_unmount(&s, id, &prefix("pool"));
}

#[test]
fn daemon_memory_is_lent() {
    let s = connect(16 * MIB);
    let (id, size) = s.allocate_and_mount_segment(4 * MIB).unwrap();
    assert_eq!(size, 4 * MIB);
    lend_and_unmount(&s, id, &prefix("daemon"));
}

#[test]
fn refusals() {
    let s = connect(16 * MIB);
    assert_eq!(s.allocate_and_mount_segment(0), Err(Error::InvalidParams));
    assert_eq!(s.unmount_segment(12345), Err(Error::SegmentNotFound));
    assert_eq!(s.unmount_local_disk_segment(), Ok(())); // no SSD tier here
    let (id, _) = s.allocate_and_mount_segment(MIB).unwrap();
    let other = connect(MIB);
    assert_eq!(other.unmount_segment(id), Err(Error::SegmentNotFound));
    drop(other);
    s.unmount_segment(id).unwrap();
    // Another store's pool memory is not this one's to lend.
    let theirs = connect(4 * MIB);
    let mut buf = theirs.alloc(MIB as usize).unwrap();
    assert_eq!(s.mount_segment(&mut buf), Err(Error::InvalidParams));
    drop(buf);
    theirs.close().unwrap();
}
