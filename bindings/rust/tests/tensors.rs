//! Tensors in Mooncake's layout against a real master and daemon: a round trip, what is
//! stored byte for byte (the header Mooncake's client reads), upsert, a miss, an object
//! that is not a tensor.
#![deny(warnings)]

mod common;

use common::{connect, prefix};
use mooncake_store::{Dtype, Error, Tensor};

const MIB: u64 = 1 << 20;

#[test]
fn put_get_tensor_round_trip_in_mooncakes_layout() {
    let store = connect(16 * MIB);
    let p = prefix("tensor");
    let t = Tensor {
        dtype: Dtype::Bfloat16,
        shape: vec![3, 2],
        data: (0u8..12).collect(),
    };
    store.put_tensor(format!("{p}a"), &t).unwrap();
    assert_eq!(store.get_tensor(format!("{p}a")).unwrap(), Some(t.clone()));
    let raw = store.get(format!("{p}a")).unwrap().unwrap();
    assert_eq!(raw.len(), 304 + 12);
    assert_eq!(&raw[0..4], &[0x4e, 0x4f, 0x4f, 0x4d]); // magic 0x4d4f4f4e
    assert_eq!(i32::from_le_bytes(raw[8..12].try_into().unwrap()), 12); // bfloat16
    assert_eq!(&raw[304..], &t.data[..]);

    // A scalar and an empty tensor.
    let scalar = Tensor {
        dtype: Dtype::Float64,
        shape: vec![],
        data: 2.5f64.to_le_bytes().to_vec(),
    };
    let empty = Tensor {
        dtype: Dtype::Int32,
        shape: vec![0, 4],
        data: vec![],
    };
    store.put_tensor(format!("{p}s"), &scalar).unwrap();
    store.put_tensor(format!("{p}e"), &empty).unwrap();
    assert_eq!(store.get_tensor(format!("{p}s")).unwrap(), Some(scalar));
    assert_eq!(store.get_tensor(format!("{p}e")).unwrap(), Some(empty));

    // put keeps, upsert replaces.
    let other = Tensor {
        dtype: Dtype::Uint8,
        shape: vec![2],
        data: vec![7, 8],
    };
    store.put_tensor(format!("{p}a"), &other).unwrap();
    assert_eq!(store.get_tensor(format!("{p}a")).unwrap(), Some(t));
    store.upsert_tensor(format!("{p}a"), &other).unwrap();
    assert_eq!(store.get_tensor(format!("{p}a")).unwrap(), Some(other));
}

#[test]
fn misses_and_objects_that_are_not_tensors() {
    let store = connect(16 * MIB);
    let p = prefix("not-tensor");
    assert_eq!(store.get_tensor(format!("{p}missing")).unwrap(), None);
    store.put(format!("{p}raw"), &[1u8; 500]).unwrap();
    let e = store.get_tensor(format!("{p}raw")).unwrap_err();
    assert_eq!(e, Error::InvalidParams);
    assert!(e.message().unwrap().contains("magic"), "{e}");
    let bad = Tensor {
        dtype: Dtype::Float32,
        shape: vec![2],
        data: vec![0; 7],
    };
    assert_eq!(
        store.put_tensor(format!("{p}bad"), &bad),
        Err(Error::InvalidParams)
    );
    assert_eq!(store.get(format!("{p}bad")).unwrap(), None);
}
