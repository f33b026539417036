"""``mooncake.async_store``: ``MooncakeDistributedStoreAsync``, the store with an awaitable
twin of every method (Mooncake's mooncake-integration/store/async_store.py).

``store.async_<name>(...)`` awaits ``store.<name>(...)`` run in the event loop's default
executor (a thread pool), so a coroutine never blocks its loop on a store call; the store's
own calls release the GIL while they wait, so several run at once. The twin is made on
first use and kept on the instance. Everything else is ``MooncakeDistributedStore``'s own
(``setup()``, ``close()``, and the methods called directly).

Threads: the store is meant to be shared by threads, so calls from the executor's threads
need nothing more. ``async_<name>`` must be awaited inside a running event loop.
"""
import asyncio
import functools

from mooncake.store import MooncakeDistributedStore

_PREFIX = "async_"


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """``MooncakeDistributedStore`` plus ``async_<method>`` for each of its methods."""

    def __getattr__(self, name: str):
        # Only reached for names the instance and its class lack.
        if not name.startswith(_PREFIX):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        method_name = name[len(_PREFIX):]
        if not hasattr(self, method_name):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"(nor '{method_name}')")
        method = getattr(self, method_name)
        if not callable(method):
            raise AttributeError(f"'{method_name}' is not callable")
        twin = self._make_async_wrapper(method)
        setattr(self, name, twin)
        return twin

    @staticmethod
    def _make_async_wrapper(method):
        """An async function that runs method(*args, **kwargs) in the loop's executor."""

        @functools.wraps(method)
        async def run_in_executor(*args, **kwargs):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(method, *args, **kwargs))

        return run_in_executor


__all__ = ["MooncakeDistributedStoreAsync"]
