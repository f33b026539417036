//! Tenants (`Store::connect_as`, `Store::setup_as`, i.e. `mooncake_store_set_tenant`): the
//! same key in two tenants is two objects, and no removal of one reaches the other's keys
//! or the default tenant's. A tenant's `remove_all` is its own, so these tests may run
//! beside the others.
#![deny(warnings)]

mod common;

use common::{cluster_env, prefix};
use mooncake_store::{Error, Health, Store};

const MIB: u64 = 1 << 20;

/// A tenant id of this test run's own.
fn tenant(name: &str) -> String {
    format!("rs-{}-{name}", std::process::id())
}

#[test]
fn same_key_in_two_tenants_is_two_objects() {
    cluster_env("MOONCAKE_SOCKET");
    let a = Store::connect_as(None, 16 * MIB, &tenant("a")).unwrap();
    let b = Store::connect_as(None, 16 * MIB, &tenant("b")).unwrap();
    let plain = Store::connect(None, 16 * MIB).unwrap();
    let key = prefix("tenants") + "shared";
    a.put(&key, b"of a").unwrap();
    b.put(&key, b"of b").unwrap();
    assert_eq!(a.get(&key).unwrap().unwrap(), b"of a");
    assert_eq!(b.get(&key).unwrap().unwrap(), b"of b");
    assert_eq!(plain.get(&key), Ok(None));

    // Forced: the reads above hold read leases.
    a.remove(&key, true).unwrap();
    assert_eq!(b.get(&key).unwrap().unwrap(), b"of b");
    a.put(key.clone() + "-2", b"of a").unwrap();
    assert_eq!(a.remove_by_regex(&format!("^{}", prefix("tenants")), true), Ok(1));
    assert_eq!(a.remove_all(true), Ok(0));
    assert_eq!(b.get(&key).unwrap().unwrap(), b"of b");
    assert_eq!(b.remove_all(true), Ok(1));
    assert_eq!(b.is_exist(&key), Ok(false));
}

#[test]
fn setup_as_names_the_tenant() {
    let master = cluster_env("MOONCAKE_MASTER");
    let key = prefix("tenants") + "via-setup";
    let s = Store::setup_as("", "", 0, MIB, "", "", &master, &tenant("setup")).unwrap();
    s.put(&key, b"tenant's").unwrap();
    let again = Store::connect_as(None, MIB, &tenant("setup")).unwrap();
    assert_eq!(again.get(&key).unwrap().unwrap(), b"tenant's");
    assert_eq!(again.remove_all(true), Ok(1));
}

#[test]
fn malformed_tenant_ids_are_refused() {
    cluster_env("MOONCAKE_SOCKET");
    let too_long = "x".repeat(65);
    for bad in ["a b", "a/b", "é", too_long.as_str(), "a\0b"] {
        assert_eq!(
            Store::connect_as(None, MIB, bad).err(),
            Some(Error::InvalidParams),
            "{bad:?}"
        );
    }
    let longest = Store::connect_as(None, MIB, &"x".repeat(64)).unwrap();
    assert_eq!(longest.health_check(), Ok(Health::Ok));
}
