"""Mooncake's commands (issue 31, part pkg): mooncake_master (the master, Mooncake's flags as
given) and mooncake_client (Mooncake's standalone real client, here mooncaked with its flags
translated), and MooncakeDistributedStore.setup_dummy() attaching to the daemon
mooncake_client started, as Mooncake's dummy clients attach to a real client.

The commands are run as `python -m mooncake.cli` / `python -m mooncake.cli_client` from the
build tree (the console scripts pip installs call the same main(); install_test and
pip_install_test check those), and find this build's programs through
mooncake/_install_paths.py. Their own master and daemon, on free ports, beside the suite's
cluster.
"""
import os
import socket
import subprocess
import sys
import time
import warnings

import pytest

from mooncake.cli_client import translate
from mooncake.store import MooncakeDistributedStore

INVALID_PARAMS = -600


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_client_flags_take_mooncake_defaults_and_names():
    args = translate([], environ={})
    assert args[:3] == ["--port=50052", "--master=127.0.0.1:50051", "--global_segment_size=4GB"]
    assert "--metrics_port=-1" in args  # Mooncake's real client serves no HTTP by default
    args = translate(["--master_server_address=10.0.0.9:7000", "--port", "7001",
                      "--host=0.0.0.0", "--enable_http_server", "--http_port=9400",
                      "--device_names=mlx5_0", "--threads=4"],
                     environ={"MOONCAKE_SOCKET": "/tmp/x.sock"})
    # Later flags win in the daemon's parser: Mooncake's defaults come first.
    assert args.index("--master=10.0.0.9:7000") > args.index("--master=127.0.0.1:50051")
    assert args[args.index("--port") + 1] == "7001"
    assert "--transfer_bind_address=0.0.0.0" in args and "--metrics_port=9400" in args
    assert "--device_names=mlx5_0" in args and "--threads=4" in args  # the daemon's to judge
    assert "--socket=/tmp/x.sock" in args
    assert "--hostname=node7" in translate(["--host", "node7:50052"], environ={})
    args = translate(["--metrics_port=0", "--socket=/s"], environ={"MOONCAKE_SOCKET": "/t"})
    assert "--metrics_port=-1" not in args and "--socket=/t" not in args


def test_client_offload_is_the_daemons_ssd_tier():
    assert not any(a.startswith("--ssd") for a in translate(["--noenable_offload"], environ={}))
    args = translate(["--enable_offload=true"], environ={})
    assert "--ssd_path=/data/file_storage" in args and f"--ssd_capacity={2 << 40}" in args
    args = translate(["--enable_offload"], environ={
        "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/nvme/mc",
        "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES": "1073741824"})
    assert "--ssd_path=/nvme/mc" in args and "--ssd_capacity=1073741824" in args
    args = translate(["--enable_offload", "--ssd_path=/mine", "--ssd_capacity=1GB"], environ={})
    assert args.count("--ssd_path=/mine") == 1 and not any(a == "--ssd_path=/data/file_storage"
                                                           for a in args)
    with pytest.raises(ValueError, match="is not a boolean"):
        translate(["--enable_offload=perhaps"], environ={})
    with pytest.raises(ValueError, match="needs a value"):
        translate(["--http_port"], environ={})


def wait_for(predicate, process, log, what, timeout=60.0):
    """Until predicate() holds; fails at once when process exits (generous bound: a loaded
    machine starts programs slowly)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"{what}: exited with {process.returncode}: {log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.05)


@pytest.fixture
def standalone(tmp_path):
    """A master by mooncake_master and a real client by mooncake_client, on free ports:
    (master address, daemon address, daemon socket)."""
    master_port, daemon_port = free_port(), free_port()
    sock = str(tmp_path / "real-client.sock")
    env = dict(os.environ, MOONCAKE_SOCKET=sock)
    env.pop("MOONCAKE_CLUSTER_KEY_FILE", None)  # loopback peers need no key
    procs = []
    master_log, client_log = tmp_path / "master.log", tmp_path / "client.log"
    try:
        with open(master_log, "w") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "mooncake.cli", f"--port={master_port}",
                 "--max_threads=2", "--metrics_port=-1", "--rpc_address=127.0.0.1"],
                env=env, stdout=out, stderr=subprocess.STDOUT))
        with open(client_log, "w") as out:
            client = subprocess.Popen(
                [sys.executable, "-m", "mooncake.cli_client",
                 f"--master_server_address=127.0.0.1:{master_port}", f"--port={daemon_port}",
                 "--global_segment_size=64MB", "--hostname=127.0.0.1"],
                env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(client)
        wait_for(lambda: os.path.exists(sock), client, client_log,
                 "mooncake_client's daemon socket")
        yield f"127.0.0.1:{master_port}", f"127.0.0.1:{daemon_port}", sock
    finally:
        for p in reversed(procs):  # the daemon first: it unmounts at the master
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_setup_dummy_attaches_to_the_client_started_by_mooncake_client(standalone, monkeypatch):
    master, daemon, sock = standalone
    monkeypatch.setenv("MOONCAKE_SOCKET", sock)
    store = MooncakeDistributedStore()
    assert store.setup_dummy(3200 << 20, 16 << 20, daemon) == 0
    assert store.get_hostname() == daemon
    assert store.put("standalone/k", b"via the real client") == 0
    assert store.get("standalone/k") == b"via the real client"
    assert store.close() == 0
    # A real client of another port is not this one: -600, with a warning saying so.
    other = MooncakeDistributedStore()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert other.setup_dummy(0, 16 << 20, "127.0.0.1:1") == INVALID_PARAMS
    assert any("is not this host's daemon" in str(w.message) for w in caught)
    # setup() reaches the same daemon, naming the master mooncake_master started.
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    assert s.get("standalone/k") == b"via the real client"
    assert s.close() == 0


def test_commands_report_missing_programs(monkeypatch, tmp_path):
    """Without the programs anywhere, the commands say where they looked and how to fix it."""
    env = dict(os.environ, MOONCAKE_BIN_DIR=str(tmp_path), PATH=str(tmp_path))
    code = ("import mooncake._programs as p; p.BIN_DIRS = []; "
            "import mooncake.cli_client as c, sys; sys.exit(c.main(['--port=1']))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 127
    assert "mooncaked not found" in done.stderr and "MOONCAKE_BIN_DIR" in done.stderr
