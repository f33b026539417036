#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(test, deny(warnings))]

pub mod ffi;

mod error;

use std::ffi::CString;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::slice;

use error::{check, check_i64};
pub use error::{Error, Result};

/// A connection to the local `mooncaked` daemon plus one shared-memory pool: a
/// `mooncake_store_t` handle.
///
/// Every method takes `&self`: one `Store` is meant to be shared by many threads (it is
/// `Send + Sync`; put it in an `Arc` or use scoped threads), and calls from different threads
/// are in flight at once. Dropping the store closes it and frees the handle
/// (`mooncake_store_destroy`).
///
/// Keys are anything that is `AsRef<[u8]>` (`&str`, `String`, `&[u8]`, `Vec<u8>`, byte
/// arrays): 1 to 4096 bytes, any byte but NUL. A key with an interior NUL byte is refused with
/// [`Error::InvalidParams`] before anything reaches the library, as are empty and over-long
/// keys (by the library).
pub struct Store {
    handle: NonNull<c_void>,
}

// SAFETY: the C ABI is thread-safe on one handle ("Every function is thread-safe on one
// handle; many threads may share a handle and keep many requests in flight at once"), and a
// handle is not tied to the thread that created it.
unsafe impl Send for Store {}
// SAFETY: as above; every method takes &self and the library synchronizes internally.
unsafe impl Sync for Store {}

// Compile-time proof that `Store` and `PoolBuf` can be shared across threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<PoolBuf<'static>>();
};

/// What `health_check` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Health {
    /// Connected, and the daemon reaches its master (0).
    Ok,
    /// Not connected, closed, or the daemon is gone (1).
    NotConnected,
    /// The daemon is up but cannot reach its master (2).
    MasterUnreachable,
}

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
struct CConfig {
    _segments: Vec<CString>,
    _pointers: Vec<*const c_char>,
    raw: ffi::mooncake_replicate_config_t,
}

impl CConfig {
    fn new(config: &ReplicateConfig) -> Result<CConfig> {
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
fn config_ptr(config: Option<&CConfig>) -> *const ffi::mooncake_replicate_config_t {
    config.map_or(ptr::null(), |c| {
        &c.raw as *const ffi::mooncake_replicate_config_t
    })
}

fn c_config(config: Option<&ReplicateConfig>) -> Result<Option<CConfig>> {
    config.map(CConfig::new).transpose()
}

/// A key as a NUL-terminated C string; an interior NUL is an error, never a truncated key.
fn c_key(key: &[u8]) -> Result<CString> {
    CString::new(key).map_err(|_| Error::InvalidParams)
}

fn c_str(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidParams)
}

/// The keys of a batch: those that can be passed to C, and where each one came from.
struct KeyBatch {
    strings: Vec<CString>,
    pointers: Vec<*const c_char>,
    /// For each key passed to C, its index in the caller's list.
    index: Vec<usize>,
}

impl KeyBatch {
    /// Splits keys into valid ones and per-key errors (`InvalidParams` for a NUL byte).
    fn new<K: AsRef<[u8]>>(keys: &[K]) -> (KeyBatch, Vec<Option<Error>>) {
        let mut batch = KeyBatch {
            strings: Vec::with_capacity(keys.len()),
            pointers: Vec::with_capacity(keys.len()),
            index: Vec::with_capacity(keys.len()),
        };
        let mut errors = vec![None; keys.len()];
        for (i, key) in keys.iter().enumerate() {
            match c_key(key.as_ref()) {
                Ok(s) => {
                    batch.strings.push(s);
                    batch.index.push(i);
                }
                Err(e) => errors[i] = Some(e),
            }
        }
        batch.pointers = batch.strings.iter().map(|s| s.as_ptr()).collect();
        (batch, errors)
    }
}

impl Store {
    fn create() -> Result<Store> {
        // SAFETY: no arguments; NULL only when out of memory.
        let handle = unsafe { ffi::mooncake_store_create() };
        NonNull::new(handle)
            .map(|handle| Store { handle })
            .ok_or(Error::InternalError)
    }

    /// A handle whose connects name tenant_id.
    fn create_in(tenant_id: &str) -> Result<Store> {
        let tenant = c_str(tenant_id)?;
        let store = Store::create()?;
        // SAFETY: a live handle and a NUL-terminated id.
        check(unsafe { ffi::mooncake_store_set_tenant(store.raw(), tenant.as_ptr()) })?;
        Ok(store)
    }

    fn raw(&self) -> ffi::mooncake_store_t {
        self.handle.as_ptr()
    }

    /// Connects to the daemon's Unix socket and creates a pool of `local_buffer_size` bytes
    /// shared with it (`mooncake_store_connect`). `socket` `None` means `$MOONCAKE_SOCKET`,
    /// else `/run/mooncake/mooncaked.sock`.
    ///
    /// A pool of 0 bytes allows queries and removes only: every put and get fails with
    /// [`Error::InvalidParams`]. Any non-zero pool carries values of any size (larger ones
    /// are streamed through it in chunks).
    ///
    /// Errors: [`Error::RpcFail`] when no daemon answers, [`Error::InvalidParams`] on an ABI
    /// version mismatch or a path with a NUL byte.
    pub fn connect(socket: Option<&Path>, local_buffer_size: u64) -> Result<Store> {
        Store::connect_as(socket, local_buffer_size, "")
    }

    /// [`Store::connect`] in a tenant (`mooncake_store_set_tenant`): the store's keys are
    /// the tenant's, a key space no other tenant sees, reads, removes or matches (the same
    /// key in two tenants is two objects). `tenant_id` is 1 to 64 characters of
    /// `[A-Za-z0-9_.-]`; `""` names none (the daemon's tenant for this process's uid, if
    /// its `--tenant_uids` lists one, else the default tenant).
    ///
    /// Errors: as [`Store::connect`]; [`Error::InvalidParams`] for a malformed id,
    /// [`Error::PermissionDenied`] when the daemon keeps the tenant for other uids.
    pub fn connect_as(
        socket: Option<&Path>,
        local_buffer_size: u64,
        tenant_id: &str,
    ) -> Result<Store> {
        let socket = socket
            .map(|p| CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::InvalidParams))
            .transpose()?;
        let store = Store::create_in(tenant_id)?;
        let path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        // SAFETY: a live handle and a NUL-terminated path (or NULL).
        check(unsafe { ffi::mooncake_store_connect(store.raw(), path, local_buffer_size) })?;
        Ok(store)
    }

    /// The Mooncake-compatible entry (`mooncake_store_setup`): connects to the local daemon
    /// like [`Store::connect`] with `None`. `global_segment_size > 0` asks the daemon to
    /// mount that much extra memory for this store (unmounted, and its objects dropped, when
    /// the store closes); a non-empty `master_server_addr` must match the daemon's master
    /// (else [`Error::InvalidParams`]). `local_hostname`, `metadata_server`, `protocol` and
    /// `device_name` are accepted for compatibility.
    pub fn setup(
        local_hostname: &str,
        metadata_server: &str,
        global_segment_size: u64,
        local_buffer_size: u64,
        protocol: &str,
        device_name: &str,
        master_server_addr: &str,
    ) -> Result<Store> {
        Store::setup_as(
            local_hostname,
            metadata_server,
            global_segment_size,
            local_buffer_size,
            protocol,
            device_name,
            master_server_addr,
            "",
        )
    }

    /// [`Store::setup`] in a tenant, as [`Store::connect_as`] names one.
    #[allow(clippy::too_many_arguments)]
    pub fn setup_as(
        local_hostname: &str,
        metadata_server: &str,
        global_segment_size: u64,
        local_buffer_size: u64,
        protocol: &str,
        device_name: &str,
        master_server_addr: &str,
        tenant_id: &str,
    ) -> Result<Store> {
        let hostname = c_str(local_hostname)?;
        let metadata = c_str(metadata_server)?;
        let protocol = c_str(protocol)?;
        let device = c_str(device_name)?;
        let master = c_str(master_server_addr)?;
        let store = Store::create_in(tenant_id)?;
        // SAFETY: a live handle and NUL-terminated strings that outlive the call.
        check(unsafe {
            ffi::mooncake_store_setup(
                store.raw(),
                hostname.as_ptr(),
                metadata.as_ptr(),
                global_segment_size,
                local_buffer_size,
                protocol.as_ptr(),
                device.as_ptr(),
                master.as_ptr(),
            )
        })?;
        Ok(store)
    }

    /// Disconnects (`mooncake_store_close`): unfinished puts are revoked. Safe to call twice;
    /// later calls fail with [`Error::InvalidParams`]. The pool stays mapped, so live
    /// [`PoolBuf`]s stay valid until the store is dropped.
    pub fn close(&self) -> Result<()> {
        // SAFETY: a live handle.
        check(unsafe { ffi::mooncake_store_close(self.raw()) })
    }

    /// Whether the store is connected and its daemon reaches the master.
    pub fn health_check(&self) -> Result<Health> {
        // SAFETY: a live handle.
        match unsafe { ffi::mooncake_store_health_check(self.raw()) } {
            0 => Ok(Health::Ok),
            1 => Ok(Health::NotConnected),
            2 => Ok(Health::MasterUnreachable),
            rc => Err(Error::from_code(rc).unwrap_or(Error::InternalError)),
        }
    }

    /// The daemon's transfer endpoint, `"host:port"`.
    pub fn get_hostname(&self) -> Result<String> {
        let mut len = 256;
        loop {
            let mut buf = vec![0u8; len];
            // SAFETY: a live handle and a writable buffer of buf.len() bytes.
            let rc = unsafe {
                ffi::mooncake_store_get_hostname(self.raw(), buf.as_mut_ptr().cast(), buf.len())
            };
            match check(rc) {
                Ok(()) => {
                    // The text up to its first NUL (none: the library broke its contract).
                    let nul = buf
                        .iter()
                        .position(|&b| b == 0)
                        .ok_or(Error::InternalError)?;
                    return Ok(String::from_utf8_lossy(&buf[..nul]).into_owned());
                }
                // -600: the buffer was too small (or the store is not connected).
                Err(Error::InvalidParams) if len < 65536 => len *= 16,
                Err(e) => return Err(e),
            }
        }
    }

    /// The raw `mooncake_store_t` handle, for calling [`ffi`] functions directly. It stays
    /// owned by this `Store`.
    pub fn as_raw(&self) -> ffi::mooncake_store_t {
        self.raw()
    }

    // ---- shared memory -----------------------------------------------------------------

    /// Allocates `size` bytes of the store's pool (`mooncake_store_alloc`). The daemon reads
    /// and writes this memory directly, so [`put_from`](Store::put_from) and
    /// [`get_into`](Store::get_into) with a `PoolBuf` (or any part of one) copy nothing on
    /// this side. The buffer is returned to the pool when dropped and cannot outlive the
    /// store.
    ///
    /// Errors: [`Error::InvalidParams`] for `size` 0, [`Error::NoAvailableHandle`] when the
    /// pool has no free block of that size (or the store has no pool or is closed).
    pub fn alloc(&self, size: usize) -> Result<PoolBuf<'_>> {
        if size == 0 {
            return Err(Error::InvalidParams);
        }
        // SAFETY: a live handle.
        let ptr = unsafe { ffi::mooncake_store_alloc(self.raw(), size) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::NoAvailableHandle)?;
        Ok(PoolBuf {
            store: self,
            ptr,
            len: size,
        })
    }

    /// Declares caller memory that will be used with puts and gets
    /// (`mooncake_store_register_buffer`); Mooncake-compatible. The library only records the
    /// range, so that a later call on a buffer that starts inside it but runs past its end
    /// fails with [`Error::InvalidParams`]. Overlapping ranges are refused.
    pub fn register_buffer(&self, buffer: &[u8]) -> Result<()> {
        // SAFETY: a live handle; the library records the address range and never
        // dereferences it here.
        check(unsafe {
            ffi::mooncake_store_register_buffer(
                self.raw(),
                buffer.as_ptr() as *mut c_void,
                buffer.len(),
            )
        })
    }

    /// Forgets a range given to [`register_buffer`](Store::register_buffer) (by its start);
    /// [`Error::InvalidParams`] for an unknown address.
    pub fn unregister_buffer(&self, buffer: &[u8]) -> Result<()> {
        // SAFETY: a live handle; only the address is used.
        check(unsafe {
            ffi::mooncake_store_unregister_buffer(self.raw(), buffer.as_ptr() as *mut c_void)
        })
    }

    // ---- put -----------------------------------------------------------------------------

    /// Stores a copy of `value` under `key` with one replica (`mooncake_store_put`). Puts
    /// never overwrite: when the key already exists this returns `Ok(())` and keeps the old
    /// value (see [`upsert`](Store::upsert)).
    ///
    /// Errors: [`Error::NoAvailableHandle`] when the cluster has no space for one replica
    /// (back-pressure: retry later), [`Error::InvalidParams`] for an empty value or key.
    pub fn put<K: AsRef<[u8]>>(&self, key: K, value: &[u8]) -> Result<()> {
        self.put_impl(key.as_ref(), value, None, PutKind::Put)
    }

    /// [`put`](Store::put) with a placement config.
    pub fn put_with<K: AsRef<[u8]>>(
        &self,
        key: K,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> Result<()> {
        self.put_impl(key.as_ref(), value, Some(config), PutKind::Put)
    }

    /// Like [`put`](Store::put), from a buffer (`mooncake_store_put_from`): zero copy when
    /// `buffer` lies in this store's pool, i.e. is a [`PoolBuf`] or a slice of one.
    pub fn put_from<K: AsRef<[u8]>>(&self, key: K, buffer: &[u8]) -> Result<()> {
        self.put_impl(key.as_ref(), buffer, None, PutKind::PutFrom)
    }

    /// [`put_from`](Store::put_from) with a placement config.
    pub fn put_from_with<K: AsRef<[u8]>>(
        &self,
        key: K,
        buffer: &[u8],
        config: &ReplicateConfig,
    ) -> Result<()> {
        self.put_impl(key.as_ref(), buffer, Some(config), PutKind::PutFrom)
    }

    /// Like [`put_from`](Store::put_from) but replaces an existing value
    /// (`mooncake_store_upsert_from`); readers see the old or the new value, never a mix.
    pub fn upsert<K: AsRef<[u8]>>(&self, key: K, value: &[u8]) -> Result<()> {
        self.put_impl(key.as_ref(), value, None, PutKind::Upsert)
    }

    /// [`upsert`](Store::upsert) with a placement config.
    pub fn upsert_with<K: AsRef<[u8]>>(
        &self,
        key: K,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> Result<()> {
        self.put_impl(key.as_ref(), value, Some(config), PutKind::Upsert)
    }

    fn put_impl(
        &self,
        key: &[u8],
        value: &[u8],
        config: Option<&ReplicateConfig>,
        kind: PutKind,
    ) -> Result<()> {
        let key = c_key(key)?;
        let config = c_config(config)?;
        let config = config_ptr(config.as_ref());
        let (k, v, n) = (key.as_ptr(), value.as_ptr().cast::<c_void>(), value.len());
        // SAFETY: a live handle, a NUL-terminated key, value.len() readable bytes (the
        // library only reads them, although put_from/upsert_from take `void *`) and a config
        // that outlives the call; nothing is kept after the call returns.
        let rc = unsafe {
            match kind {
                PutKind::Put => ffi::mooncake_store_put(self.raw(), k, v, n, config),
                PutKind::PutFrom => {
                    ffi::mooncake_store_put_from(self.raw(), k, v as *mut c_void, n, config)
                }
                PutKind::Upsert => {
                    ffi::mooncake_store_upsert_from(self.raw(), k, v as *mut c_void, n, config)
                }
            }
        };
        check(rc)
    }

    /// Puts many values in one request (`mooncake_store_batch_put_from`): one result per key,
    /// each as [`put_from`](Store::put_from) would return it. Values in this store's pool
    /// ([`PoolBuf`]s) travel without a copy. `Err(InvalidParams)` when the lists differ in
    /// length; an empty batch returns an empty list.
    pub fn batch_put_from<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
    ) -> Result<Vec<Result<()>>> {
        self.batch_put_impl(keys, values, None)
    }

    /// [`batch_put_from`](Store::batch_put_from) with one placement config for every key.
    pub fn batch_put_from_with<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
        config: &ReplicateConfig,
    ) -> Result<Vec<Result<()>>> {
        self.batch_put_impl(keys, values, Some(config))
    }

    fn batch_put_impl<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        keys: &[K],
        values: &[V],
        config: Option<&ReplicateConfig>,
    ) -> Result<Vec<Result<()>>> {
        if keys.len() != values.len() {
            return Err(Error::InvalidParams);
        }
        let config = c_config(config)?;
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut buffers: Vec<*mut c_void> = Vec::with_capacity(batch.index.len());
        let mut sizes: Vec<usize> = Vec::with_capacity(batch.index.len());
        for &i in &batch.index {
            let v = values[i].as_ref();
            buffers.push(v.as_ptr() as *mut c_void);
            sizes.push(v.len());
        }
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count entries in each array; every key NUL-terminated;
            // every buffer readable for its size (the library only reads); results writable.
            check(unsafe {
                ffi::mooncake_store_batch_put_from(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    buffers.as_mut_ptr(),
                    sizes.as_ptr(),
                    batch.index.len(),
                    config_ptr(config.as_ref()),
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, check))
    }

    // ---- get -----------------------------------------------------------------------------

    /// The value of `key`, or `Ok(None)` when there is no such object.
    ///
    /// Errors: [`Error::ReplicaIsNotReady`] while the object is still being written, and any
    /// failure of the store.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Vec<u8>>> {
        let key = c_key(key.as_ref())?;
        // A value may be replaced by a larger one between the size query and the read
        // (upsert): then ask again.
        for _ in 0..8 {
            // SAFETY: a live handle and a NUL-terminated key.
            let size = match check_i64(unsafe {
                ffi::mooncake_store_get_size(self.raw(), key.as_ptr())
            }) {
                Ok(size) => usize::try_from(size).map_err(|_| Error::InvalidParams)?,
                Err(Error::ObjectNotFound) => return Ok(None),
                Err(e) => return Err(e),
            };
            let mut value: Vec<u8> = Vec::with_capacity(size);
            // SAFETY: a live handle, a NUL-terminated key and `size` writable bytes (the
            // vector's spare capacity).
            let rc = unsafe {
                ffi::mooncake_store_get_into(
                    self.raw(),
                    key.as_ptr(),
                    value.as_mut_ptr().cast(),
                    size,
                )
            };
            match check_i64(rc) {
                Ok(n) => {
                    let n = usize::try_from(n).map_err(|_| Error::InternalError)?;
                    assert!(
                        n <= size,
                        "mooncake_store_get_into read more than it was given"
                    );
                    // SAFETY: the library wrote the first n bytes of the spare capacity.
                    unsafe { value.set_len(n) };
                    return Ok(Some(value));
                }
                Err(Error::ObjectNotFound) => return Ok(None),
                Err(Error::InvalidParams) => continue, // grew since get_size
                Err(e) => return Err(e),
            }
        }
        Err(Error::InvalidParams)
    }

    /// Reads the value of `key` into `buffer` (`mooncake_store_get_into`) and returns its
    /// length. Zero copy when `buffer` lies in this store's pool (a [`PoolBuf`] or a slice of
    /// one).
    ///
    /// Errors: [`Error::ObjectNotFound`] on a miss, [`Error::InvalidParams`] when `buffer` is
    /// smaller than the value (see [`get_size`](Store::get_size)),
    /// [`Error::ReplicaIsNotReady`] while the object is still being written.
    pub fn get_into<K: AsRef<[u8]>>(&self, key: K, buffer: &mut [u8]) -> Result<usize> {
        let key = c_key(key.as_ref())?;
        // SAFETY: a live handle, a NUL-terminated key and buffer.len() writable bytes.
        let rc = unsafe {
            ffi::mooncake_store_get_into(
                self.raw(),
                key.as_ptr(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        usize::try_from(check_i64(rc)?).map_err(|_| Error::InternalError)
    }

    /// Reads many values in one request (`mooncake_store_batch_get_into`): one result per
    /// key, each as [`get_into`](Store::get_into) would return it. `buffers` may be
    /// `&mut [u8]` slices, `Vec<u8>`s (their length is the capacity offered) or
    /// [`PoolBuf`]s (zero copy). `Err(InvalidParams)` when the lists differ in length.
    pub fn batch_get_into<K: AsRef<[u8]>, B: AsMut<[u8]>>(
        &self,
        keys: &[K],
        buffers: &mut [B],
    ) -> Result<Vec<Result<usize>>> {
        if keys.len() != buffers.len() {
            return Err(Error::InvalidParams);
        }
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut all: Vec<&mut [u8]> = buffers.iter_mut().map(|b| b.as_mut()).collect();
        let mut pointers: Vec<*mut c_void> = Vec::with_capacity(batch.index.len());
        let mut sizes: Vec<usize> = Vec::with_capacity(batch.index.len());
        for &i in &batch.index {
            pointers.push(all[i].as_mut_ptr().cast());
            sizes.push(all[i].len());
        }
        let mut results: Vec<i64> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count entries in each array; every key NUL-terminated;
            // every buffer writable for its size and distinct (they come from &mut borrows);
            // results writable.
            check(unsafe {
                ffi::mooncake_store_batch_get_into(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    pointers.as_mut_ptr(),
                    sizes.as_ptr(),
                    batch.index.len(),
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, |rc| {
            usize::try_from(check_i64(rc)?).map_err(|_| Error::InternalError)
        }))
    }

    // ---- query ---------------------------------------------------------------------------

    /// Whether `key` is present and readable (`false` also while it is still being written).
    pub fn is_exist<K: AsRef<[u8]>>(&self, key: K) -> Result<bool> {
        let key = c_key(key.as_ref())?;
        // SAFETY: a live handle and a NUL-terminated key.
        exist(unsafe { ffi::mooncake_store_is_exist(self.raw(), key.as_ptr()) })
    }

    /// [`is_exist`](Store::is_exist) for many keys in one request.
    pub fn batch_is_exist<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Result<bool>>> {
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count NUL-terminated keys; count writable results.
            check(unsafe {
                ffi::mooncake_store_batch_is_exist(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    batch.index.len(),
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, exist))
    }

    /// The size of the value in bytes; [`Error::ObjectNotFound`] on a miss.
    pub fn get_size<K: AsRef<[u8]>>(&self, key: K) -> Result<u64> {
        let key = c_key(key.as_ref())?;
        // SAFETY: a live handle and a NUL-terminated key.
        check_i64(unsafe { ffi::mooncake_store_get_size(self.raw(), key.as_ptr()) })
    }

    // ---- remove --------------------------------------------------------------------------

    /// Removes `key`. Without `force`: [`Error::ObjectHasLease`] while a read lease is active,
    /// and hard-pinned objects are kept. [`Error::ReplicaIsNotReady`] for an object still
    /// being written, even with `force`; [`Error::ObjectNotFound`] on a miss.
    pub fn remove<K: AsRef<[u8]>>(&self, key: K, force: bool) -> Result<()> {
        let key = c_key(key.as_ref())?;
        // SAFETY: a live handle and a NUL-terminated key.
        check(unsafe { ffi::mooncake_store_remove(self.raw(), key.as_ptr(), c_int::from(force)) })
    }

    /// Removes many keys in one request: one result per key, in order, as [`Self::remove`]
    /// would return it.
    pub fn batch_remove<K: AsRef<[u8]>>(&self, keys: &[K], force: bool) -> Result<Vec<Result<()>>> {
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count NUL-terminated keys; count writable results.
            check(unsafe {
                ffi::mooncake_store_batch_remove(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    batch.index.len(),
                    c_int::from(force),
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, check))
    }

    /// Removes every key matching the ECMAScript regular expression `pattern`; returns how
    /// many were removed. [`Error::InvalidParams`] for a malformed pattern.
    pub fn remove_by_regex(&self, pattern: &str, force: bool) -> Result<u64> {
        let pattern = c_str(pattern)?;
        // SAFETY: a live handle and a NUL-terminated pattern.
        check_i64(unsafe {
            ffi::mooncake_store_remove_by_regex(self.raw(), pattern.as_ptr(), c_int::from(force))
        })
    }

    /// Removes every complete object of the cluster (without `force`, leased and
    /// hard-pinned ones are kept); returns how many were removed.
    pub fn remove_all(&self, force: bool) -> Result<u64> {
        // SAFETY: a live handle.
        check_i64(unsafe { ffi::mooncake_store_remove_all(self.raw(), c_int::from(force)) })
    }
}

#[derive(Clone, Copy)]
enum PutKind {
    Put,
    PutFrom,
    Upsert,
}

/// 1 → true, 0 → false, a negative code → its error.
fn exist(rc: c_int) -> Result<bool> {
    match rc {
        1 => Ok(true),
        0 => Ok(false),
        rc => Err(Error::from_code(rc).unwrap_or(Error::InternalError)),
    }
}

/// One result per caller key: the pre-checked error, or the C result of its entry.
fn merge<R: Copy, T>(
    errors: Vec<Option<Error>>,
    index: &[usize],
    results: Vec<R>,
    convert: impl Fn(R) -> Result<T>,
) -> Vec<Result<T>> {
    let mut c_results = index.iter().zip(results).peekable();
    errors
        .into_iter()
        .enumerate()
        .map(|(i, error)| match error {
            Some(e) => Err(e),
            None => {
                let (&j, rc) = c_results.next().expect("one C result per valid key");
                debug_assert_eq!(i, j);
                convert(rc)
            }
        })
        .collect()
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: the handle is live and no PoolBuf borrows the store any more; destroy
        // closes it, unmaps the pool and frees the handle.
        unsafe { ffi::mooncake_store_destroy(self.raw()) }
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("handle", &self.handle)
            .finish()
    }
}

/// A block of a [`Store`]'s shared-memory pool, from [`Store::alloc`]: `Deref<Target = [u8]>`
/// and `DerefMut`, returned to the pool (`mooncake_store_free`) when dropped.
///
/// Puts from and gets into a `PoolBuf` (or any slice of one) pass the pool pointer, so the
/// daemon copies straight between the pool and its segment and this process copies nothing.
/// The memory is initialized (a fresh block reads as zeros or as bytes of an earlier use).
///
/// A `PoolBuf` borrows its store, so it cannot outlive it (the pool is unmapped when the
/// store is dropped):
///
/// ```compile_fail,E0597
/// let buf = {
///     let store = mooncake_store::Store::connect(None, 1 << 20).unwrap();
///     store.alloc(64).unwrap()
/// }; // error: `store` does not live long enough
/// ```
pub struct PoolBuf<'a> {
    store: &'a Store,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a PoolBuf owns its block exclusively (like a Box<[u8]>), and freeing it through the
// shared, thread-safe Store works from any thread.
unsafe impl Send for PoolBuf<'_> {}
// SAFETY: &PoolBuf only gives out &[u8].
unsafe impl Sync for PoolBuf<'_> {}

impl PoolBuf<'_> {
    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: blocks are at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the block in this process's mapping of the pool.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start of the block, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for PoolBuf<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: len bytes of mapped, initialized pool memory owned by this PoolBuf; the
        // mapping lives as long as the store this borrows.
        unsafe { slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for PoolBuf<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for PoolBuf<'_> {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for PoolBuf<'_> {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Drop for PoolBuf<'_> {
    fn drop(&mut self) {
        // SAFETY: ptr came from mooncake_store_alloc on this store and is freed once.
        unsafe { ffi::mooncake_store_free(self.store.raw(), self.ptr.as_ptr().cast()) }
    }
}

impl fmt::Debug for PoolBuf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
