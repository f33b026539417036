//! Every refusal says why (issue 30): an `Error`'s `Display` carries the library's message
//! for the failed call (`mooncake_store_errmsg`), against a real master and daemon (see
//! tests/common).
#![deny(warnings)]

mod common;

use std::path::Path;

use common::{connect, prefix};
use mooncake_store::{Error, ErrorKind, Store};

const MIB: u64 = 1 << 20;

#[test]
fn connect_without_a_daemon_says_where_and_what_to_do() {
    let socket = format!("/nonexistent-{}/mooncaked.sock", std::process::id());
    let e = Store::connect(Some(Path::new(&socket)), MIB).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RpcFail);
    let why = format!(
        "mooncaked is not running at {socket} (connect: No such file or directory): start it \
         (systemctl start mooncaked) or point MOONCAKE_SOCKET / connect()'s socket_path at its \
         --socket"
    );
    assert_eq!(e.message(), Some(why.as_str()));
    assert_eq!(e.to_string(), format!("master or daemon unreachable: {why}"));
}

#[test]
fn key_errors_name_the_rule() {
    let store = connect(16 * MIB);
    let e = store.put("", b"v").unwrap_err();
    assert_eq!(e, Error::InvalidParams);
    assert_eq!(e.to_string(), "invalid parameters: key is empty");
    let e = store.put("k".repeat(4097), b"v").unwrap_err();
    assert_eq!(e.message(), Some("key longer than 4096 bytes (4097)"));
    let e = store.put(b"a\0b", b"v").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidParams);
    assert!(e.to_string().contains("key holds a NUL byte (at byte 1)"), "{e}");
    let e = store.is_exist("").unwrap_err();
    assert_eq!(e.message(), Some("key is empty"));
}

#[test]
fn the_daemons_reason_reaches_the_error() {
    let store = connect(16 * MIB);
    let key = format!("{}eight-kib", prefix("errors"));
    store.put(&key, &[7u8; 8192]).unwrap();
    let mut small = [0u8; 100];
    let e = store.get_into(&key, &mut small).unwrap_err();
    assert_eq!(
        e.message(),
        Some("the value is larger than the buffer of 100 bytes (get_size says how large)")
    );
    store.remove(&key, true).unwrap();
    // A miss says no more than its code: no message.
    let e = store.get_size(&key).unwrap_err();
    assert_eq!(e, Error::ObjectNotFound);
    assert_eq!(e.message(), None);
    assert_eq!(e.to_string(), "object not found");
}
