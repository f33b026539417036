"""SGLang's Mooncake backend probes the master over HTTP before it starts; these tests replay
that probe, with the same checks on the answer, against the real master of the fixture
(scripts/with-cluster.sh exports its admin URL as MOONCAKE_MASTER_ADMIN_URL).

What SGLang does (sgl-project/sglang, python/sglang/srt/mem_cache/storage/mooncake_store/
mooncake_store.py, MooncakeStore.check_server, run from __init__ when check_server is set,
MOONCAKE_CHECK_SERVER, default false):

    url = f"http://{master_server_address.split(':')[0]}:{master_metrics_port}/get_all_segments"
    loop for up to SETUP_TIMEOUT (600 s):
        resp = requests.get(url, timeout=3)   # an exception: log, sleep 3 s, try again
        if resp.text == "": sleep 3 s, try again  # no segment mounted yet
        else: started                          # the status code is not looked at

master_metrics_port is MOONCAKE_MASTER_METRICS_PORT (python/sglang/srt/environ.py, default
9003) or "master_metrics_port" in its JSON config. That is the only HTTP request the backend
makes to the master; everything else goes through MooncakeDistributedStore.

SGLang sends no admin token, and /get_all_segments names segments (daemons' addresses), so a
master with a cluster key refuses it (401, common/admin/admin_http.h): with an empty body while no
segment is mounted, a JSON error after, which keeps SGLang's reading of it (docs/operations.md).
"""
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

ADMIN_LINE = re.compile(r"master: admin HTTP listening on (\S+):(\d+)")


def sglang_segments_text(url, timeout=3, token=None):
    """One probe as SGLang makes it: the body's text, whatever the status (requests does not
    raise on 4xx/5xx, so neither does this); an exception when there is no answer. token:
    the admin token, which SGLang does not send (the operator's view)."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def sglang_check_server(url, deadline_s, pause_s=0.2):
    """SGLang's wait loop (3 s pauses shortened): True once an answer's text is non-empty,
    False when deadline_s passes first."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        try:
            _, _, text = sglang_segments_text(url)
        except Exception:
            time.sleep(pause_s)
            continue
        if text == "":
            time.sleep(pause_s)
            continue
        return True
    return False


@pytest.fixture
def admin_url():
    url = os.environ.get("MOONCAKE_MASTER_ADMIN_URL")
    assert url, ("MOONCAKE_MASTER_ADMIN_URL is not set: the master logged no "
                 "'admin HTTP listening on' line (scripts/with-cluster.sh)")
    return url


def sglang_url(master, admin_url):
    """The URL SGLang composes: the RPC address's host, the metrics port."""
    host = master.split(":")[0]
    port = urllib.parse.urlsplit(admin_url).port
    return f"http://{host}:{port}/get_all_segments"


def test_probe_of_a_master_with_a_daemon_says_started(master, admin_url):
    url = sglang_url(master, admin_url)
    # SGLang tries the RPC address's host only: the admin port listens there when the master
    # does on 127.0.0.1 (--metrics_host's default), as here; elsewhere --metrics_host says so.
    assert urllib.parse.urlsplit(admin_url).hostname == master.split(":")[0]
    assert sglang_check_server(url, deadline_s=30)

    # Without the token (as SGLang asks): refused, but not empty, so SGLang starts.
    status, content_type, text = sglang_segments_text(url)
    assert status == 401
    assert '"error_code":-1400' in text
    assert os.environ["MOONCAKE_HOSTNAME"] not in text

    # With it: the names.
    status, content_type, text = sglang_segments_text(url, token=os.environ["MOONCAKE_ADMIN_TOKEN"])
    assert status == 200
    assert content_type.startswith("text/plain")
    # Mooncake's shape: one segment name per line, each line ended by a newline.
    assert text.endswith("\n")
    names = text.split("\n")[:-1]
    assert all(name and name.strip() == name for name in names), names
    assert os.environ["MOONCAKE_HOSTNAME"] in names, names
    assert len(names) == len(set(names))


def test_probe_of_a_master_without_segments_says_wait(tmp_path):
    """A master no daemon has joined answers 200 with an empty body, which is SGLang's
    'wait' (an error page, or a lone newline, would make it start against an empty pool)."""
    build = os.environ["MC_BUILD_DIR"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        rpc_port = s.getsockname()[1]
    log_path = tmp_path / "master.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [os.path.join(build, "master", "mooncake-master"), "--rpc_address", "127.0.0.1",
             "--rpc_port", str(rpc_port), "--metrics_port", "0",
             "--cluster_key_file", os.environ["MOONCAKE_CLUSTER_KEY_FILE"]],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        match = None
        start = time.monotonic()
        while match is None and time.monotonic() - start < 20:
            assert proc.poll() is None, log_path.read_text()
            match = ADMIN_LINE.search(log_path.read_text())
            time.sleep(0.05)
        assert match, log_path.read_text()
        url = sglang_url(f"127.0.0.1:{rpc_port}", f"http://{match[1]}:{match[2]}")

        # The master holds the cluster's key: SGLang's probe (no token) is refused with an
        # empty body, which SGLang reads as "wait".
        status, content_type, text = sglang_segments_text(url)
        assert (status, text) == (401, "")
        assert not sglang_check_server(url, deadline_s=1)
        status, content_type, text = sglang_segments_text(
            url, token=os.environ["MOONCAKE_ADMIN_TOKEN"])
        assert (status, text) == (200, "")
        assert content_type.startswith("text/plain")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
