"""Every refusal says why (issue 30): a failed setup()/connect() writes one line on stderr
with the reason and the fix, and last_error() gives the same text where a Python user looks;
the int codes stay Mooncake's. Key errors name their rule; messages are per thread."""
import threading

from mooncake_store import MooncakeDistributedStore

INVALID_PARAMS = -600
RPC_FAIL = -900


def stderr_lines(capfd):
    return [line for line in capfd.readouterr().err.splitlines() if line]


def test_connect_without_a_daemon_says_where_and_what_to_do(capfd, tmp_path):
    path = str(tmp_path / "absent.sock")
    s = MooncakeDistributedStore()
    capfd.readouterr()
    assert s.connect(socket_path=path, local_buffer_size=1 << 20) == RPC_FAIL
    expected = (f"mooncaked is not running at {path} (connect: No such file or directory): "
                "start it (systemctl start mooncaked) or point MOONCAKE_SOCKET / connect()'s "
                "socket_path at its --socket")
    lines = stderr_lines(capfd)
    assert len(lines) == 1, lines
    assert f"mooncake_store_connect: {expected}" in lines[0]
    assert s.last_error() == expected
    # A call that succeeds (health_check answers 1: not connected) leaves nothing to say.
    assert s.health_check() == 1
    assert s.last_error() == ""


def test_setup_naming_another_master_names_both(capfd, master):
    host, port = master.rsplit(":", 1)
    s = MooncakeDistributedStore()
    capfd.readouterr()
    assert s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "",
                   f"127.0.0.2:{port}") == INVALID_PARAMS
    lines = stderr_lines(capfd)
    assert len(lines) == 1, lines
    message = s.last_error()
    assert f"client expects master 127.0.0.2:{port}" in message
    assert "pass setup() the daemon's master as master_server_addr" in message
    assert f"mooncake_store_setup: {message}" in lines[0]


def test_setup_arguments_the_binding_refuses_say_why(capfd, master):
    s = MooncakeDistributedStore()
    capfd.readouterr()
    assert s.setup("localhost", "P2PHANDSHAKE", "12XB", 1 << 20, "tcp", "",
                   master) == INVALID_PARAMS
    lines = stderr_lines(capfd)
    assert len(lines) == 1, lines
    expected = ("global_segment_size '12XB' is not a size: an int of bytes, or a str such as "
                "'4096', '16MB', '1.5G'")
    assert lines[0] == f"mooncake_store: setup(): {expected}"
    assert s.last_error() == expected
    assert s.connect(local_buffer_size="lots") == INVALID_PARAMS
    assert s.last_error().startswith("local_buffer_size 'lots' is not a size")
    # The next call that reaches the library has the library's message: here, none.
    assert s.connect(local_buffer_size=1 << 20) == 0
    assert s.last_error() == ""
    assert s.close() == 0


def test_key_errors_name_the_rule(store, key):
    assert store.put("", b"v") == INVALID_PARAMS
    assert store.last_error() == "key is empty"
    assert store.put("k" * 4097, b"v") == INVALID_PARAMS
    assert store.last_error() == "key longer than 4096 bytes (4097)"
    assert store.put("a\0b", b"v") == INVALID_PARAMS
    assert store.last_error().startswith("key holds a NUL byte (at byte 1)")
    assert store.put(key(), b"v") == 0
    assert store.last_error() == ""
    assert store.get_size(key("missing")) == -704
    assert store.last_error() == "object not found (-704)"


def test_last_error_is_per_thread(store):
    failed, resumed = threading.Event(), threading.Event()
    seen = []

    def fail():
        assert store.put("", b"v") == INVALID_PARAMS
        failed.set()
        resumed.wait(30)
        seen.append(store.last_error())

    t = threading.Thread(target=fail)
    t.start()
    assert failed.wait(30)
    assert store.last_error() == ""  # the other thread's failure is not this one's
    assert store.is_exist("anything-at-all") == 0
    resumed.set()
    t.join(30)
    assert seen == ["key is empty"]  # and this thread's success did not clear it
