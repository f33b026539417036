"""``mooncake.store``: every public name of the native extension ``mooncake_store``.

Mooncake installs its client as ``mooncake.store``; this store's extension is
``mooncake_store``. This module re-exports the extension's public names (those not starting
with ``_``) as they are when it is imported, so whatever the extension gains appears here
without this file changing, and ``__all__`` lists exactly them. The objects are the
extension's own: ``mooncake.store.MooncakeDistributedStore is
mooncake_store.MooncakeDistributedStore``.
"""
import mooncake_store as _native
from mooncake_store import *  # noqa: F401,F403 -- the re-export is this module's purpose

__all__ = sorted(name for name in dir(_native) if not name.startswith("_"))

del _native

# Mooncake's private tensor codec helpers, which its own modules (structured_object_store)
# look up on mooncake.store by name: re-exported although they start with "_".
from mooncake_store import (  # noqa: E402,F401
    _deserialize_tensor, _serialize_tensor, _tensor_metadata_size)

# Mooncake's module-level helper of EngramStore (store._get_pyclient_from_wrapper):
# re-exported although it starts with "_".
from mooncake_store import _get_pyclient_from_wrapper  # noqa: E402,F401
