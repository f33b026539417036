"""mooncake.async_store and mooncake.mooncake_store_service (issue 31, part pkg), against
the suite's real cluster: awaitable twins of the store's methods, and the REST service
started as mc_store_rest_server starts it (a MooncakeConfig file, setup() in its dict form)
and spoken to over HTTP.

Runs in the main suite (ctest python_binding_test).
"""
import asyncio
import json
import os
import socket

import aiohttp
import pytest

from mooncake.async_store import MooncakeDistributedStoreAsync
from mooncake.mooncake_store_service import MooncakeStoreService

NOT_SUPPORTED = -1012


def test_async_twins_run_the_store_methods_concurrently(key):
    store = MooncakeDistributedStoreAsync()
    assert store.connect(local_buffer_size=16 << 20) == 0

    async def scenario():
        keys = [key(f"async-{i}") for i in range(16)]
        puts = await asyncio.gather(*(store.async_put(k, k.encode()) for k in keys))
        assert puts == [0] * len(keys)
        gets = await asyncio.gather(*(store.async_get(k) for k in keys))
        assert gets == [k.encode() for k in keys]
        assert await store.async_batch_is_exist(keys + [key("absent")]) == [1] * 16 + [0]
        # A key never read holds no read lease: removed at once.
        assert await store.async_put(key("unread"), b"x") == 0
        assert await store.async_remove(key("unread")) == 0
        assert await store.async_is_exist(key("unread")) == 0

    asyncio.run(scenario())
    assert store.async_get is store.async_get  # made once, kept on the instance
    with pytest.raises(AttributeError, match="nor 'no_such_method'"):
        store.async_no_such_method
    with pytest.raises(AttributeError):
        store.no_such_attribute
    assert store.close() == 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rest_service_serves_the_store(master, key, tmp_path):
    config = tmp_path / "mooncake.json"
    config.write_text(json.dumps({
        "local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
        "master_server_address": master, "global_segment_size": 0,
        "local_buffer_size": "16MB", "protocol": "tcp"}))
    port = free_port()

    async def scenario():
        service = MooncakeStoreService(str(config), {"tenant_id": "default"})
        assert await service.start_store_service(max_wait_time=30)
        await service.start_http_service(port)
        base = f"http://127.0.0.1:{port}/api"
        try:
            async with aiohttp.ClientSession() as http:
                async def call(method, path, body=None):
                    async with http.request(method, base + path, json=body) as r:
                        raw = await r.read()
                        if r.content_type == "application/json":
                            return r.status, json.loads(raw)
                        return r.status, raw

                k = key("rest")
                assert await call("PUT", "/put", {"key": k, "value": "over http"}) == \
                    (200, {"status": "success"})
                assert await call("GET", f"/get/{k}") == (200, b"over http")
                assert await call("GET", f"/exist/{k}") == (200, {"exists": True})
                assert await call("PUT", "/put", {"value": "v"}) == \
                    (400, {"error": "Missing key or value"})
                # The get above holds a read lease on k; a key never read goes at once.
                gone = key("rest-gone")
                assert (await call("PUT", "/put", {"key": gone, "value": "x"}))[0] == 200
                assert await call("DELETE", f"/remove/{gone}") == (200, {"status": "success"})
                assert await call("GET", f"/get/{gone}") == (404, {"error": "Key not found"})
                assert await call("GET", f"/exist/{gone}") == (200, {"exists": False})
                # Memory lent through the daemon, and given back.
                status, body = await call("POST", "/mount", {"size": 8 << 20})
                assert status == 200 and body["allocated_size"] == 8 << 20, body
                assert await call("POST", "/unmount", {"segment_ids": body["segment_ids"]}) == \
                    (200, {"status": "success"})
                # A file is not lent here (docs/mooncake-api.md): the store's -1012, for a
                # shared-memory file that exists (-1101 for one that does not).
                shm = f"/dev/shm/{key('seg').replace('/', '-')}"
                with open(shm, "wb") as f:
                    f.truncate(4096)
                try:
                    status, body = await call("POST", "/mount_shm",
                                              {"name": shm[len("/dev/shm/"):], "size": 4096})
                    assert status == 500 and f"ret={NOT_SUPPORTED}" in body["error"], body
                    status, body = await call("POST", "/reconfigure",
                                              {"mode": "decode", "path": shm, "size": 4096})
                    assert status == 500 and body["mode"] == "prefill", body
                finally:
                    os.unlink(shm)
                # No SSD tier in this cluster: nothing to give up.
                assert await call("POST", "/unmount_local_disk", {}) == \
                    (200, {"status": "success"})
                assert await call("POST", "/unmount_local_disk",
                                  {"grace_period_seconds": 3601}) == \
                    (400, {"error": "Invalid grace_period_seconds, must be a non-negative "
                                    "integer no greater than 3600"})
        finally:
            await service.stop()
        assert service.store is None

    asyncio.run(scenario())
