//! The store's shared memory: [`Store::alloc`] and its [`PoolBuf`], and caller buffers
//! registered with [`Store::register_buffer`].

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::slice;

use crate::{ffi, Error, Result, Store};

impl Store {

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
        self.check(unsafe {
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
        self.check(unsafe {
            ffi::mooncake_store_unregister_buffer(self.raw(), buffer.as_ptr() as *mut c_void)
        })
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
