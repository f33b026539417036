//! Copy and move tasks and files lent by descriptor (issue 31) against the harness's
//! cluster: one daemon lending memory of its own, so a store that names itself lends a
//! second segment, under its own name, on the same daemon.
#![deny(warnings)]

mod common;

use std::fs::File;
use std::os::raw::{c_char, c_int, c_uint};
use std::os::unix::io::FromRawFd;
use std::time::{Duration, Instant};

use common::{cluster_env, pattern, prefix};
use mooncake_store::{Error, Store, Task, TaskId, TaskStatus, TaskType};

const MIB: u64 = 1 << 20;

/// A store named `name` lending `lent` bytes under it.
fn named(name: &str, lent: u64) -> Store {
    cluster_env("MOONCAKE_SOCKET");
    Store::setup(name, "P2PHANDSHAKE", lent, 16 * MIB, "tcp", "", "").expect("setup")
}

fn finished(s: &Store, id: TaskId) -> Task {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = s.query_task(id).unwrap();
        if task.finished() {
            return task;
        }
        assert!(Instant::now() < deadline, "task {id:?} did not end within 60 s: {task:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn locations(s: &Store, key: &str) -> Vec<String> {
    let mut at: Vec<String> = s.get_replica_desc(key).unwrap().into_iter().map(|d| d.location).collect();
    at.sort();
    at
}

#[test]
fn copy_then_move_between_names() {
    let lender = named("rs-tasks-lender:1", 8 * MIB);
    assert_eq!(lender.get_hostname().unwrap(), "rs-tasks-lender:1");
    let daemon = cluster_env("MOONCAKE_HOSTNAME");
    let key = prefix("tasks") + "copied";
    let value = pattern(300_000, 3);
    lender.put(&key, &value).unwrap();
    let first = locations(&lender, &key);
    assert_eq!(first.len(), 1);
    // A copy into whichever of the two names does not hold it.
    let other = if first[0] == daemon { "rs-tasks-lender:1".to_string() } else { daemon.clone() };
    let id = lender.create_copy_task(&key, &[other.as_str()]).unwrap();
    let task = finished(&lender, id);
    assert_eq!(task.status, TaskStatus::Success, "{}", task.message);
    assert_eq!((task.task_type, task.id), (TaskType::ReplicaCopy, id));
    assert_eq!(task.message, "Task completed successfully");
    assert!(task.last_updated_at_ms_epoch >= task.created_at_ms_epoch && task.created_at_ms_epoch > 0);
    let mut both = vec![daemon.clone(), "rs-tasks-lender:1".to_string()];
    both.sort();
    assert_eq!(locations(&lender, &key), both);
    // A move onto a name that holds a replica already drops the source's.
    let id = lender.create_move_task(&key, &other, &first[0]).unwrap();
    let task = finished(&lender, id);
    assert_eq!(task.status, TaskStatus::Success, "{}", task.message);
    assert_eq!(task.task_type, TaskType::ReplicaMove);
    assert_eq!(locations(&lender, &key), first);
    assert_eq!(lender.get(&key).unwrap(), Some(value));
    lender.remove(&key, true).unwrap();
    lender.close().unwrap();
}

#[test]
fn refusals() {
    let s = common::connect(16 * MIB);
    let key = prefix("tasks-refused") + "k";
    s.put(&key, b"v").unwrap();
    let here = cluster_env("MOONCAKE_HOSTNAME");
    assert_eq!(s.create_copy_task(prefix("none"), &[here.as_str()]), Err(Error::ObjectNotFound));
    assert_eq!(s.create_copy_task(&key, &["nobody:1"]), Err(Error::InvalidParams));
    assert_eq!(s.create_copy_task::<_, &str>(&key, &[]), Err(Error::InvalidParams));
    assert_eq!(s.create_copy_task(&key, &["a\0b"]), Err(Error::InvalidParams));
    assert_eq!(s.create_move_task(&key, &here, &here), Err(Error::InvalidParams));
    assert_eq!(s.create_move_task(&key, &here, "nobody:1"), Err(Error::InvalidParams));
    assert_eq!(s.query_task(TaskId { high: 1, low: 2 }), Err(Error::ObjectNotFound));
    s.remove(&key, true).unwrap();
}

extern "C" {
    fn memfd_create(name: *const c_char, flags: c_uint) -> c_int;
}

#[test]
fn a_sealable_memfd_is_lent_and_a_plain_file_is_not() {
    const MFD_ALLOW_SEALING: c_uint = 2;
    let s = named("rs-tasks-file:1", 0);
    // SAFETY: a NUL-terminated name; the descriptor is owned by the File from here on.
    let fd = unsafe { memfd_create(b"lent\0".as_ptr().cast(), MFD_ALLOW_SEALING) };
    assert!(fd >= 0);
    let memfd = unsafe { File::from_raw_fd(fd) };
    memfd.set_len(4 * MIB).unwrap();
    let id = s.mount_file_segment(&memfd, 0, 4 * MIB).unwrap();
    assert_eq!(s.mount_file_segment(&memfd, 1, MIB), Err(Error::InvalidParams));
    assert_eq!(s.mount_file_segment(&memfd, 0, 8 * MIB), Err(Error::InvalidParams));
    s.unmount_segment(id).unwrap();
    let path = std::env::temp_dir().join(format!("rs-tasks-{}", std::process::id()));
    let plain = File::create(&path).unwrap();
    plain.set_len(4 * MIB).unwrap();
    assert_eq!(s.mount_file_segment(&plain, 0, 4 * MIB), Err(Error::NotSupported));
    std::fs::remove_file(&path).unwrap();
    s.close().unwrap();
}
