//! Helpers shared by the integration tests. They run against a real master and daemon:
//! `scripts/with-cluster.sh` exports MOONCAKE_SOCKET (which `Store::connect(None, ..)`
//! uses), MOONCAKE_MASTER and MOONCAKE_HOSTNAME.
#![allow(dead_code)]

use mooncake_store::Store;

/// An environment variable the cluster harness exports.
pub fn cluster_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: run the tests against a cluster, e.g. \
             scripts/with-cluster.sh --build BUILD -- cargo test --offline"
        )
    })
}

/// A store connected through $MOONCAKE_SOCKET with a pool of `pool` bytes.
pub fn connect(pool: u64) -> Store {
    cluster_env("MOONCAKE_SOCKET");
    Store::connect(None, pool).expect("connect to the daemon of $MOONCAKE_SOCKET")
}

/// A key prefix of its own for each test (tests of one binary run in parallel).
pub fn prefix(test: &str) -> String {
    format!("rs-{}-{test}-", std::process::id())
}

/// `len` bytes of a repeatable pattern that differs per seed.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(seed);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
