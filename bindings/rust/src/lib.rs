#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(test, deny(warnings))]

pub mod ffi;

mod config;
mod error;
mod keys;
mod ops;
mod pool;
mod ranges;
mod put_config;
mod replicas;
mod segments;
mod store;
mod tasks;
mod tensor;

pub use error::{Error, ErrorKind, Result};

pub use config::ReplicateConfig;
pub use pool::PoolBuf;
pub use ranges::Range;
pub use put_config::{PutConfig, SoftPinAction};
pub use replicas::{ReplicaDesc, ReplicaKind, SsdOffload};
pub use segments::Drained;
pub use store::{Health, Store};
pub use tasks::{Task, TaskId, TaskStatus, TaskType};
pub use tensor::{Dtype, Tensor};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CConfig;
    use crate::keys::{c_key, merge, KeyBatch};
    use crate::ops::exist;
    use std::path::Path;
    use std::ffi::CStr;

    #[test]
    fn keys_with_nul_are_refused_before_the_library() {
        assert_eq!(c_key(b"a\0b").unwrap_err(), Error::InvalidParams);
        assert_eq!(c_key(b"ab").unwrap().as_bytes(), b"ab");
        let (batch, errors) = KeyBatch::new(&["x", "y\0", "z"]);
        assert_eq!(batch.index, vec![0, 2]);
        assert_eq!(errors, vec![None, Some(Error::InvalidParams), None]);
    }

    #[test]
    fn merge_puts_results_back_in_caller_order() {
        let errors = vec![None, Some(Error::InvalidParams), None];
        let merged = merge(errors, &[0, 2], vec![1, -704], |rc: i32| exist(rc));
        assert_eq!(
            merged,
            vec![
                Ok(true),
                Err(Error::InvalidParams),
                Err(Error::ObjectNotFound)
            ]
        );
    }

    #[test]
    fn config_in_c_form() {
        let config = ReplicateConfig {
            replica_num: 2,
            with_soft_pin: true,
            with_hard_pin: false,
            preferred_segments: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
        };
        let c = CConfig::new(&config).unwrap();
        assert_eq!(c.raw.replica_num, 2);
        assert_eq!((c.raw.with_soft_pin, c.raw.with_hard_pin), (1, 0));
        assert_eq!(c.raw.preferred_segments_count, 2);
        // SAFETY: two valid pointers to NUL-terminated strings owned by c.
        let second = unsafe { CStr::from_ptr(*c.raw.preferred_segments.add(1)) };
        assert_eq!(second.to_str().unwrap(), "127.0.0.1:2");
        assert!(CConfig::new(&ReplicateConfig::default())
            .unwrap()
            .raw
            .preferred_segments
            .is_null());
        let bad = ReplicateConfig {
            preferred_segments: vec!["a\0".into()],
            ..ReplicateConfig::default()
        };
        assert_eq!(CConfig::new(&bad).err(), Some(Error::InvalidParams));
    }

    #[test]
    fn not_connected_is_an_error_not_a_crash() {
        let store = Store::create().unwrap();
        assert_eq!(store.health_check(), Ok(Health::NotConnected));
        assert_eq!(store.put("k", b"v"), Err(Error::InvalidParams));
        assert_eq!(store.get_size("k"), Err(Error::InvalidParams));
        assert_eq!(store.alloc(16).err(), Some(Error::NoAvailableHandle));
        assert_eq!(store.alloc(0).err(), Some(Error::InvalidParams));
        assert_eq!(store.close(), Ok(()));
    }

    #[test]
    fn connect_to_a_missing_socket_fails_with_rpc_fail() {
        let path = Path::new("/nonexistent/mooncake-rust-test.sock");
        assert_eq!(
            Store::connect(Some(path), 1 << 20).err(),
            Some(Error::RpcFail)
        );
        let nul = Path::new("/tmp/a\0b");
        assert_eq!(
            Store::connect(Some(nul), 1 << 20).err(),
            Some(Error::InvalidParams)
        );
    }
}
