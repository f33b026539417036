"""``mooncake``: this store's Python package, under the name and layout of Mooncake's wheel
(``mooncake-transfer-engine``), so that code written for Mooncake imports it unchanged.

Modules (docs/mooncake-api.md, "The package"):

* ``mooncake.store`` -- the client: every public name of the native extension
  ``mooncake_store`` (``MooncakeDistributedStore``, ``ReplicateConfig``, the enums, ...).
* ``mooncake.buffer_pool`` -- ``BufferPool`` and ``RegisteredBufferPool``, also importable
  from the package itself (``from mooncake import BufferPool``).
* ``mooncake.mooncake_config`` -- ``MooncakeConfig``, setup()'s arguments from a file or the
  environment.
* ``mooncake.async_store`` -- ``MooncakeDistributedStoreAsync``, ``async_<method>`` for every
  method.
* ``mooncake.structured_object_store`` -- bundles, structured objects and DataProto batches
  over a store; ``mooncake.dataproto_catalog`` -- a catalog of DataProto fragments.
* ``mooncake.mooncake_store_service`` -- the REST service (``mc_store_rest_server``).
* ``mooncake._fast_copy`` -- ``concat_arrays_into``, a GIL-free gather copy.
* ``mooncake.engine`` -- ``TransferEngine`` and ``TransferOpcode``: importable, but the
  daemon is this host's transfer engine, so every call answers Mooncake's "not implemented".
* ``mooncake.cli`` / ``mooncake.cli_client`` -- the ``mooncake_master`` and
  ``mooncake_client`` commands.

Importing the package loads the extension (for ``BufferPool``), as Mooncake's does.
"""
from pkgutil import extend_path

from mooncake.buffer_pool import BufferPool, RegisteredBufferPool

# Other distributions may add modules under mooncake/ (as Mooncake's plug-ins do).
__path__ = extend_path(__path__, __name__)

__all__ = ["BufferPool", "RegisteredBufferPool"]
