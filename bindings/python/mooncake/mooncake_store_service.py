"""``mooncake.mooncake_store_service``: Mooncake's store service with a REST API (the
``mc_store_rest_server`` command), over this store.

The service sets up one ``MooncakeDistributedStore`` from a ``MooncakeConfig`` (a JSON file
given with ``--config``, else the environment: ``mooncake.mooncake_config``), with ``-D
key=value`` overrides, retrying for ``--max-wait-time`` seconds while the store cannot be set
up (the daemon or master still starting), then serves, on ``--port`` (default 8080):

=========================  ===================================================================
``PUT /api/put``           ``{"key", "value"}``: ``put(key, value.encode())``
``GET /api/get/{key}``     the value's bytes; 404 when the key does not exist
``GET /api/exist/{key}``   ``{"exists": bool}``
``DELETE /api/remove/{key}``, ``DELETE /api/remove_all``
``POST /api/mount``        ``{"size", "protocol", "location"}``: ``allocate_and_mount_segment``
``POST /api/unmount``      ``{"segment_ids", "grace_period_seconds"}``:
                           ``unmount_and_free_segment``
``POST /api/mount_shm``    ``{"name", "size", "offset", ...}``: ``mount_segment`` of
                           ``/dev/shm/<name>``
``POST /api/unmount_shm``  ``unmount_segment`` of each id, one at a time
``POST /api/reconfigure``  ``{"mode": "decode", "path", "size", ...}`` mounts a segment
                           (make-before-break: the previous decode segments are unmounted
                           only once the new one is mounted, and kept when it fails);
                           ``{"mode": "prefill"}`` unmounts them
``POST /api/unmount_local_disk``  ``{"grace_period_seconds"}`` (an int, 0..3600):
                           ``unmount_local_disk_segment``
=========================  ===================================================================

Answers are JSON (``{"status": "success", ...}`` or ``{"error": ...}``) with 200, 400 for a
malformed request, 404 for a missing key, 500 when the store refused. A store error code is
named in the message.

What the store calls do here is ``MooncakeDistributedStore``'s (docs/mooncake-api.md): in
particular ``mount_segment`` lends a range of the store's pool, not a file, so
``/api/mount_shm`` and ``/api/reconfigure`` answer 500 with the code -1012 for a
``/dev/shm`` path, and ``/api/unmount_local_disk`` answers 500 (-1012) when the daemon has an
SSD tier, which is the daemon's to keep.

Threads: one asyncio loop. The store's calls block; they are quick except
``unmount_local_disk``, which runs in a thread. Segment state changes are serialised by a
lock.
"""
import argparse
import asyncio
import json
import logging
import signal
import time

from aiohttp import web

from mooncake.mooncake_config import MooncakeConfig
from mooncake.store import MooncakeDistributedStore

# The longest /api/unmount_local_disk grace period accepted: a value in milliseconds passed
# for seconds must not hold a preStop hook for hours.
_MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS = 3600
_RETRY_INTERVAL_SECONDS = 1.0


def _json_response(status, body):
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


def _error(status, message, **extra):
    return _json_response(status, {"error": message, **extra})


def _success(**extra):
    return _json_response(200, {"status": "success", **extra})


def _timed_handler(operation, handler):
    """handler, logging how long each call took."""

    async def timed(request):
        began = time.perf_counter()
        try:
            return await handler(request)
        finally:
            logging.info("%s operation completed in %.2f ms", operation,
                         (time.perf_counter() - began) * 1000)

    return timed


def _shm_name_to_path(name):
    """/dev/shm/<name> for a plain file name (a leading "/" allowed), else None: no empty
    name, no "." or "..", no subdirectory."""
    if not isinstance(name, str):
        return None
    base = name[1:] if name.startswith("/") else name
    if base in ("", ".", "..") or "/" in base:
        return None
    return "/dev/shm/" + base


def _unblock_shutdown_signals():
    """SIGINT and SIGTERM delivered to this thread (a launcher may have blocked them)."""
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    except AttributeError:  # no pthread_sigmask on this platform
        pass


def _install_shutdown_signal_handlers(loop, shutdown_event):
    """SIGINT and SIGTERM set shutdown_event (through the loop when it takes handlers)."""

    def request_shutdown(signum):
        logging.info("Received signal %s, shutting down", signum)
        shutdown_event.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, request_shutdown, signum)
        except (NotImplementedError, RuntimeError):
            signal.signal(signum, lambda number, _frame:
                          loop.call_soon_threadsafe(request_shutdown, number))


def _segment_ids(data):
    """The request's segment_ids as a list (one id may be given as a str)."""
    ids = data.get("segment_ids", [])
    return [ids] if isinstance(ids, str) else ids


class MooncakeStoreService:
    """The store and its REST API (see the module's docstring)."""

    def __init__(self, config_path=None, cli_config=None):
        self.store = None
        self.config = None
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
        # /api/reconfigure's state: the node serves prefill (no lent segment) or decode (the
        # segments of its last mount).
        self.current_mode = "prefill"
        self.mounted_segment_ids = []
        self.last_mount_info = {}
        self._state_lock = asyncio.Lock()
        try:
            self.config = (MooncakeConfig.from_file(config_path) if config_path
                           else MooncakeConfig.load_from_env())
            for key, value in (cli_config or {}).items():
                if hasattr(self.config, key):
                    setattr(self.config, key, value)
            logging.info("Mooncake configuration loaded")
        except Exception as error:
            logging.error("Configuration load failed: %s", error)
            raise

    def _setup_settings(self):
        """setup()'s dict form from the configuration (fields a configuration lacks take
        setup()'s defaults)."""
        c = self.config
        return {
            "local_hostname": c.local_hostname,
            "metadata_server": c.metadata_server,
            "global_segment_size": c.global_segment_size,
            "local_buffer_size": c.local_buffer_size,
            "protocol": c.protocol,
            "rdma_devices": c.device_name,
            "master_server_addr": c.master_server_address,
            "enable_ssd_offload": getattr(c, "enable_ssd_offload", False),
            "ssd_offload_path": getattr(c, "ssd_offload_path", ""),
            "tenant_id": getattr(c, "tenant_id", "default"),
            "enable_client_http_server": getattr(c, "enable_client_http_server", False),
            "client_http_port": getattr(c, "client_http_port", 9300),
        }

    async def start_store_service(self, max_wait_time=60, shutdown_event=None):
        """Sets the store up, retrying every second for up to max_wait_time seconds. False
        when it never came up, or when shutdown_event was set meanwhile (the store is then
        closed)."""
        began = time.perf_counter()
        attempt = 0
        if shutdown_event is not None:
            await asyncio.sleep(0)  # a signal that arrived just before is seen first
        while True:
            if shutdown_event is not None and shutdown_event.is_set():
                logging.info("Store startup cancelled by shutdown request")
                return False
            elapsed = time.perf_counter() - began
            if elapsed >= max_wait_time:
                logging.error("Store startup failed: exceeded max wait time of %ss after %d "
                              "attempts", max_wait_time, attempt)
                return False
            attempt += 1
            logging.info("Attempting to start store service (attempt %d, elapsed: %.1fs/%ss)",
                         attempt, elapsed, max_wait_time)
            try:
                self.store = MooncakeDistributedStore()
                ret = self.store.setup(self._setup_settings())
                if shutdown_event is not None:
                    # setup() blocked the loop: let a signal handler queued meanwhile run.
                    await asyncio.sleep(0)
                    if shutdown_event.is_set():
                        logging.info("Store startup cancelled by shutdown request")
                        await self.stop()
                        return False
                if ret != 0:
                    raise RuntimeError(f"Store initialization failed (setup returned {ret})")
                logging.info("Store service started successfully on %s",
                             self.config.local_hostname)
                return True
            except Exception as error:
                remaining = max_wait_time - (time.perf_counter() - began)
                pause = min(_RETRY_INTERVAL_SECONDS, remaining) if remaining > 0 else 0
                logging.warning("Store startup failed (attempt %d): %s. Retrying in %.1fs... "
                                "(remaining time: %.1fs)", attempt, error, pause, remaining)
                if pause <= 0:
                    continue
                if shutdown_event is None:
                    await asyncio.sleep(pause)
                    continue
                try:
                    await asyncio.wait_for(shutdown_event.wait(), timeout=pause)
                    logging.info("Store startup cancelled by shutdown request")
                    return False
                except asyncio.TimeoutError:
                    pass

    async def start_http_service(self, port=8080):
        app = web.Application(client_max_size=100 * 1024 * 1024)
        routes = [
            (web.post, "/api/reconfigure", "RECONFIGURE", self.handle_reconfigure),
            (web.post, "/api/mount_shm", "MOUNT_SHM", self.handle_mount_shm),
            (web.post, "/api/unmount_shm", "UNMOUNT_SHM", self.handle_unmount_shm),
            (web.post, "/api/mount", "MOUNT", self.handle_mount),
            (web.post, "/api/unmount", "UNMOUNT", self.handle_unmount),
            (web.post, "/api/unmount_local_disk", "UNMOUNT_LOCAL_DISK",
             self.handle_unmount_local_disk),
            (web.put, "/api/put", "PUT", self.handle_put),
            (web.get, "/api/get/{key}", "GET", self.handle_get),
            (web.get, "/api/exist/{key}", "EXIST", self.handle_exist),
            (web.delete, "/api/remove/{key}", "REMOVE", self.handle_remove),
            (web.delete, "/api/remove_all", "REMOVE_ALL", self.handle_remove_all),
        ]
        app.add_routes([method(path, _timed_handler(name, handler))
                        for method, path, name, handler in routes])
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", port).start()
        self._runner = runner  # stop() closes the server
        logging.info("REST API started on port %d", port)
        return True

    # ---- segments ---------------------------------------------------------------------

    async def handle_reconfigure(self, request):
        try:
            data = await request.json()
            mode = str(data.get("mode", "")).lower()
            if mode == "decode":
                return await self._reconfigure_decode(data)
            if mode == "prefill":
                return await self._reconfigure_prefill()
            return _error(400, "Invalid mode. Use 'decode' or 'prefill'")
        except Exception as error:
            logging.error("RECONFIGURE error: %s", error)
            return _error(500, str(error))

    async def _reconfigure_decode(self, data):
        path, size = data.get("path"), data.get("size")
        if not path or size is None:
            return _error(400, "Missing path or size for decode mode")
        offset = data.get("offset", 0)
        protocol = data.get("protocol", self.config.protocol)
        location = data.get("location", "")
        async with self._state_lock:
            # Make before break: the segments serving now stay until the new one is up.
            previous = list(self.mounted_segment_ids)
            result = self.store.mount_segment(path, size, offset, protocol, location)
            if result["ret"] != 0:
                if previous:
                    logging.warning("Reconfigure decode: mount of %s failed (ret=%s); keeping "
                                    "previous decode segments", path, result["ret"])
                    return _error(500, f"Mount failed, ret={result['ret']}; keeping previous "
                                       "decode segments", mode=self.current_mode)
                self.current_mode = "prefill"
                self.mounted_segment_ids.clear()
                self.last_mount_info.clear()
                return _error(500, f"Mount failed, ret={result['ret']}; rolled back to prefill",
                              mode=self.current_mode)
            # One id at a time: a batch unmount answers only its first error, which would
            # not say which ids are gone. Ids that failed stay tracked for a later retry.
            stuck = [sid for sid in previous if self.store.unmount_segment([sid]) != 0]
            if stuck:
                logging.warning("Reconfigure decode: new mount succeeded but unmount of "
                                "previous segments %s failed; keeping them tracked", stuck)
            self.mounted_segment_ids = list(result["segment_ids"]) + stuck
            self.current_mode = "decode"
            self.last_mount_info = {"path": path, "offset": offset, "size": size,
                                    "protocol": protocol, "location": location}
        return _success(mode=self.current_mode, segment_ids=self.mounted_segment_ids)

    async def _reconfigure_prefill(self):
        async with self._state_lock:
            if self.mounted_segment_ids:
                ret = self.store.unmount_segment(self.mounted_segment_ids)
                if ret != 0:
                    return _error(500, f"Unmount failed, ret={ret}")
                self.mounted_segment_ids.clear()
            self.current_mode = "prefill"
            self.last_mount_info.clear()
        return _success(mode=self.current_mode)

    async def handle_mount_shm(self, request):
        try:
            data = await request.json()
            path = _shm_name_to_path(data.get("name"))
            size = data.get("size")
            if not path or size is None:
                return _error(400, "Missing or invalid name or size")
            result = self.store.mount_segment(path, size, data.get("offset", 0),
                                              data.get("protocol", self.config.protocol),
                                              data.get("location", ""))
            if result["ret"] != 0:
                return _error(500, f"Mount failed, ret={result['ret']}")
            return _success(segment_ids=list(result["segment_ids"]))
        except Exception as error:
            logging.error("MOUNT_SHM error: %s", error)
            return _error(500, str(error))

    async def handle_unmount_shm(self, request):
        try:
            data = await request.json()
            ids = _segment_ids(data)
            if not ids:
                return _error(400, "Missing segment_ids")
            grace = data.get("grace_period_seconds", 0)
            failed = []
            async with self._state_lock:
                for sid in ids:
                    if self.store.unmount_segment([sid], grace) != 0:
                        failed.append(sid)
                    elif sid in self.mounted_segment_ids:
                        self.mounted_segment_ids.remove(sid)
                if not self.mounted_segment_ids:
                    self.current_mode = "prefill"
            if failed:
                return _error(500, "Unmount failed for one or more segments",
                              failed_segment_ids=failed)
            return _success()
        except Exception as error:
            logging.error("UNMOUNT_SHM error: %s", error)
            return _error(500, str(error))

    async def handle_mount(self, request):
        try:
            data = await request.json()
            size = data.get("size")
            if type(size) is not int or size <= 0:  # a bool or a float is no size
                return _error(400, "Invalid size, must be a positive integer")
            result = self.store.allocate_and_mount_segment(
                size, data.get("protocol", self.config.protocol), data.get("location", ""))
            if result["ret"] != 0:
                return _error(500, f"Allocate and mount failed, ret={result['ret']}")
            return _success(segment_ids=list(result["segment_ids"]),
                            allocated_size=result["allocated_size"])
        except Exception as error:
            logging.error("MOUNT error: %s", error)
            return _error(500, str(error))

    async def handle_unmount(self, request):
        try:
            data = await request.json()
            ids = _segment_ids(data)
            if not ids:
                return _error(400, "Missing segment_ids")
            ret = self.store.unmount_and_free_segment(ids, data.get("grace_period_seconds", 0))
            if ret != 0:
                return _error(500, f"Unmount and free failed, ret={ret}")
            return _success()
        except Exception as error:
            logging.error("UNMOUNT error: %s", error)
            return _error(500, str(error))

    async def handle_unmount_local_disk(self, request):
        """Gives the store's SSD tier up before the process goes (a preStop hook), then
        waits grace_period_seconds for reads in flight; run in a thread, being long."""
        try:
            data = await request.json()
        except Exception:
            return _error(400, "Malformed JSON body")
        if not isinstance(data, dict):
            return _error(400, "Request body must be a JSON object")
        grace = data.get("grace_period_seconds", 0)
        if (type(grace) is not int or grace < 0
                or grace > _MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS):
            return _error(400, "Invalid grace_period_seconds, must be a non-negative integer "
                               f"no greater than {_MAX_UNMOUNT_LOCAL_DISK_GRACE_PERIOD_SECONDS}")
        try:
            ret = await asyncio.to_thread(self.store.unmount_local_disk_segment, grace)
            if ret != 0:
                return _error(500, f"Unmount local disk failed, ret={ret}")
            return _success()
        except Exception as error:
            logging.error("UNMOUNT_LOCAL_DISK error: %s", error)
            return _error(500, str(error))

    # ---- objects ----------------------------------------------------------------------

    async def handle_put(self, request):
        try:
            data = await request.json()
            key, value = data.get("key"), data.get("value")
            if not key:
                return _error(400, "Missing key or value")
            if not isinstance(value, str):
                # As Mooncake's service answers it (its tests pin it): a value that is not
                # a string, or none, is a failure of the put, 500.
                return _error(500, "PUT value must be a string, got "
                                   f"{type(value).__name__}: missing key or value")
            if self.store.put(key, value.encode()) != 0:
                return _error(500, "PUT operation failed")
            return _success()
        except Exception as error:
            logging.error("PUT error: %s", error)
            return _error(500, str(error))

    async def handle_get(self, request):
        try:
            key = request.match_info["key"]
            missing = self._missing_response(key)
            if missing is not None:
                return missing
            value = self.store.get(key)
            if value is None:
                return _error(500, "GET operation failed")
            if value == b"":
                # An empty answer is also what a get of a key removed meanwhile gives.
                missing = self._missing_response(key)
                if missing is not None:
                    return missing
            return web.Response(status=200, body=value, content_type="application/octet-stream")
        except Exception as error:
            logging.error("GET error: %s", error)
            return _error(500, str(error))

    def _missing_response(self, key):
        """404 or 500 when key does not exist or the check failed; None when it exists."""
        exists = self.store.is_exist(key)
        if exists == 0:
            return _error(404, "Key not found")
        if exists < 0:
            return _error(500, "Exist check failed")
        return None

    async def handle_exist(self, request):
        try:
            exists = self.store.is_exist(request.match_info["key"])
            if exists < 0:  # an error, not a yes: bool(-1) would be True
                return _error(500, "Exist check failed")
            return _json_response(200, {"exists": exists > 0})
        except Exception as error:
            logging.error("EXIST error: %s", error)
            return _error(500, str(error))

    async def handle_remove(self, request):
        try:
            if self.store.remove(request.match_info["key"]) != 0:
                return _error(500, "Remove operation failed")
            return _success()
        except Exception as error:
            logging.error("REMOVE error: %s", error)
            return _error(500, str(error))

    async def handle_remove_all(self, request):
        try:
            removed = self.store.remove_all()
            if removed < 0:
                return _error(500, "RemoveAll operation failed")
            return _json_response(200, {"status": f"success removed {removed} keys"})
        except Exception as error:
            logging.error("REMOVE_ALL error: %s", error)
            return _error(500, str(error))

    async def stop(self):
        """Stops serving, and closes the store (once)."""
        runner, self._runner = getattr(self, "_runner", None), None
        if runner is not None:
            await runner.cleanup()
        if self.store is None:
            return
        store, self.store = self.store, None
        ret = store.close()
        if ret != 0:
            logging.warning("Mooncake service close returned %s", ret)
        else:
            logging.info("Mooncake service stopped")


def parse_arguments():
    parser = argparse.ArgumentParser(description="Mooncake Store Service with REST API")
    parser.add_argument("--config", type=str, required=False,
                        help="Path to Mooncake config file (default: the environment)")
    parser.add_argument("-D", "--define", action="append", default=[],
                        help="Override a configuration field: -Dlocal_hostname=example.com")
    parser.add_argument("--port", type=int, default=8080, help="HTTP API port (default: 8080)")
    parser.add_argument("--max-wait-time", type=float, default=60,
                        help="Maximum total wait time for the store, seconds (default: 60)")
    return parser.parse_args()


async def main():
    args = parse_arguments()
    overrides = {}
    for item in args.define:
        key, sep, value = item.partition("=")
        if sep:
            overrides[key] = value
        else:
            logging.warning("Ignoring invalid CLI config: %s", item)
    service = MooncakeStoreService(args.config, overrides)
    shutdown_event = asyncio.Event()
    _install_shutdown_signal_handlers(asyncio.get_running_loop(), shutdown_event)
    _unblock_shutdown_signals()
    try:
        started = await service.start_store_service(max_wait_time=args.max_wait_time,
                                                    shutdown_event=shutdown_event)
        if not started:
            if shutdown_event.is_set():
                return
            raise RuntimeError("Failed to start store service")
        _unblock_shutdown_signals()
        await asyncio.sleep(0)
        if shutdown_event.is_set():
            return
        if not await service.start_http_service(args.port):
            raise RuntimeError("Failed to start HTTP service")
        logging.info("Mooncake Store Service is running")
        await shutdown_event.wait()
    except KeyboardInterrupt:
        logging.info("Received keyboard interrupt, shutting down")
    except Exception as error:
        logging.error("Service error: %s", error)
        raise
    finally:
        await service.stop()


def sync_main():
    """The ``mc_store_rest_server`` command."""
    return asyncio.run(main())


if __name__ == "__main__":
    sync_main()
