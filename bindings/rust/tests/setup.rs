//! `Store::setup`, Mooncake's entry. It lives in a test binary of its own: a setup with a
//! `global_segment_size` mounts a segment that is dropped, with every object placed on it,
//! when the store closes, which would make objects of tests running alongside vanish. Cargo
//! runs test binaries one after another.
#![deny(warnings)]

mod common;

use common::{cluster_env, prefix};
use mooncake_store::{Error, Health, Store};

const MIB: u64 = 1 << 20;

#[test]
fn setup_is_the_mooncake_compatible_entry() {
    let master = cluster_env("MOONCAKE_MASTER");
    let store = Store::setup("127.0.0.1", "", 0, 16 * MIB, "tcp", "", &master).unwrap();
    assert_eq!(store.health_check(), Ok(Health::Ok));
    let key = prefix("setup") + "k";
    store.put(&key, b"through setup").unwrap();
    assert_eq!(store.get(&key).unwrap().unwrap(), b"through setup");

    // An extra segment mounted for this store only, dropped with it.
    let mounted = Store::setup("", "", 32 * MIB, MIB, "", "", "").unwrap();
    assert_eq!(mounted.health_check(), Ok(Health::Ok));
    drop(mounted);

    let wrong = Store::setup("", "", 0, MIB, "", "", "127.0.0.1:1");
    assert_eq!(wrong.err(), Some(Error::InvalidParams));
    assert_eq!(
        Store::setup("a\0", "", 0, MIB, "", "", "").err(),
        Some(Error::InvalidParams)
    );
}
