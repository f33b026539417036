//! Mooncake's segment calls and replica clearing (docs/mooncake-api.md, "segments"):
//! [`Store::batch_replica_clear`], [`Store::mount_segment`],
//! [`Store::allocate_and_mount_segment`], [`Store::unmount_segment`] and
//! [`Store::unmount_local_disk_segment`].
//!
//! A segment lent here belongs to the store's connection: unmounting it, closing the store
//! or the end of the process drains it (every object living only there is moved to another
//! segment with room) and unmounts it.

use std::os::raw::{c_int, c_void};

use crate::error::check;
use crate::keys::{c_str, merge, KeyBatch};
use crate::pool::PoolBuf;
use crate::{ffi, Result, Store};

/// What [`Store::unmount_segment`] did with the objects in the segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Moved to other segments.
    pub moved: u64,
    /// No segment had room for them: gone with the segment.
    pub dropped: u64,
}

impl Store {
    /// Clears the replicas of `keys` whose read lease has run out (Mooncake's
    /// `batch_replica_clear`): every replica when `segment_name` is `None` or empty, else
    /// only those on the daemon of that name ("host:port", as
    /// [`get_hostname`](Store::get_hostname) and replica descriptors name it). One result
    /// per key: `Ok` cleared, [`Error::ObjectHasLease`](crate::Error::ObjectHasLease)
    /// skipped (a read lease runs), `ObjectNotFound`, `ReplicaIsNotReady`,
    /// `UnavailableInCurrentStatus` (hard-pinned), `SegmentNotFound` (no replica there),
    /// `InvalidParams` (a bad key). The call itself fails with `InvalidParams` for a segment
    /// name no daemon can have.
    pub fn batch_replica_clear<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        segment_name: Option<&str>,
    ) -> Result<Vec<Result<()>>> {
        let name = c_str(segment_name.unwrap_or(""))?;
        let (mut batch, errors) = KeyBatch::new(keys);
        let mut results: Vec<c_int> = vec![0; batch.index.len()];
        if !batch.index.is_empty() {
            // SAFETY: a live handle; count NUL-terminated keys; a NUL-terminated name;
            // count writable results.
            self.check(unsafe {
                ffi::mooncake_store_batch_replica_clear(
                    self.raw(),
                    batch.pointers.as_mut_ptr(),
                    batch.index.len(),
                    name.as_ptr(),
                    results.as_mut_ptr(),
                )
            })?;
        }
        Ok(merge(errors, &batch.index, results, check))
    }

    /// Lends a buffer of the store's pool to the cluster as a segment of this store; returns
    /// its id. The buffer is borrowed for as long as the segment is mounted: unmount it (or
    /// close the store) before the buffer goes back to the pool. Memory the daemon does not
    /// share cannot be lent: [`Error::InvalidParams`](crate::Error::InvalidParams) for a
    /// buffer that is not in this store's pool, `PermissionDenied` when the daemon has
    /// tenants.
    pub fn mount_segment(&self, buffer: &mut PoolBuf<'_>) -> Result<u64> {
        let mut id = 0u64;
        // SAFETY: a live handle; the buffer is pool memory of at least len bytes.
        self.check(unsafe {
            ffi::mooncake_store_mount_segment(
                self.raw(),
                buffer.as_mut_ptr().cast::<c_void>(),
                buffer.len() as u64,
                &mut id,
            )
        })?;
        Ok(id)
    }

    /// Has the daemon map `size` bytes and lend them as a segment of this store; returns
    /// (its id, its size). `InvalidParams` for size 0, `ResourceLimitExceeded` when the
    /// daemon's host cannot back it, or over the daemon's caps on client segments.
    pub fn allocate_and_mount_segment(&self, size: u64) -> Result<(u64, u64)> {
        let (mut id, mut allocated) = (0u64, 0u64);
        // SAFETY: a live handle and two writable u64s.
        self.check(unsafe {
            ffi::mooncake_store_allocate_and_mount_segment(self.raw(), size, &mut id, &mut allocated)
        })?;
        Ok((id, allocated))
    }

    /// Drains and unmounts one of this store's segments, returning once done.
    /// `SegmentNotFound` when it is not one of them.
    pub fn unmount_segment(&self, segment_id: u64) -> Result<Drained> {
        let mut d = Drained::default();
        // SAFETY: a live handle and two writable u64s.
        self.check(unsafe {
            ffi::mooncake_store_unmount_segment(self.raw(), segment_id, &mut d.moved, &mut d.dropped)
        })?;
        Ok(d)
    }

    /// Mooncake's `unmount_local_disk_segment`: `Ok` when the daemon has no SSD tier,
    /// `NotSupported` when it has one (the daemon's, not this store's to take away).
    pub fn unmount_local_disk_segment(&self) -> Result<()> {
        // SAFETY: a live handle.
        self.check(unsafe { ffi::mooncake_store_unmount_local_disk_segment(self.raw()) })
    }
}
