//! Replica descriptors and the offload choice (`Store::get_replica_desc`,
//! `Store::batch_get_replica_desc`, `Store::set_ssd_offload`) against the harness's cluster,
//! which has no SSD tier: every replica is a memory one. `disk_replica_appears_with_offload`
//! needs a cluster whose daemon has `--ssd_path` and whose master has `--enable_offload`, and
//! runs only with MC_TEST_SSD=1 (see README.md).
#![deny(warnings)]

mod common;

use common::{cluster_env, connect, pattern, prefix};
use mooncake_store::{Error, ReplicaKind, SsdOffload};

const MIB: u64 = 1 << 20;

#[test]
fn memory_replica_is_described() {
    let s = connect(16 * MIB);
    let key = prefix("desc") + "one";
    s.put(&key, &pattern(1000, 1)).unwrap();
    let replicas = s.get_replica_desc(&key).unwrap();
    assert_eq!(replicas.len(), 1);
    let r = &replicas[0];
    assert!(r.is_memory_replica() && !r.is_disk_replica());
    assert_eq!(r.kind, ReplicaKind::Memory);
    assert_eq!(r.status, 1);
    assert_eq!(r.location, s.get_hostname().unwrap());
    assert_eq!(r.location, cluster_env("MOONCAKE_HOSTNAME"));
    assert_eq!(r.size, 1000);
    // Listing read no bytes and left the value alone.
    assert_eq!(s.get(&key).unwrap().unwrap(), pattern(1000, 1));
}

#[test]
fn misses_and_bad_keys() {
    let s = connect(16 * MIB);
    assert_eq!(s.get_replica_desc(prefix("desc") + "never"), Err(Error::ObjectNotFound));
    assert_eq!(s.get_replica_desc(""), Err(Error::InvalidParams));
    assert_eq!(s.get_replica_desc("a\0b"), Err(Error::InvalidParams));
}

#[test]
fn batch_answers_every_key_in_order() {
    let s = connect(16 * MIB);
    let keys: Vec<String> = (0..2100).map(|i| format!("{}batch-{i}", prefix("desc"))).collect();
    let present = [0usize, 1023, 1024, 2099];
    for &i in &present {
        s.put(&keys[i], keys[i].as_bytes()).unwrap();
    }
    let mut asked: Vec<&str> = keys.iter().map(String::as_str).collect();
    asked.push("bad\0key");
    let results = s.batch_get_replica_desc(&asked).unwrap();
    assert_eq!(results.len(), asked.len());
    for (i, result) in results.iter().enumerate() {
        if present.contains(&i) {
            let replicas = result.as_ref().unwrap();
            assert_eq!(replicas.len(), 1, "key {i}");
            assert_eq!(replicas[0].size, keys[i].len() as u64);
            assert!(replicas[0].is_memory_replica());
        } else if i == keys.len() {
            assert_eq!(result, &Err(Error::InvalidParams));
        } else {
            assert_eq!(result, &Err(Error::ObjectNotFound), "key {i}");
        }
    }
    let none: [&str; 0] = [];
    assert_eq!(s.batch_get_replica_desc(&none), Ok(vec![]));
}

#[test]
fn offload_modes_keep_puts_working() {
    let s = connect(16 * MIB);
    for (n, mode) in [SsdOffload::On, SsdOffload::Off, SsdOffload::Default].into_iter().enumerate() {
        s.set_ssd_offload(mode).unwrap();
        let key = format!("{}mode-{n}", prefix("desc"));
        let value = pattern(4096, n as u8);
        s.put(&key, &value).unwrap();
        s.upsert(&key, &value).unwrap();
        assert_eq!(s.get(&key).unwrap().unwrap(), value);
        assert!(s.get_replica_desc(&key).unwrap()[0].is_memory_replica());
    }
    assert_eq!(SsdOffload::default(), SsdOffload::Default);
}

#[test]
fn disk_replica_appears_with_offload() {
    if std::env::var("MC_TEST_SSD").as_deref() != Ok("1") {
        eprintln!("skipped: needs MC_TEST_SSD=1 and a cluster with --ssd_path and --enable_offload");
        return;
    }
    let s = connect(16 * MIB);
    s.set_ssd_offload(SsdOffload::On).unwrap();
    let key = prefix("desc") + "disk";
    s.put(&key, &pattern(4096, 9)).unwrap();
    // Generous: a loaded machine offloads late.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let disk = loop {
        let replicas = s.get_replica_desc(&key).unwrap();
        if let Some(d) = replicas.into_iter().find(|r| r.is_disk_replica()) {
            break d;
        }
        assert!(std::time::Instant::now() < deadline, "no disk replica within 60 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(disk.kind, ReplicaKind::Disk);
    assert_eq!(disk.location, s.get_hostname().unwrap());
    assert_eq!(disk.size, 4096);
}
