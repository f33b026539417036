//! Mooncake's copy and move tasks (docs/mooncake-api.md, "tasks"):
//! [`Store::create_copy_task`], [`Store::create_move_task`] and [`Store::query_task`]; and
//! [`Store::mount_file_segment`], the memory of a file lent as a segment.
//!
//! A task runs in the cluster, not in this process: the master queues it for the daemon
//! holding the object's source replica, which copies the bytes and reports. Segments are
//! named as replica descriptors name them: a daemon's `"host:port"` for its own memory, a
//! client's `local_hostname` for memory that client lends.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::os::unix::io::AsRawFd;

use crate::keys::{c_key, c_str};
use crate::{ffi, Result, Store};

/// A task's id: Mooncake's UUID, two 64-bit halves.
pub type TaskId = ffi::mooncake_task_id_t;

/// What a task does (Mooncake's `TaskType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskType {
    /// A new replica in each target segment.
    ReplicaCopy,
    /// The replica in the source segment goes to the target.
    ReplicaMove,
}

/// Where a task stands (Mooncake's `TaskStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Waiting for the daemon that runs it.
    Pending,
    /// Its targets reserved, the bytes on their way.
    Processing,
    /// Ended without publishing anything; [`Task::message`] says why.
    Failed,
    /// Published.
    Success,
}

/// A task's state (Mooncake's `QueryTaskResponse`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// The id its creation returned.
    pub id: TaskId,
    /// Copy or move.
    pub task_type: TaskType,
    /// Where it stands.
    pub status: TaskStatus,
    /// When the master queued it, Unix-epoch milliseconds.
    pub created_at_ms_epoch: i64,
    /// When its state last changed, Unix-epoch milliseconds.
    pub last_updated_at_ms_epoch: i64,
    /// `{0, id of the daemon that runs it}`.
    pub assigned_client: TaskId,
    /// `""` while it runs; `"Task completed successfully"`, or why it failed.
    pub message: String,
}

impl Task {
    /// Whether the task has ended (succeeded or failed).
    pub fn finished(&self) -> bool {
        matches!(self.status, TaskStatus::Success | TaskStatus::Failed)
    }

    fn from_raw(raw: &ffi::mooncake_task_info_t) -> Task {
        // SAFETY: the library NUL-terminates message within its array.
        let message = unsafe { CStr::from_ptr(raw.message.as_ptr()) };
        Task {
            id: raw.id,
            task_type: if raw.type_ == 1 { TaskType::ReplicaMove } else { TaskType::ReplicaCopy },
            status: match raw.status {
                0 => TaskStatus::Pending,
                1 => TaskStatus::Processing,
                2 => TaskStatus::Failed,
                _ => TaskStatus::Success,
            },
            created_at_ms_epoch: raw.created_at_ms_epoch,
            last_updated_at_ms_epoch: raw.last_updated_at_ms_epoch,
            assigned_client: raw.assigned_client,
            message: message.to_string_lossy().into_owned(),
        }
    }
}

impl Store {
    /// Queues a copy of `key`'s value into a new replica in each segment named in
    /// `targets` that holds none yet; its id. `InvalidParams` for no target (or more than
    /// 64) or one that names no segment, `ObjectNotFound`, `ReplicaIsNotReady` (still
    /// being written), `UnavailableInCurrentStatus` (a target taking no allocation now),
    /// `ResourceLimitExceeded` (the master's queue of waiting tasks is full).
    pub fn create_copy_task<K: AsRef<[u8]>, T: AsRef<str>>(
        &self,
        key: K,
        targets: &[T],
    ) -> Result<TaskId> {
        let key = c_key(key.as_ref())?;
        let names = targets.iter().map(|t| c_str(t.as_ref())).collect::<Result<Vec<_>>>()?;
        let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut id = TaskId::default();
        // SAFETY: a live handle; a NUL-terminated key; count NUL-terminated names that
        // outlive the call; a writable id.
        self.check(unsafe {
            ffi::mooncake_store_create_copy_task(
                self.raw(),
                key.as_ptr(),
                pointers.as_mut_ptr(),
                pointers.len(),
                &mut id,
            )
        })?;
        Ok(id)
    }

    /// Queues a move of `key`'s replica in segment `source` to segment `target` (one that
    /// holds a replica already only drops the source's); its id. `InvalidParams` for
    /// `source == target`, a target that names no segment or no replica in `source`; the
    /// rest as [`create_copy_task`](Store::create_copy_task).
    pub fn create_move_task<K: AsRef<[u8]>>(&self, key: K, source: &str, target: &str) -> Result<TaskId> {
        let key = c_key(key.as_ref())?;
        let (source, target) = (c_str(source)?, c_str(target)?);
        let mut id = TaskId::default();
        // SAFETY: a live handle; NUL-terminated strings; a writable id.
        self.check(unsafe {
            ffi::mooncake_store_create_move_task(
                self.raw(),
                key.as_ptr(),
                source.as_ptr(),
                target.as_ptr(),
                &mut id,
            )
        })?;
        Ok(id)
    }

    /// The task's state. `ObjectNotFound` for an id the master does not know: another
    /// tenant's, forgotten (finished long ago) or from before a master restart.
    pub fn query_task(&self, id: TaskId) -> Result<Task> {
        let mut raw = ffi::mooncake_task_info_t {
            id,
            type_: 0,
            status: 0,
            created_at_ms_epoch: 0,
            last_updated_at_ms_epoch: 0,
            assigned_client: TaskId::default(),
            message: [0; ffi::MOONCAKE_TASK_MESSAGE_SIZE],
        };
        // SAFETY: a live handle and a writable info struct.
        self.check(unsafe { ffi::mooncake_store_query_task(self.raw(), id, &mut raw) })?;
        Ok(Task::from_raw(&raw))
    }

    /// Lends `[offset, offset + size)` of the open file `file` as a segment of this store
    /// (Mooncake's `mount_segment` of a path); its id. The daemon maps the range and keeps
    /// its own reference to the file; the file must not shrink meanwhile, so only a device
    /// or a memfd created with `MFD_ALLOW_SEALING` (the daemon seals it) is taken:
    /// `NotSupported` for any other file. `InvalidParams` for an empty range, one past the
    /// file's end, or an offset that is not a multiple of the page size. Unmounted as the
    /// other segments are ([`unmount_segment`](Store::unmount_segment), or close).
    pub fn mount_file_segment<F: AsRawFd>(&self, file: &F, offset: u64, size: u64) -> Result<u64> {
        let mut id = 0u64;
        // SAFETY: a live handle; the descriptor is the caller's and open during the call
        // (the daemon takes its own); a writable id.
        self.check(unsafe {
            ffi::mooncake_store_mount_file_segment(self.raw(), file.as_raw_fd(), offset, size, &mut id)
        })?;
        Ok(id)
    }
}
