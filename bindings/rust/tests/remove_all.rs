//! `remove_all` empties the default tenant, which every other test binary but
//! tests/tenants.rs uses, so it lives in a test binary of its own: cargo runs test binaries
//! one after another, never while tests/store.rs runs.
#![deny(warnings)]

mod common;

use common::{connect, prefix};
use mooncake_store::{Error, ReplicateConfig};

#[test]
fn remove_all_keeps_leased_and_pinned_objects_unless_forced() {
    let store = connect(1 << 20);
    let p = prefix("remove-all");
    let plain: Vec<String> = (0..10).map(|i| format!("{p}plain-{i}")).collect();
    for key in &plain {
        store.put(key, b"v").unwrap();
    }
    let pin = ReplicateConfig {
        with_hard_pin: true,
        ..ReplicateConfig::default()
    };
    store.put_with(p.clone() + "pinned", b"v", &pin).unwrap();
    store.put(p.clone() + "leased", b"v").unwrap();
    assert!(store.get(p.clone() + "leased").unwrap().is_some()); // a read takes a lease

    // Without force: the ten plain objects (and whatever else is unleased) go.
    let removed = store.remove_all(false).unwrap();
    assert!(removed >= 10, "removed {removed}");
    assert_eq!(store.batch_is_exist(&plain).unwrap(), vec![Ok(false); 10]);
    assert_eq!(store.is_exist(p.clone() + "pinned"), Ok(true));
    assert_eq!(store.is_exist(p.clone() + "leased"), Ok(true));

    // With force: everything.
    let removed = store.remove_all(true).unwrap();
    assert!(removed >= 2, "removed {removed}");
    assert_eq!(store.get(p.clone() + "pinned"), Ok(None));
    assert_eq!(
        store.get_size(p.clone() + "leased"),
        Err(Error::ObjectNotFound)
    );
    assert_eq!(store.remove_all(true), Ok(0));

    // A store without a pool may still remove.
    let no_pool = connect(0);
    assert_eq!(no_pool.remove_all(false), Ok(0));
}
