//! Mooncake's whole `ReplicateConfig` as the sized C struct of ABI 4 (`mooncake_put_config_t`,
//! docs/mooncake-api.md, "put-config"), and the [`Store`] calls that take it: the `_ex` puts
//! and [`batch_upsert_from`](Store::batch_upsert_from).

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use crate::ops::PutKind;
use crate::error::check;
use crate::keys::{c_key, merge, KeyBatch};
use crate::{ffi, Error, Result, Store};

/// What a put does to the object's soft pin (Mooncake's `SoftPinAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SoftPinAction {
    /// An upsert keeps the old value's pin until its deadline; a new object gets none.
    #[default]
    Preserve,
    /// Pinned for the TTL (or the master's default) from the put's publication: a fixed
    /// deadline that reads do not move.
    Enable,
    /// No soft pin (an upsert drops the old one).
    Disable,
}

/// Every field of Mooncake's `ReplicateConfig`, with its defaults. Fields of features this
/// store lacks (NoF/DFS replicas, NoF segments, a host id) make a put fail with
/// [`Error::NotSupported`] when set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PutConfig {
    /// Memory replicas on distinct segments, 1 to 64.
    pub replica_num: usize,
    /// NVMe-oF replicas: must be 0.
    pub nof_replica_num: usize,
    /// DFS (3FS) replicas: must be 0.
    pub dfs_replica_num: usize,
    /// The soft pin (see [`SoftPinAction`]).
    pub soft_pin_action: SoftPinAction,
    /// `Some(ms)` only with [`SoftPinAction::Enable`]: the pin's TTL (0 pins nothing).
    pub soft_pin_ttl_ms: Option<u64>,
    /// Never evicted; removed only with `force`; survives upserts.
    pub with_hard_pin: bool,
    /// `"host:port"` of daemons to try first, in order.
    pub preferred_segments: Vec<String>,
    /// Mooncake's single preferred segment, used when `preferred_segments` is empty.
    pub preferred_segment: String,
    /// NVMe-oF segments: must be empty.
    pub preferred_nof_segments: Vec<String>,
    /// The first replica on this store's daemon.
    pub prefer_alloc_in_same_node: bool,
    /// Mooncake's writer host id: must be empty (the node is this store's daemon).
    pub host_id: String,
    /// Mooncake's object groups: `None`, or one group id per key of the call (`""`: in no
    /// group; another count is [`Error::InvalidParams`]). Objects of one group are leased,
    /// aged and evicted together (docs/mooncake-api.md, "Object groups").
    pub group_ids: Option<Vec<String>>,
    /// Mooncake's `ObjectDataType`, 0 to 9.
    pub data_type: i32,
}

impl Default for PutConfig {
    fn default() -> Self {
        PutConfig {
            replica_num: 1,
            nof_replica_num: 0,
            dfs_replica_num: 0,
            soft_pin_action: SoftPinAction::Preserve,
            soft_pin_ttl_ms: None,
            with_hard_pin: false,
            preferred_segments: Vec::new(),
            preferred_segment: String::new(),
            preferred_nof_segments: Vec::new(),
            prefer_alloc_in_same_node: false,
            host_id: String::new(),
            group_ids: None,
            data_type: 0,
        }
    }
}

fn c_strings(names: &[String]) -> Result<Vec<CString>> {
    names
        .iter()
        .map(|s| CString::new(s.as_bytes()).map_err(|_| Error::InvalidParams))
        .collect()
}

fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings.iter().map(|s| s.as_ptr()).collect()
}

fn list_ptr(p: &mut Vec<*const c_char>) -> *mut *const c_char {
    if p.is_empty() {
        ptr::null_mut()
    } else {
        p.as_mut_ptr()
    }
}

/// A `PutConfig` in C form; the strings and pointer arrays live as long as this.
pub(crate) struct CPutConfig {
    _strings: Vec<Vec<CString>>,
    _pointers: Vec<Vec<*const c_char>>,
    _single: [CString; 2],
    pub(crate) raw: ffi::mooncake_put_config_t,
}

impl CPutConfig {
    pub(crate) fn new(config: &PutConfig) -> Result<CPutConfig> {
        let segments = c_strings(&config.preferred_segments)?;
        let nof = c_strings(&config.preferred_nof_segments)?;
        let groups = c_strings(config.group_ids.as_deref().unwrap_or(&[]))?;
        let single = [
            CString::new(config.preferred_segment.as_bytes()).map_err(|_| Error::InvalidParams)?,
            CString::new(config.host_id.as_bytes()).map_err(|_| Error::InvalidParams)?,
        ];
        let (mut sp, mut np, mut gp) = (pointers(&segments), pointers(&nof), pointers(&groups));
        let mut raw = std::mem::MaybeUninit::<ffi::mooncake_put_config_t>::zeroed();
        // SAFETY: a writable struct of the header's layout; init fills it.
        check(unsafe { ffi::mooncake_store_put_config_init(raw.as_mut_ptr()) })?;
        // SAFETY: init succeeded.
        let mut raw = unsafe { raw.assume_init() };
        raw.replica_num = config.replica_num;
        raw.nof_replica_num = config.nof_replica_num;
        raw.dfs_replica_num = config.dfs_replica_num;
        raw.soft_pin_action = match config.soft_pin_action {
            SoftPinAction::Preserve => ffi::MOONCAKE_SOFT_PIN_PRESERVE,
            SoftPinAction::Enable => ffi::MOONCAKE_SOFT_PIN_ENABLE,
            SoftPinAction::Disable => ffi::MOONCAKE_SOFT_PIN_DISABLE,
        };
        raw.has_soft_pin_ttl = i32::from(config.soft_pin_ttl_ms.is_some());
        raw.soft_pin_ttl_ms = config.soft_pin_ttl_ms.unwrap_or(0);
        raw.with_hard_pin = i32::from(config.with_hard_pin);
        raw.prefer_alloc_in_same_node = i32::from(config.prefer_alloc_in_same_node);
        raw.preferred_segments = list_ptr(&mut sp);
        raw.preferred_segments_count = sp.len();
        raw.preferred_segment = single[0].as_ptr();
        raw.preferred_nof_segments = list_ptr(&mut np);
        raw.preferred_nof_segments_count = np.len();
        raw.host_id = single[1].as_ptr();
        raw.group_ids = list_ptr(&mut gp);
        raw.group_ids_count = gp.len();
        raw.data_type = config.data_type;
        Ok(CPutConfig {
            _strings: vec![segments, nof, groups],
            _pointers: vec![sp, np, gp],
            _single: single,
            raw,
        })
    }
}

impl Store {
    /// [`put`](Store::put) with Mooncake's whole config (`mooncake_store_put_ex`).
    pub fn put_ex<K: AsRef<[u8]>>(&self, key: K, value: &[u8], config: &PutConfig) -> Result<()> {
        self.put_ex_impl(key.as_ref(), value, config, PutKind::Put)
    }

    /// [`put_from`](Store::put_from) with Mooncake's whole config (`mooncake_store_put_from_ex`).
    pub fn put_from_ex<K: AsRef<[u8]>>(
        &self,
        key: K,
        buffer: &[u8],
        config: &PutConfig,
    ) -> Result<()> {
        self.put_ex_impl(key.as_ref(), buffer, config, PutKind::PutFrom)
    }

    /// [`upsert`](Store::upsert) with Mooncake's whole config (`mooncake_store_upsert_from_ex`).
    pub fn upsert_ex<K: AsRef<[u8]>>(
        &self,
        key: K,
        value: &[u8],
        config: &PutConfig,
    ) -> Result<()> {
        self.put_ex_impl(key.as_ref(), value, config, PutKind::Upsert)
    }

    fn put_ex_impl(&self, key: &[u8], value: &[u8], config: &PutConfig, kind: PutKind) -> Result<()> {
        let key = c_key(key)?;
        let config = CPutConfig::new(config)?;
        let (k, v, n) = (key.as_ptr(), value.as_ptr().cast::<c_void>(), value.len());
        let c = &config.raw as *const ffi::mooncake_put_config_t;
        // SAFETY: a live handle, a NUL-terminated key, value.len() readable bytes (only read)
        // and a config that outlives the call; nothing is kept after it returns.
        let rc = unsafe {
            match kind {
                PutKind::Put => ffi::mooncake_store_put_ex(self.raw(), k, v, n, c),
                PutKind::PutFrom => ffi::mooncake_store_put_from_ex(self.raw(), k, v as *mut c_void, n, c),
                PutKind::Upsert => {
                    ffi::mooncake_store_upsert_from_ex(self.raw(), k, v as *mut c_void, n, c)
                }
            }
        };
        self.check(rc)
    }

    /// [`batch_put_from`](Store::batch_put_from) with Mooncake's whole config
    /// (`mooncake_store_batch_put_from_ex`).
    pub fn batch_put_from_ex<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
        config: &PutConfig,
    ) -> Result<Vec<Result<()>>> {
        self.batch_ex_impl(keys, values, config, false)
    }

    /// Upserts many values in one request (`mooncake_store_batch_upsert_from`): one result
    /// per key, each as [`upsert_ex`](Store::upsert_ex) would return it, applied in order.
    /// `Err(InvalidParams)` when the lists differ in length.
    pub fn batch_upsert_from<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
        config: &PutConfig,
    ) -> Result<Vec<Result<()>>> {
        self.batch_ex_impl(keys, values, config, true)
    }

    fn batch_ex_impl<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
        config: &PutConfig,
        upsert: bool,
    ) -> Result<Vec<Result<()>>> {
        if keys.len() != values.len() {
            return Err(Error::InvalidParams);
        }
        let config = CPutConfig::new(config)?;
        let (mut batch, errors) = KeyBatch::new(keys);
        let (mut buffers, sizes) = batch.value_buffers(values);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            let f = if upsert {
                ffi::mooncake_store_batch_upsert_from
            } else {
                ffi::mooncake_store_batch_put_from_ex
            };
            // SAFETY: a live handle; count entries in each array; every key NUL-terminated;
            // every buffer readable for its size (only read); results writable; the config
            // outlives the call.
            self.check(unsafe {
                f(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    buffers.as_mut_ptr(),
                    sizes.as_ptr(),
                    batch.index.len(),
                    &config.raw,
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, check))
    }
}
