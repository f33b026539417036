//! How a put is placed: [`ReplicateConfig`], and its C form (`CConfig`) that lives as long
//! as the call it is passed to.

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr;

use crate::{ffi, Error, Result};

/// How a put is placed (`mooncake_replicate_config_t`). The default is one replica, no pins,
/// no preferred segment, the same as passing no config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicateConfig {
    /// Memory replicas on distinct segments (at least 1).
    pub replica_num: usize,
    /// Evicted only when nothing else qualifies.
    pub with_soft_pin: bool,
    /// Never evicted; removed only with `force`.
    pub with_hard_pin: bool,
    /// `"host:port"` of daemons to try first, in order.
    pub preferred_segments: Vec<String>,
}

impl Default for ReplicateConfig {
    fn default() -> Self {
        ReplicateConfig {
            replica_num: 1,
            with_soft_pin: false,
            with_hard_pin: false,
            preferred_segments: Vec::new(),
        }
    }
}

/// A `ReplicateConfig` in C form; the strings and the pointer array live as long as this.
pub(crate) struct CConfig {
    _segments: Vec<CString>,
    _pointers: Vec<*const c_char>,
    pub(crate) raw: ffi::mooncake_replicate_config_t,
}

impl CConfig {
    pub(crate) fn new(config: &ReplicateConfig) -> Result<CConfig> {
        let segments = config
            .preferred_segments
            .iter()
            .map(|s| CString::new(s.as_bytes()).map_err(|_| Error::InvalidParams))
            .collect::<Result<Vec<_>>>()?;
        let mut pointers: Vec<*const c_char> = segments.iter().map(|s| s.as_ptr()).collect();
        let raw = ffi::mooncake_replicate_config_t {
            replica_num: config.replica_num,
            with_soft_pin: c_int::from(config.with_soft_pin),
            with_hard_pin: c_int::from(config.with_hard_pin),
            preferred_segments: if pointers.is_empty() {
                ptr::null_mut()
            } else {
                pointers.as_mut_ptr()
            },
            preferred_segments_count: pointers.len(),
        };
        Ok(CConfig {
            _segments: segments,
            _pointers: pointers,
            raw,
        })
    }
}

/// The C pointer of an optional config (NULL for none).
pub(crate) fn config_ptr(config: Option<&CConfig>) -> *const ffi::mooncake_replicate_config_t {
    config.map_or(ptr::null(), |c| {
        &c.raw as *const ffi::mooncake_replicate_config_t
    })
}

pub(crate) fn c_config(config: Option<&ReplicateConfig>) -> Result<Option<CConfig>> {
    config.map(CConfig::new).transpose()
}
