"""Mooncake's Python package name for this store: ``import mooncake.store`` gives the API of
Mooncake's ``mooncake.store`` (``MooncakeDistributedStore``, ``ReplicateConfig``, the enums,
...), so an engine's Mooncake connector runs unchanged.

The package holds no code of its own: ``mooncake.store`` re-exports the native extension
``mooncake_store`` (which keeps working under its own name). Mooncake's other modules
(``mooncake.engine``'s TransferEngine, ...) are not part of this store: the daemon is the
transfer engine. See bindings/python/README.md.
"""
