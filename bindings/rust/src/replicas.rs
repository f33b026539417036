//! Replica descriptors and the SSD tier: [`Store::get_replica_desc`],
//! [`Store::batch_get_replica_desc`] and [`Store::set_ssd_offload`].

use std::ffi::CStr;
use std::os::raw::c_int;

use crate::error::check;
use crate::keys::{c_key, KeyBatch};
use crate::{ffi, Error, Result, Store};

/// Where a replica lives (`MOONCAKE_REPLICA_MEMORY`, `MOONCAKE_REPLICA_DISK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaKind {
    /// A copy in a daemon's memory.
    Memory,
    /// A copy on a daemon's SSD tier (its `--ssd_path`).
    Disk,
}

/// One replica of an object (`mooncake_replica_desc_t`). Only complete replicas are listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaDesc {
    /// Memory or disk.
    pub kind: ReplicaKind,
    /// `MOONCAKE_REPLICA_COMPLETE` (1).
    pub status: i32,
    /// `"host:port"` of the daemon holding the replica, as its `get_hostname()`.
    pub location: String,
    /// Bytes of the value.
    pub size: u64,
}

impl ReplicaDesc {
    /// Mooncake's `is_memory_replica()`.
    pub fn is_memory_replica(&self) -> bool {
        self.kind == ReplicaKind::Memory
    }

    /// Mooncake's `is_disk_replica()`: a replica on a daemon's SSD tier.
    pub fn is_disk_replica(&self) -> bool {
        self.kind == ReplicaKind::Disk
    }

    fn from_c(d: &ffi::mooncake_replica_desc_t) -> Result<ReplicaDesc> {
        let kind = match d.kind {
            0 => ReplicaKind::Memory,
            1 => ReplicaKind::Disk,
            _ => return Err(Error::InternalError),
        };
        // SAFETY: the library NUL-terminates the location inside the array.
        let location = unsafe { CStr::from_ptr(d.location.as_ptr()) };
        Ok(ReplicaDesc {
            kind,
            status: d.status,
            location: location.to_string_lossy().into_owned(),
            size: d.size,
        })
    }
}

/// The offload choice of a store's puts (`mooncake_store_set_ssd_offload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SsdOffload {
    /// As the master's `--enable_offload` says (`MOONCAKE_SSD_OFFLOAD_DEFAULT`).
    #[default]
    Default,
    /// Every put asks for its value to be offloaded (`MOONCAKE_SSD_OFFLOAD_ON`).
    On,
    /// No put is offloaded at put time (`MOONCAKE_SSD_OFFLOAD_OFF`).
    Off,
}

/// Descriptors per key on the first try: replica_num memory replicas (1 unless asked
/// otherwise) and at most a disk one. A key with more is asked again with room for all.
const FIRST_CAPACITY: usize = 8;
/// Keys per batch call, so the descriptors' room stays small for any batch.
const BATCH_KEYS: usize = 1024;

fn empty_desc() -> ffi::mooncake_replica_desc_t {
    ffi::mooncake_replica_desc_t {
        kind: 0,
        status: 0,
        size: 0,
        location: [0; ffi::MOONCAKE_STORE_LOCATION_SIZE],
    }
}

impl Store {
    /// The replicas of `key`, memory and SSD ones, with the daemon holding each
    /// (`mooncake_store_get_replica_desc`). Reads no bytes, but takes the read lease a get
    /// takes (a [`remove`](Store::remove) without force meanwhile is
    /// [`Error::ObjectHasLease`]). [`Error::ObjectNotFound`] on a miss.
    pub fn get_replica_desc<K: AsRef<[u8]>>(&self, key: K) -> Result<Vec<ReplicaDesc>> {
        let key = c_key(key.as_ref())?;
        self.replicas_of(&key, FIRST_CAPACITY)
    }

    fn replicas_of(&self, key: &CStr, mut capacity: usize) -> Result<Vec<ReplicaDesc>> {
        let mut attempt = 0;
        loop {
            let mut room = vec![empty_desc(); capacity];
            let mut n = 0usize;
            // SAFETY: a live handle, a NUL-terminated key, `capacity` writable descriptors.
            let rc = unsafe {
                ffi::mooncake_store_get_replica_desc(
                    self.raw(),
                    key.as_ptr(),
                    room.as_mut_ptr(),
                    capacity,
                    &mut n,
                )
            };
            // Replicas may come and go between two asks: a few tries.
            if rc == Error::InvalidParams.code() && n > capacity && attempt < 3 {
                capacity = n;
                attempt += 1;
                continue;
            }
            self.check(rc)?;
            return room[..n].iter().map(ReplicaDesc::from_c).collect();
        }
    }

    /// [`get_replica_desc`](Store::get_replica_desc) for many keys in as few requests as the
    /// library needs: one result per key, in order.
    pub fn batch_get_replica_desc<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<Result<Vec<ReplicaDesc>>>> {
        let (batch, errors) = KeyBatch::new(keys);
        let mut found: Vec<Result<Vec<ReplicaDesc>>> = Vec::with_capacity(batch.index.len());
        for chunk in batch.pointers.chunks(BATCH_KEYS) {
            let mut pointers = chunk.to_vec();
            let mut room = vec![empty_desc(); chunk.len() * FIRST_CAPACITY];
            let mut counts = vec![0usize; chunk.len()];
            let mut results: Vec<c_int> = vec![0; chunk.len()];
            // SAFETY: a live handle; chunk.len() NUL-terminated keys; FIRST_CAPACITY writable
            // descriptors, one count and one result per key.
            self.check(unsafe {
                ffi::mooncake_store_batch_get_replica_desc(
                    self.raw(),
                    pointers.as_mut_ptr(),
                    chunk.len(),
                    room.as_mut_ptr(),
                    FIRST_CAPACITY,
                    counts.as_mut_ptr(),
                    results.as_mut_ptr(),
                )
            })?;
            for (j, &rc) in results.iter().enumerate() {
                found.push(if rc == Error::InvalidParams.code() && counts[j] > FIRST_CAPACITY {
                    // SAFETY: the pointer is one of batch's live NUL-terminated keys.
                    self.replicas_of(unsafe { CStr::from_ptr(chunk[j]) }, counts[j])
                } else {
                    check(rc).and_then(|()| {
                        let first = j * FIRST_CAPACITY;
                        room[first..first + counts[j]].iter().map(ReplicaDesc::from_c).collect()
                    })
                });
            }
        }
        // Back in the caller's order: the keys refused before the library keep their error.
        let mut found = found.into_iter();
        Ok(errors
            .into_iter()
            .map(|error| match error {
                Some(e) => Err(e),
                None => found.next().expect("one result per valid key"),
            })
            .collect())
    }

    /// Sets whether this store's later puts, batch puts and upserts ask for their values to
    /// be offloaded to the SSD tier of the daemon holding them; holds across reconnects.
    /// Such a put is stored and answered as any other; the copy to SSD follows in the
    /// background, where the daemon has an SSD tier.
    pub fn set_ssd_offload(&self, mode: SsdOffload) -> Result<()> {
        let mode = match mode {
            SsdOffload::Default => 0,
            SsdOffload::On => 1,
            SsdOffload::Off => 2,
        };
        // SAFETY: a live handle.
        self.check(unsafe { ffi::mooncake_store_set_ssd_offload(self.raw(), mode) })
    }
}
