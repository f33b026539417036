"""Copy and move tasks and client names in Python (issue 31; docs/mooncake-api.md, "naming"
and "tasks"): Mooncake's create_copy_task / create_move_task / query_task shapes (a task id
is a tuple of two ints; ((0, 0), code) when refused; (None, code) for an unknown task),
QueryTaskResponse, and setup()'s local_hostname naming the memory a store lends, as
get_hostname(), replica descriptors, preferred_segment and copy/move targets say it.
"""
import os
import time

import pytest

import mooncake_store
from mooncake.store import (MooncakeDistributedStore, QueryTaskResponse, ReplicateConfig,
                            TaskStatus, TaskType)

LENT = 16 << 20
POOL = 32 << 20


def named(name, lent=LENT):
    s = MooncakeDistributedStore()
    rc = s.setup(name, "P2PHANDSHAKE", lent, POOL, "tcp", "", os.environ["MOONCAKE_MASTER"])
    assert rc == 0, mooncake_store.strerror(rc)
    return s


@pytest.fixture
def pair():
    """Two stores lending memory at the one daemon, under names of their own."""
    tag = str(os.getpid())
    a, b = named("task-a-" + tag + ":1"), named("task-b-" + tag + ":2")
    yield a, b
    a.close()
    b.close()


def put_at(store, key, segment, value):
    c = ReplicateConfig()
    c.preferred_segment = segment
    assert store.put(key, value, c) == 0


def endpoints(store, key):
    return sorted(d.get_memory_descriptor().buffer_descriptor.transport_endpoint
                  for d in store.get_replica_desc(key) if d.is_memory_replica())


def finished(store, task_id, timeout=60):
    """The task's response once it has ended (a task runs on its daemon's next round)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp, err = store.query_task(task_id)
        assert err == 0
        if resp.status in (TaskStatus.SUCCESS, TaskStatus.FAILED):
            return resp
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} did not end within {timeout} s")


def test_names_and_types():
    r = QueryTaskResponse()
    assert r.id == (0, 0) and r.assigned_client == (0, 0)
    assert r.type == TaskType.REPLICA_COPY and r.status == TaskStatus.PENDING
    assert r.message == "" and r.created_at_ms_epoch == 0
    assert "QueryTaskResponse(id=0-0" in repr(r)
    assert [int(v) for v in (TaskStatus.PENDING, TaskStatus.PROCESSING, TaskStatus.FAILED,
                             TaskStatus.SUCCESS)] == [0, 1, 2, 3]
    assert int(TaskType.REPLICA_MOVE) == 1


def test_refusals_keep_mooncakes_shapes(store, key):
    store.put(key("here"), b"x" * 100)
    me = store.get_hostname()
    assert store.create_copy_task(key("missing"), [me]) == ((0, 0), -704)
    assert store.create_copy_task(key("here"), ["nobody:1"]) == ((0, 0), -600)
    assert store.create_copy_task(key("here"), []) == ((0, 0), -600)
    assert store.create_move_task(key("missing"), me, "nobody:1") == ((0, 0), -704)
    assert store.create_move_task(key("here"), me, me) == ((0, 0), -600)
    assert store.query_task((1, 2)) == (None, -704)
    with pytest.raises(TypeError):
        store.query_task("not a uuid")


def test_a_named_store_lends_under_its_name(pair, key):
    a, b = pair
    name = a.get_hostname()
    assert name.startswith("task-a-") and name.endswith(":1")
    put_at(a, key(), name, b"v" * 1000)
    assert endpoints(a, key()) == [name]
    # Without a port, one of 12300..14300 is picked and held.
    c = named("localhost", lent=0)
    host, port = c.get_hostname().rsplit(":", 1)
    assert host == "localhost" and 12300 <= int(port) <= 14300
    # A store that lends nothing names its daemon for placement.
    cfg = ReplicateConfig()
    cfg.preferred_segment = c.get_hostname()
    assert c.put(key("own"), b"w" * 100, cfg) == 0
    assert endpoints(c, key("own")) == [os.environ["MOONCAKE_HOSTNAME"]]
    c.close()


def test_copy_then_move(pair, key):
    a, b = pair
    value = os.urandom(300000)
    put_at(a, key(), a.get_hostname(), value)
    task_id, err = b.create_copy_task(key(), [b.get_hostname()])
    assert err == 0 and isinstance(task_id, tuple) and len(task_id) == 2
    resp = finished(b, task_id)
    assert resp.status == TaskStatus.SUCCESS, resp.message
    assert resp.type == TaskType.REPLICA_COPY and resp.id == task_id
    assert resp.message == "Task completed successfully"
    assert resp.last_updated_at_ms_epoch >= resp.created_at_ms_epoch > 0
    assert endpoints(b, key()) == sorted([a.get_hostname(), b.get_hostname()])
    # Move the second replica to the daemon's own memory: the source goes.
    daemon = os.environ["MOONCAKE_HOSTNAME"]
    task_id, err = a.create_move_task(key(), b.get_hostname(), daemon)
    assert err == 0
    resp = finished(a, task_id)
    assert resp.status == TaskStatus.SUCCESS, resp.message
    assert resp.type == TaskType.REPLICA_MOVE
    assert endpoints(a, key()) == sorted([a.get_hostname(), daemon])
    assert a.get(key()) == value


def test_mount_segment_of_a_file(key, tmp_path):
    """Mooncake's mount_segment(path): a memfd (sealable: the daemon seals it against
    shrinking) is lent under the store's name, holds objects, and unmounts; a plain file,
    which could be truncated under the daemon, is refused with -1012; a missing file is
    -1101."""
    size = 4 << 20
    store = named(f"file-{os.getpid()}:3", lent=0)
    fd = os.memfd_create("lent", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        path = f"/proc/{os.getpid()}/fd/{fd}"
        r = store.mount_segment(path, size)
        assert r["ret"] == 0 and len(r["segment_ids"]) == 1, r
        with pytest.raises(OSError):  # sealed against shrinking by the daemon
            os.ftruncate(fd, 0)
        put_at(store, key("in-file"), store.get_hostname(), b"f" * 5000)
        assert endpoints(store, key("in-file")) == [store.get_hostname()]
        assert os.pread(fd, size, 0).count(b"f" * 5000) == 1  # the bytes are the file's
        assert store.unmount_segment(r["segment_ids"]) == 0
        assert store.get(key("in-file")) == b"f" * 5000  # moved out before the unmount
    finally:
        os.close(fd)
    plain = tmp_path / "segment"
    plain.write_bytes(b"\0" * size)
    assert store.mount_segment(str(plain), size)["ret"] == -1012
    assert store.mount_segment(str(tmp_path / "missing"), size)["ret"] == -1101
    assert store.mount_segment(str(plain), size, offset=1)["ret"] == -600
    store.close()
