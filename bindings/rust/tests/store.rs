//! Every method of `Store` against a real master and daemon (see tests/common).
#![deny(warnings)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::thread;

use common::{cluster_env, connect, pattern, prefix};
use mooncake_store::{Error, Health, PoolBuf, ReplicateConfig, Store};

const MIB: u64 = 1 << 20;

#[test]
fn connect_health_and_hostname() {
    let store = connect(16 * MIB);
    assert_eq!(store.health_check(), Ok(Health::Ok));
    assert_eq!(
        store.get_hostname().unwrap(),
        cluster_env("MOONCAKE_HOSTNAME")
    );

    let socket = cluster_env("MOONCAKE_SOCKET");
    let explicit = Store::connect(Some(Path::new(&socket)), 0).unwrap();
    assert_eq!(explicit.health_check(), Ok(Health::Ok));
    assert!(format!("{explicit:?}").starts_with("Store"));

    let missing = Path::new("/nonexistent/dir/mooncaked.sock");
    assert_eq!(
        Store::connect(Some(missing), MIB).err(),
        Some(Error::RpcFail)
    );
}

#[test]
fn put_get_and_key_forms() {
    let store = connect(16 * MIB);
    let p = prefix("keys");
    let value = pattern(1000, 1);

    // &str, String, &String, &[u8], Vec<u8>, byte arrays and non-UTF-8 bytes all work.
    store.put(format!("{p}str").as_str(), &value).unwrap();
    store.put(format!("{p}string"), &value).unwrap();
    let bytes = [p.as_bytes(), b"\xff\x01binary"].concat();
    store.put(&bytes[..], &value).unwrap();
    store.put(bytes.clone(), &value).unwrap();
    for key in [
        format!("{p}str").into_bytes(),
        format!("{p}string").into_bytes(),
        bytes,
    ] {
        assert_eq!(store.get(&key).unwrap().as_deref(), Some(&value[..]));
        assert_eq!(store.get_size(&key).unwrap(), 1000);
        assert!(store.is_exist(&key).unwrap());
    }

    // A one-byte value, and a key of exactly 4096 bytes.
    let long = "k".repeat(4096);
    store.put(&long, b"x").unwrap();
    assert_eq!(store.get(&long).unwrap().unwrap(), b"x");
}

#[test]
fn misses() {
    let store = connect(16 * MIB);
    let key = prefix("miss") + "nothing";
    assert_eq!(store.get(&key), Ok(None));
    assert_eq!(store.get_size(&key), Err(Error::ObjectNotFound));
    let mut buf = vec![0u8; 64];
    assert_eq!(store.get_into(&key, &mut buf), Err(Error::ObjectNotFound));
    assert_eq!(store.is_exist(&key), Ok(false));
    assert_eq!(store.remove(&key, false), Err(Error::ObjectNotFound));
    assert_eq!(store.remove(&key, true), Err(Error::ObjectNotFound));
    // Errors display as mooncake_store_strerror names them.
    let err = store.get_size(&key).unwrap_err();
    assert_eq!(err.to_string(), "object not found");
    assert_eq!(err.code(), -704);
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert_eq!(boxed.to_string(), "object not found");
}

#[test]
fn invalid_keys_and_values_are_errors() {
    let store = connect(16 * MIB);
    let nul = b"rs-bad\0key";
    let mut buf = vec![0u8; 16];
    assert_eq!(store.put(nul, b"v"), Err(Error::InvalidParams));
    assert_eq!(store.put_from(nul, b"v"), Err(Error::InvalidParams));
    assert_eq!(store.upsert(nul, b"v"), Err(Error::InvalidParams));
    assert_eq!(store.get(nul), Err(Error::InvalidParams));
    assert_eq!(store.get_into(nul, &mut buf), Err(Error::InvalidParams));
    assert_eq!(store.get_size(nul), Err(Error::InvalidParams));
    assert_eq!(store.is_exist(nul), Err(Error::InvalidParams));
    assert_eq!(store.remove(nul, true), Err(Error::InvalidParams));
    assert_eq!(
        store.remove_by_regex("a\0", true),
        Err(Error::InvalidParams)
    );
    // The store with the prefix of the NUL key was never written.
    assert_eq!(store.get("rs-bad"), Ok(None));

    // Empty and over-long keys, empty values: the library's -600.
    assert_eq!(store.put("", b"v"), Err(Error::InvalidParams));
    assert_eq!(store.put("k".repeat(4097), b"v"), Err(Error::InvalidParams));
    assert_eq!(
        store.put(prefix("empty") + "v", b""),
        Err(Error::InvalidParams)
    );
    assert_eq!(store.is_exist(""), Err(Error::InvalidParams));
    assert_eq!(store.remove_by_regex("(", false), Err(Error::InvalidParams));
}

#[test]
fn put_never_overwrites_and_upsert_does() {
    let store = connect(16 * MIB);
    let key = prefix("overwrite") + "k";
    store.put(&key, b"first").unwrap();
    store.put(&key, b"second, and longer").unwrap(); // Ok, and the old value stays
    assert_eq!(store.get(&key).unwrap().unwrap(), b"first");
    store.put_from(&key, b"third").unwrap();
    assert_eq!(store.get(&key).unwrap().unwrap(), b"first");

    store.upsert(&key, b"replaced, and longer").unwrap();
    assert_eq!(store.get(&key).unwrap().unwrap(), b"replaced, and longer");
    store
        .upsert_with(&key, b"short", &ReplicateConfig::default())
        .unwrap();
    assert_eq!(store.get(&key).unwrap().unwrap(), b"short");
    assert_eq!(store.get_size(&key), Ok(5));
    // upsert of a new key creates it.
    let fresh = prefix("overwrite") + "fresh";
    store.upsert(&fresh, b"new").unwrap();
    assert_eq!(store.get(&fresh).unwrap().unwrap(), b"new");
}

#[test]
fn get_into_buffer_sizes() {
    let store = connect(16 * MIB);
    let key = prefix("get-into") + "k";
    let value = pattern(4096, 2);
    store.put(&key, &value).unwrap();

    let mut exact = vec![0u8; 4096];
    assert_eq!(store.get_into(&key, &mut exact), Ok(4096));
    assert_eq!(exact, value);
    let mut larger = vec![0u8; 10_000];
    assert_eq!(store.get_into(&key, &mut larger), Ok(4096));
    assert_eq!(&larger[..4096], &value[..]);
    let mut small = vec![0u8; 4095];
    assert_eq!(store.get_into(&key, &mut small), Err(Error::InvalidParams));
    assert_eq!(store.get_into(&key, &mut []), Err(Error::InvalidParams));
}

#[test]
fn values_larger_than_the_pool() {
    // A 1 MiB pool carries 9 MiB values: the library streams them through it in chunks.
    let store = connect(MIB);
    let p = prefix("large");
    let value = pattern(9 * MIB as usize + 123, 3);
    store.put(p.clone() + "put", &value).unwrap();
    assert_eq!(store.get_size(p.clone() + "put"), Ok(value.len() as u64));
    assert!(store.get(p.clone() + "put").unwrap().unwrap() == value);
    let mut out = vec![0u8; value.len()];
    assert_eq!(store.get_into(p.clone() + "put", &mut out), Ok(value.len()));
    assert!(out == value);

    // Batches too.
    let other = pattern(3 * MIB as usize, 4);
    let keys = [p.clone() + "b0", p.clone() + "b1"];
    let results = store
        .batch_put_from(&keys, &[&value[..], &other[..]])
        .unwrap();
    assert_eq!(results, vec![Ok(()), Ok(())]);
    let mut bufs = vec![vec![0u8; value.len()], vec![0u8; other.len()]];
    let results = store.batch_get_into(&keys, &mut bufs).unwrap();
    assert_eq!(results, vec![Ok(value.len()), Ok(other.len())]);
    assert!(bufs[0] == value && bufs[1] == other);
}

#[test]
fn no_pool_allows_queries_only() {
    let writer = connect(16 * MIB);
    let key = prefix("no-pool") + "k";
    writer.put(&key, b"v").unwrap();

    let store = connect(0);
    assert_eq!(
        store.put(prefix("no-pool") + "x", b"v"),
        Err(Error::InvalidParams)
    );
    assert_eq!(
        store.get_into(&key, &mut [0u8; 8]),
        Err(Error::InvalidParams)
    );
    assert_eq!(store.alloc(64).err(), Some(Error::NoAvailableHandle));
    assert_eq!(store.is_exist(&key), Ok(true));
    assert_eq!(store.get_size(&key), Ok(1));
    assert_eq!(store.remove(&key, true), Ok(()));
}

#[test]
fn pool_buf_zero_copy_round_trip() {
    const POOL: u64 = 4 * MIB;
    let store = connect(POOL);
    let p = prefix("zero-copy");

    // The whole pool belongs to one PoolBuf: nothing is left for staging, so only
    // zero-copy puts and gets (which pass the pool pointer) can succeed.
    let mut buf: PoolBuf<'_> = store.alloc(POOL as usize).unwrap();
    assert_eq!(buf.len(), POOL as usize);
    assert!(!buf.is_empty());
    assert_eq!(buf.as_ptr(), buf[..].as_ptr());
    let value = pattern(MIB as usize, 5);
    buf[..value.len()].copy_from_slice(&value);

    store
        .put_from(p.clone() + "a", &buf[..value.len()])
        .unwrap();
    assert_eq!(
        store.put(p.clone() + "staged", &value),
        Err(Error::NoAvailableHandle)
    );
    assert_eq!(store.is_exist(p.clone() + "staged"), Ok(false));

    // get_into the other half of the same pool block.
    let (_, back) = buf.split_at_mut(2 * MIB as usize);
    assert_eq!(store.get_into(p.clone() + "a", back), Ok(value.len()));
    assert_eq!(&back[..value.len()], &value[..]);
    let mut heap = vec![0u8; value.len()];
    assert_eq!(
        store.get_into(p.clone() + "a", &mut heap),
        Err(Error::NoAvailableHandle)
    );

    // Batches pass pool pointers too.
    let keys = [p.clone() + "b0", p.clone() + "b1"];
    let m = MIB as usize;
    buf[m..m + 100].fill(42);
    let (x, y) = buf.split_at(m);
    assert_eq!(
        store.batch_put_from(&keys, &[x, &y[..100]]).unwrap(),
        vec![Ok(()), Ok(())]
    );
    {
        // Swapped: b0 (value) into [1 MiB, 2 MiB), b1 (forty-twos) into [0, 100).
        let (x, y) = buf.split_at_mut(m);
        let mut outs: [&mut [u8]; 2] = [&mut y[..m], &mut x[..100]];
        assert_eq!(
            store.batch_get_into(&keys, &mut outs).unwrap(),
            vec![Ok(m), Ok(100)]
        );
    }
    assert_eq!(&buf[m..2 * m], &value[..]);
    assert!(buf[..100].iter().all(|&b| b == 42));

    // Dropping the buffer returns its memory: the whole pool can be allocated again, and
    // once that is dropped too, staged (copying) puts and gets work again.
    drop(buf);
    let mut again = store.alloc(POOL as usize).unwrap();
    assert!(format!("{again:?}").contains("len: 4194304"));
    assert_eq!(store.get_into(p.clone() + "a", &mut again), Ok(value.len()));
    assert_eq!(&again[..value.len()], &value[..]);
    drop(again);
    assert_eq!(store.get(p.clone() + "a").unwrap().unwrap(), value);
    store.put(p.clone() + "staged", &value).unwrap();
    assert_eq!(store.get(p.clone() + "staged").unwrap().unwrap(), value);
}

#[test]
fn pool_bufs_in_collections_and_alloc_failures() {
    let store = connect(4 * MIB);
    let p = prefix("pool-vec");
    let mut bufs: Vec<PoolBuf<'_>> = (0..3).map(|_| store.alloc(1000).unwrap()).collect();
    for (i, b) in bufs.iter_mut().enumerate() {
        b.fill(i as u8 + 1);
    }
    let keys: Vec<String> = (0..3).map(|i| format!("{p}{i}")).collect();
    assert_eq!(store.batch_put_from(&keys, &bufs).unwrap(), vec![Ok(()); 3]);
    for b in bufs.iter_mut() {
        b.fill(0);
    }
    assert_eq!(
        store.batch_get_into(&keys, &mut bufs).unwrap(),
        vec![Ok(1000); 3]
    );
    for (i, b) in bufs.iter().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8 + 1));
    }
    // More than the pool, and a zero size, cannot be allocated.
    assert_eq!(
        store.alloc(8 * MIB as usize).err(),
        Some(Error::NoAvailableHandle)
    );
    assert_eq!(store.alloc(0).err(), Some(Error::InvalidParams));
}

#[test]
fn batches() {
    let store = connect(16 * MIB);
    let p = prefix("batch");
    let keys: Vec<String> = (0..10).map(|i| format!("{p}{i}")).collect();
    let values: Vec<Vec<u8>> = (0..10).map(|i| pattern(100 + i * 10, i as u8)).collect();

    assert_eq!(
        store.batch_put_from(&keys, &values).unwrap(),
        vec![Ok(()); 10]
    );
    let mut exists = store.batch_is_exist(&keys).unwrap();
    assert_eq!(exists, vec![Ok(true); 10]);

    let mut bufs: Vec<Vec<u8>> = (0..10).map(|_| vec![0u8; 200]).collect();
    let got = store.batch_get_into(&keys, &mut bufs).unwrap();
    for i in 0..10 {
        assert_eq!(got[i], Ok(values[i].len()));
        assert_eq!(&bufs[i][..values[i].len()], &values[i][..]);
    }

    // Per-entry results: a miss, a NUL key (never sent), a small buffer, an existing key.
    let mixed: Vec<Vec<u8>> = vec![
        format!("{p}missing").into_bytes(),
        b"rs-nul\0".to_vec(),
        keys[9].clone().into_bytes(),
        keys[0].clone().into_bytes(),
    ];
    let mut bufs: Vec<Vec<u8>> = vec![vec![0; 300], vec![0; 300], vec![0; 10], vec![0; 300]];
    assert_eq!(
        store.batch_get_into(&mixed, &mut bufs).unwrap(),
        vec![
            Err(Error::ObjectNotFound),
            Err(Error::InvalidParams),
            Err(Error::InvalidParams),
            Ok(100)
        ]
    );
    exists = store.batch_is_exist(&mixed).unwrap();
    assert_eq!(
        exists,
        vec![Ok(false), Err(Error::InvalidParams), Ok(true), Ok(true)]
    );
    let vals: [&[u8]; 4] = [b"new", b"nul", b"", b"not overwritten"];
    assert_eq!(
        store.batch_put_from(&mixed, &vals).unwrap(),
        vec![
            Ok(()),
            Err(Error::InvalidParams),
            Err(Error::InvalidParams),
            Ok(())
        ]
    );
    assert_eq!(store.get(&mixed[0]).unwrap().unwrap(), b"new");
    assert_eq!(store.get(&keys[0]).unwrap().unwrap(), values[0]);

    // With a config; empty batches; lists of different lengths.
    let config = ReplicateConfig {
        preferred_segments: vec![cluster_env("MOONCAKE_HOSTNAME")],
        ..ReplicateConfig::default()
    };
    let ck = [format!("{p}cfg")];
    assert_eq!(
        store.batch_put_from_with(&ck, &[b"c"], &config).unwrap(),
        vec![Ok(())]
    );
    let none: [&str; 0] = [];
    let no_values: [&[u8]; 0] = [];
    assert_eq!(store.batch_put_from(&none, &no_values).unwrap(), vec![]);
    assert_eq!(store.batch_is_exist(&none).unwrap(), vec![]);
    let mut no_bufs: [Vec<u8>; 0] = [];
    assert_eq!(store.batch_get_into(&none, &mut no_bufs).unwrap(), vec![]);
    assert_eq!(
        store.batch_put_from(&keys, &values[..3]),
        Err(Error::InvalidParams)
    );
    assert_eq!(
        store.batch_get_into(&keys, &mut no_bufs),
        Err(Error::InvalidParams)
    );
}

#[test]
fn replicate_config() {
    let store = connect(16 * MIB);
    let p = prefix("config");
    let config = ReplicateConfig {
        replica_num: 1,
        with_soft_pin: true,
        with_hard_pin: false,
        preferred_segments: vec![cluster_env("MOONCAKE_HOSTNAME")],
    };
    store
        .put_with(p.clone() + "a", b"pinned softly", &config)
        .unwrap();
    store
        .put_from_with(p.clone() + "b", b"from", &config)
        .unwrap();
    assert_eq!(
        store.get(p.clone() + "a").unwrap().unwrap(),
        b"pinned softly"
    );
    assert_eq!(store.get(p.clone() + "b").unwrap().unwrap(), b"from");

    let zero = ReplicateConfig {
        replica_num: 0,
        ..ReplicateConfig::default()
    };
    assert_eq!(
        store.put_with(p.clone() + "z", b"v", &zero),
        Err(Error::InvalidParams)
    );
    let nul = ReplicateConfig {
        preferred_segments: vec!["x\0".into()],
        ..ReplicateConfig::default()
    };
    assert_eq!(
        store.put_with(p.clone() + "n", b"v", &nul),
        Err(Error::InvalidParams)
    );
}

#[test]
fn batch_remove_answers_per_key() {
    let store = connect(16 * MIB);
    let p = prefix("batch-remove");
    store.put(p.clone() + "free", b"v").unwrap();
    store.put(p.clone() + "read", b"v").unwrap();
    assert!(store.get(p.clone() + "read").unwrap().is_some());
    let keys = [p.clone() + "free", p.clone() + "missing", p.clone() + "read", String::new()];
    assert_eq!(
        store.batch_remove(&keys, false).unwrap(),
        vec![
            Ok(()),
            Err(Error::ObjectNotFound),
            Err(Error::ObjectHasLease),
            Err(Error::InvalidParams)
        ]
    );
    assert_eq!(store.is_exist(p.clone() + "read"), Ok(true));
    assert_eq!(store.batch_remove(&keys[2..3], true).unwrap(), vec![Ok(())]);
    assert_eq!(store.is_exist(p.clone() + "read"), Ok(false));
}

#[test]
fn remove_and_leases_and_pins() {
    let store = connect(16 * MIB);
    let p = prefix("remove");

    // Never read: removable without force.
    store.put(p.clone() + "plain", b"v").unwrap();
    assert_eq!(store.remove(p.clone() + "plain", false), Ok(()));
    assert_eq!(store.is_exist(p.clone() + "plain"), Ok(false));

    // A read takes a lease (10 s by default): remove without force is refused.
    store.put(p.clone() + "read", b"v").unwrap();
    assert!(store.get(p.clone() + "read").unwrap().is_some());
    assert_eq!(
        store.remove(p.clone() + "read", false),
        Err(Error::ObjectHasLease)
    );
    assert_eq!(store.remove(p.clone() + "read", true), Ok(()));
    assert_eq!(store.get(p.clone() + "read"), Ok(None));

    // Hard-pinned objects are kept without force.
    let pin = ReplicateConfig {
        with_hard_pin: true,
        ..ReplicateConfig::default()
    };
    store.put_with(p.clone() + "pinned", b"v", &pin).unwrap();
    assert_eq!(
        store.remove(p.clone() + "pinned", false),
        Err(Error::UnavailableInCurrentStatus)
    );
    assert_eq!(store.is_exist(p.clone() + "pinned"), Ok(true));
    assert_eq!(store.remove(p.clone() + "pinned", true), Ok(()));

    // remove_by_regex counts what it removed.
    for i in 0..5 {
        store.put(format!("{p}re-{i}"), b"v").unwrap();
    }
    store.put(p.clone() + "keep", b"v").unwrap();
    assert_eq!(
        store.remove_by_regex(&format!("^{p}re-[0-9]$"), false),
        Ok(5)
    );
    assert_eq!(store.remove_by_regex(&format!("^{p}re-"), false), Ok(0));
    assert_eq!(store.is_exist(p.clone() + "keep"), Ok(true));
}

#[test]
fn register_buffer_checks_ranges() {
    let store = connect(16 * MIB);
    let key = prefix("register") + "k";
    store.put(&key, &pattern(100, 6)).unwrap();
    let mut memory = vec![0u8; 1000];
    store.register_buffer(&memory[..500]).unwrap();
    assert_eq!(
        store.register_buffer(&memory[100..200]),
        Err(Error::InvalidParams)
    );
    // Inside the registered range: fine; starting inside but running past its end: -600.
    assert_eq!(store.get_into(&key, &mut memory[..500]), Ok(100));
    assert_eq!(
        store.get_into(&key, &mut memory[400..]),
        Err(Error::InvalidParams)
    );
    store.unregister_buffer(&memory[..500]).unwrap();
    assert_eq!(
        store.unregister_buffer(&memory[..500]),
        Err(Error::InvalidParams)
    );
    assert_eq!(store.get_into(&key, &mut memory[400..]), Ok(100));
}

#[test]
fn close_is_safe_twice_and_keeps_pool_bufs_readable() {
    let store = connect(16 * MIB);
    let key = prefix("close") + "k";
    let mut buf = store.alloc(64).unwrap();
    buf.fill(7);
    store.put_from(&key, &buf).unwrap();

    assert_eq!(store.close(), Ok(()));
    assert_eq!(store.health_check(), Ok(Health::NotConnected));
    assert_eq!(store.put(&key, b"v"), Err(Error::InvalidParams));
    assert_eq!(store.get(&key), Err(Error::InvalidParams));
    assert_eq!(store.alloc(8).err(), Some(Error::NoAvailableHandle));
    assert!(store.get_hostname().is_err());
    assert_eq!(store.close(), Ok(()));
    // The pool stays mapped until the store is dropped.
    assert!(buf.iter().all(|&b| b == 7));
    buf[0] = 8;
    drop(buf);
    drop(store);

    let reader = connect(MIB);
    assert_eq!(reader.get(&key).unwrap().unwrap(), vec![7u8; 64]);
}

#[test]
fn eight_threads_share_one_store() {
    let store = connect(32 * MIB);
    let p = prefix("threads");
    let shared = p.clone() + "shared";
    store.put(&shared, &pattern(50_000, 99)).unwrap();

    thread::scope(|s| {
        for t in 0..8u8 {
            let (store, p, shared) = (&store, &p, &shared);
            s.spawn(move || {
                let expect_shared = pattern(50_000, 99);
                let mut pool = store.alloc(64 * 1024).unwrap();
                for i in 0..40usize {
                    let key = format!("{p}{t}-{i}");
                    let value = pattern(
                        1000 + i * 997 % 60_000,
                        t.wrapping_mul(40).wrapping_add(i as u8),
                    );
                    store.put(&key, &value).unwrap();
                    assert_eq!(store.get(&key).unwrap().unwrap(), value);
                    assert_eq!(store.get_size(&key), Ok(value.len() as u64));
                    assert_eq!(store.get_into(&key, &mut pool), Ok(value.len()));
                    assert_eq!(&pool[..value.len()], &value[..]);
                    let zkey = key.clone() + "-z";
                    store.put_from(&zkey, &pool[..value.len()]).unwrap();
                    assert_eq!(
                        store.batch_is_exist(&[&key, &zkey]).unwrap(),
                        vec![Ok(true); 2]
                    );
                    assert_eq!(store.get(shared).unwrap().unwrap(), expect_shared);
                    store.remove(&key, true).unwrap();
                    assert_eq!(store.get(&key), Ok(None));
                }
            });
        }
    });
    assert_eq!(
        store.remove_by_regex(&format!("^{p}[0-9]-[0-9]+-z$"), true),
        Ok(8 * 40)
    );

    // An Arc<Store> moves into 'static threads as well.
    let store = Arc::new(store);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            let key = format!("{p}arc-{t}");
            thread::spawn(move || {
                store.put(&key, key.as_bytes()).unwrap();
                store.get(&key).unwrap().unwrap() == key.as_bytes()
            })
        })
        .collect();
    assert!(handles.into_iter().all(|h| h.join().unwrap()));
}
