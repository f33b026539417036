//! Ranged reads (`mooncake_store_get_ranges`, `mooncake_store_batch_get_ranges`): only the
//! requested bytes of a value move, from whichever replica serves them.

use std::os::raw::c_void;

use crate::error::{check_i64, Error, Result};
use crate::ffi;
use crate::keys::c_key;
use crate::store::Store;

/// One fragment of a ranged read: `length` bytes at `src_offset` in the value go to
/// `dst_offset` in the destination buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Where the bytes start in the value.
    pub src_offset: u64,
    /// How many bytes.
    pub length: u64,
    /// Where they go in the buffer.
    pub dst_offset: u64,
}

impl Range {
    /// The fragment `length` bytes at `src_offset` to `dst_offset`.
    pub fn new(src_offset: u64, length: u64, dst_offset: u64) -> Range {
        Range { src_offset, length, dst_offset }
    }

    fn raw(&self) -> ffi::mooncake_range_t {
        ffi::mooncake_range_t {
            src_offset: self.src_offset,
            length: self.length,
            dst_offset: self.dst_offset,
        }
    }
}

/// A fragment's C result: its length, or the error.
fn fragment(rc: i64) -> Result<usize> {
    usize::try_from(check_i64(rc)?).map_err(|_| Error::InternalError)
}

impl Store {
    /// Reads only `ranges` of `key`'s value into `buffer` (`mooncake_store_get_ranges`): one
    /// result per fragment, its length or why not: [`Error::ObjectNotFound`] on a miss,
    /// [`Error::InvalidParams`] when it runs past the value or past `buffer`,
    /// [`Error::ReplicaIsNotReady`] while the value is being written. Zero copy when
    /// `buffer` lies in this store's pool. `Err(InvalidParams)` for a bad key.
    pub fn get_ranges<K: AsRef<[u8]>>(
        &self,
        key: K,
        buffer: &mut [u8],
        ranges: &[Range],
    ) -> Result<Vec<Result<usize>>> {
        let key = c_key(key.as_ref())?;
        let len = key.as_bytes().len();
        if len == 0 || len > ffi::MOONCAKE_STORE_MAX_KEY_LEN {
            // the library would answer InvalidParams for every fragment: say it once
            return Err(Error::InvalidParams);
        }
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<ffi::mooncake_range_t> = ranges.iter().map(Range::raw).collect();
        let mut results = vec![0i64; ranges.len()];
        // SAFETY: a live handle, a NUL-terminated key, buffer.len() writable bytes, and
        // ranges.len() fragments and results.
        let rc = unsafe {
            ffi::mooncake_store_get_ranges(
                self.raw(),
                key.as_ptr(),
                buffer.as_mut_ptr().cast::<c_void>(),
                buffer.len(),
                raw.as_ptr(),
                raw.len(),
                results.as_mut_ptr(),
            )
        };
        if rc == -1 {
            // MOONCAKE_STORE_INTERNAL_ERROR for the call itself (no fragment ran)
            return Err(Error::InternalError);
        }
        Ok(results.into_iter().map(fragment).collect())
    }

    /// [`get_ranges`](Store::get_ranges) for every i: `keys[i]` into `buffers[i]`, fragments
    /// `ranges[i]`, in as few requests as fit (`mooncake_store_batch_get_ranges`). A bad key
    /// answers `InvalidParams` for each of its fragments. `Err(InvalidParams)` when the lists
    /// differ in length.
    pub fn batch_get_ranges<K: AsRef<[u8]>, B: AsMut<[u8]>>(
        &self,
        keys: &[K],
        buffers: &mut [B],
        ranges: &[&[Range]],
    ) -> Result<Vec<Vec<Result<usize>>>> {
        if keys.len() != buffers.len() || keys.len() != ranges.len() {
            return Err(Error::InvalidParams);
        }
        let mut out: Vec<Vec<Result<usize>>> = Vec::with_capacity(keys.len());
        let mut c_keys = Vec::with_capacity(keys.len());
        let mut raw: Vec<Vec<ffi::mooncake_range_t>> = Vec::with_capacity(keys.len());
        let mut results: Vec<Vec<i64>> = Vec::with_capacity(keys.len());
        let mut gets: Vec<ffi::mooncake_ranged_get_t> = Vec::new();
        let mut which: Vec<usize> = Vec::new();
        for (i, buffer) in buffers.iter_mut().enumerate() {
            raw.push(ranges[i].iter().map(Range::raw).collect());
            results.push(vec![0; ranges[i].len()]);
            match c_key(keys[i].as_ref()) {
                Err(e) => {
                    out.push(vec![Err(e); ranges[i].len()]);
                    c_keys.push(None);
                }
                Ok(k) => {
                    out.push(Vec::new());
                    c_keys.push(Some(k));
                    let buffer = buffer.as_mut();
                    gets.push(ffi::mooncake_ranged_get_t {
                        key: c_keys[i].as_ref().map_or(std::ptr::null(), |k| k.as_ptr()),
                        buffer: buffer.as_mut_ptr().cast(),
                        buffer_size: buffer.len(),
                        ranges: raw[i].as_ptr(),
                        range_count: raw[i].len(),
                        results_out: results[i].as_mut_ptr(),
                    });
                    which.push(i);
                }
            }
        }
        if !gets.is_empty() {
            let mut totals = vec![0i64; gets.len()];
            // SAFETY: a live handle; every get's key NUL-terminated, its buffer writable for
            // its size and distinct (from &mut borrows), its fragments and results arrays of
            // range_count entries, all alive until the call returns.
            self.check(unsafe {
                ffi::mooncake_store_batch_get_ranges(
                    self.raw(),
                    gets.as_ptr(),
                    gets.len(),
                    totals.as_mut_ptr(),
                )
            })?;
        }
        for i in which {
            out[i] = results[i].iter().map(|&rc| fragment(rc)).collect();
        }
        Ok(out)
    }
}
