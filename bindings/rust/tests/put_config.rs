//! The sized put config of ABI 4 and 5 (`PutConfig`) and the calls taking it, against a real
//! master and daemon (see tests/common).
#![deny(warnings)]

mod common;

use std::sync::Arc;
use std::thread;

use common::{connect, pattern, prefix};
use mooncake_store::{Error, PutConfig, SoftPinAction};

const MIB: u64 = 1 << 20;

#[test]
fn ex_puts_store_and_refuse_what_they_must() {
    let store = connect(16 * MIB);
    let p = prefix("ex");
    let value = pattern(4096, 1);
    let mut c = PutConfig::default();
    store.put_ex(format!("{p}put"), &value, &c).unwrap();
    assert_eq!(store.get(format!("{p}put")).unwrap(), Some(value.clone()));
    store.put_from_ex(format!("{p}from"), &value, &c).unwrap();
    assert_eq!(store.get(format!("{p}from")).unwrap(), Some(value.clone()));
    let newer = pattern(100, 2);
    store.upsert_ex(format!("{p}put"), &newer, &c).unwrap();
    assert_eq!(store.get(format!("{p}put")).unwrap(), Some(newer));

    c.soft_pin_action = SoftPinAction::Enable;
    c.soft_pin_ttl_ms = Some(60_000);
    c.with_hard_pin = true;
    c.prefer_alloc_in_same_node = true;
    c.group_ids = Some(vec![String::new()]);
    c.data_type = 1;
    store.put_ex(format!("{p}pinned"), &value, &c).unwrap();

    let mut bad = PutConfig::default();
    bad.soft_pin_ttl_ms = Some(10); // a TTL needs Enable
    assert_eq!(store.put_ex(format!("{p}bad"), &value, &bad), Err(Error::InvalidParams));
    for set in [
        |c: &mut PutConfig| c.nof_replica_num = 1,
        |c: &mut PutConfig| c.dfs_replica_num = 1,
        |c: &mut PutConfig| c.preferred_nof_segments = vec!["nof".into()],
        |c: &mut PutConfig| c.host_id = "node".into(),
    ] {
        let mut c = PutConfig::default();
        set(&mut c);
        assert_eq!(store.put_ex(format!("{p}bad"), &value, &c), Err(Error::NotSupported));
    }
    bad = PutConfig::default();
    bad.replica_num = 0;
    assert_eq!(store.put_ex(format!("{p}bad"), &value, &bad), Err(Error::InvalidParams));
    bad = PutConfig::default();
    bad.group_ids = Some(vec!["g".into(), "h".into()]); // two group ids for one key
    assert_eq!(store.put_ex(format!("{p}bad"), &value, &bad), Err(Error::InvalidParams));
    assert_eq!(store.is_exist(format!("{p}bad")), Ok(false));
    // A group id names the object's group.
    let mut grouped = PutConfig::default();
    grouped.group_ids = Some(vec![format!("{p}group")]);
    store.put_ex(format!("{p}grouped"), &value, &grouped).unwrap();
    assert_eq!(store.get(format!("{p}grouped")).unwrap(), Some(value.clone()));
}

#[test]
fn batch_put_and_upsert_from() {
    let store = connect(16 * MIB);
    let p = prefix("batch");
    let keys: Vec<String> = (0..3).map(|i| format!("{p}{i}")).collect();
    let first: Vec<Vec<u8>> = (0..3).map(|i| pattern(1000, i)).collect();
    let c = PutConfig::default();
    let r = store.batch_put_from_ex(&keys, &first, &c).unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    let second: Vec<Vec<u8>> = (0..3).map(|i| pattern(2000, 10 + i)).collect();
    let r = store.batch_upsert_from(&keys, &second, &c).unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    for (k, v) in keys.iter().zip(&second) {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(store.batch_upsert_from(&keys, &second[..2], &c), Err(Error::InvalidParams));
    let r = store
        .batch_upsert_from(&[keys[0].as_str(), "bad\0key"], &second[..2], &c)
        .unwrap();
    assert_eq!(r, vec![Ok(()), Err(Error::InvalidParams)]);
    let empty: [&str; 0] = [];
    let no_values: [&[u8]; 0] = [];
    assert_eq!(store.batch_upsert_from(&empty, &no_values, &c), Ok(vec![]));
    let mut unsupported = PutConfig::default();
    unsupported.dfs_replica_num = 1;
    let r = store.batch_upsert_from(&keys, &second, &unsupported).unwrap();
    assert!(r.iter().all(|r| *r == Err(Error::NotSupported)), "{r:?}");
}

#[test]
fn one_writer_many_readers_see_whole_values() {
    let store = Arc::new(connect(32 * MIB));
    let p = prefix("threads");
    let keys: Vec<String> = (0..4).map(|i| format!("{p}{i}")).collect();
    let size = 32 * 1024;
    let c = PutConfig::default();
    let initial: Vec<Vec<u8>> = keys.iter().map(|_| vec![0u8; size]).collect();
    store.batch_upsert_from(&keys, &initial, &c).unwrap();
    let writer = {
        let (store, keys, c) = (store.clone(), keys.clone(), c.clone());
        thread::spawn(move || {
            for version in 1..=30u8 {
                let values: Vec<Vec<u8>> = keys.iter().map(|_| vec![version; size]).collect();
                for r in store.batch_upsert_from(&keys, &values, &c).unwrap() {
                    r.unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (store, keys) = (store.clone(), keys.clone());
            thread::spawn(move || {
                for _ in 0..50 {
                    for k in &keys {
                        let v = store.get(k).unwrap().unwrap();
                        assert_eq!(v.len(), size);
                        assert!(v.iter().all(|&b| b == v[0]), "a mixed value");
                    }
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(store.get(&keys[0]).unwrap(), Some(vec![30u8; size]));
}
