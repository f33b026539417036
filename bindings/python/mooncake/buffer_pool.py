"""``mooncake.buffer_pool``: Mooncake's pool of leased buffers, under its Python module name.

``BufferPool`` (alias ``RegisteredBufferPool``) is the native class of the extension
(bindings/python/src/buffer_pool.cc): leases of the store's pool, which the daemon reads and
writes directly, and, once the pool is full, of registered overflow memory. Its arguments,
methods and errors are Mooncake's; see docs/mooncake-api.md, "Segments, replica clearing and
standalone mode".

Without a loadable extension (a broken installation) both names are None, as in Mooncake,
so that importing the package still works and the failure shows where a pool is made.
"""
try:
    from mooncake.store import BufferPool
except (ImportError, AttributeError):  # the extension is missing or too old
    BufferPool = None

RegisteredBufferPool = BufferPool

__all__ = ["BufferPool", "RegisteredBufferPool"]
