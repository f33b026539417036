//! The data methods of [`Store`]: put, get, query and remove, one key or a batch.

use std::os::raw::{c_int, c_void};

use crate::config::{c_config, config_ptr};
use crate::error::{check, check_i64};
use crate::keys::{c_key, c_str, merge, KeyBatch};
use crate::{ffi, Error, ReplicateConfig, Result, Store};

impl Store {
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
    /// `buffer` lies in this store's pool, i.e. is a [`PoolBuf`](crate::PoolBuf) or a slice of one.
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
        self.check(rc)
    }

    /// Puts many values in one request (`mooncake_store_batch_put_from`): one result per key,
    /// each as [`put_from`](Store::put_from) would return it. Values in this store's pool
    /// ([`PoolBuf`](crate::PoolBuf)s) travel without a copy. `Err(InvalidParams)` when the lists differ in
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
        let (mut buffers, sizes) = batch.value_buffers(values);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count entries in each array; every key NUL-terminated;
            // every buffer readable for its size (the library only reads); results writable.
            self.check(unsafe {
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
            let size = match self.check_i64(unsafe {
                ffi::mooncake_store_get_size(self.raw(), key.as_ptr())
            }) {
                Ok(size) => usize::try_from(size).map_err(|_| Error::InvalidParams)?,
                Err(e) if e == Error::ObjectNotFound => return Ok(None),
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
            match self.check_i64(rc) {
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
                Err(e) if e == Error::ObjectNotFound => return Ok(None),
                Err(e) if e == Error::InvalidParams => continue, // grew since get_size
                Err(e) => return Err(e),
            }
        }
        Err(Error::InvalidParams)
    }

    /// Reads the value of `key` into `buffer` (`mooncake_store_get_into`) and returns its
    /// length. Zero copy when `buffer` lies in this store's pool (a [`PoolBuf`](crate::PoolBuf) or a slice of
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
        usize::try_from(self.check_i64(rc)?).map_err(|_| Error::InternalError)
    }

    /// Reads many values in one request (`mooncake_store_batch_get_into`): one result per
    /// key, each as [`get_into`](Store::get_into) would return it. `buffers` may be
    /// `&mut [u8]` slices, `Vec<u8>`s (their length is the capacity offered) or
    /// [`PoolBuf`](crate::PoolBuf)s (zero copy). `Err(InvalidParams)` when the lists differ in length.
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
            self.check(unsafe {
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
            .map_err(|e| self.explain(e))
    }

    /// [`is_exist`](Store::is_exist) for many keys in one request.
    pub fn batch_is_exist<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Result<bool>>> {
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count NUL-terminated keys; count writable results.
            self.check(unsafe {
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
        self.check_i64(unsafe { ffi::mooncake_store_get_size(self.raw(), key.as_ptr()) })
    }

    // ---- remove --------------------------------------------------------------------------

    /// Removes `key`. Without `force`: [`Error::ObjectHasLease`] while a read lease is active,
    /// and hard-pinned objects are kept. [`Error::ReplicaIsNotReady`] for an object still
    /// being written, even with `force`; [`Error::ObjectNotFound`] on a miss.
    pub fn remove<K: AsRef<[u8]>>(&self, key: K, force: bool) -> Result<()> {
        let key = c_key(key.as_ref())?;
        // SAFETY: a live handle and a NUL-terminated key.
        self.check(unsafe {
            ffi::mooncake_store_remove(self.raw(), key.as_ptr(), c_int::from(force))
        })
    }

    /// Removes many keys in one request: one result per key, in order, as [`Self::remove`]
    /// would return it.
    pub fn batch_remove<K: AsRef<[u8]>>(&self, keys: &[K], force: bool) -> Result<Vec<Result<()>>> {
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count NUL-terminated keys; count writable results.
            self.check(unsafe {
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
        self.check_i64(unsafe {
            ffi::mooncake_store_remove_by_regex(self.raw(), pattern.as_ptr(), c_int::from(force))
        })
    }

    /// Removes every complete object of the cluster (without `force`, leased and
    /// hard-pinned ones are kept); returns how many were removed.
    pub fn remove_all(&self, force: bool) -> Result<u64> {
        // SAFETY: a live handle.
        self.check_i64(unsafe { ffi::mooncake_store_remove_all(self.raw(), c_int::from(force)) })
    }
}

#[derive(Clone, Copy)]
pub(crate) enum PutKind {
    Put,
    PutFrom,
    Upsert,
}

/// 1 → true, 0 → false, a negative code → its error.
pub(crate) fn exist(rc: c_int) -> Result<bool> {
    match rc {
        1 => Ok(true),
        0 => Ok(false),
        rc => Err(Error::from_code(rc).unwrap_or(Error::InternalError)),
    }
}
