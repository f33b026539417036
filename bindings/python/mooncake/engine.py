"""``mooncake.engine``: the names of Mooncake's transfer engine module, ``TransferEngine``,
``TransferOpcode`` and ``TransferNotify``, for code that imports them.

In Mooncake a client process runs a transfer engine of its own: it registers its memory and
reads and writes other processes' registered memory by address (``transfer_sync_read``,
``batch_transfer_sync_write``, ...). Here the transfer engine is the daemon's: ``mooncaked``
owns this host's registered memory and moves object bytes between hosts (TCP or RDMA), and an
application reaches it only through ``MooncakeDistributedStore``, by key. There is no
address-level transfer a process could ask of it, so no engine call can be carried out.

``TransferEngine`` is therefore an object whose every call fails the way Mooncake's engine
reports a failure, with a ``RuntimeWarning`` saying why (once per method and engine):

* calls answering a status (``initialize``, the transfers, ``register_memory``, ...) return
  ``ERR_NOT_IMPLEMENTED`` (-303, Mooncake's transfer engine code for it);
* calls answering an address (``allocate_managed_buffer``, ``get_first_buffer_address``)
  return 0, Mooncake's failed address; ``get_rpc_port`` returns -303;
* ``get_local_topology`` returns ``""``, ``get_notifies`` ``[]``, ``get_engine`` and
  ``get_engine_ptr`` None / 0;
* the ``*_on_cuda`` calls (CUDA builds only in Mooncake) raise ``RuntimeError``, as they
  return nothing there.

Passing a ``TransferEngine`` to ``setup(..., engine=...)`` is accepted with a warning
(docs/mooncake-api.md, "setup()"). See docs/mooncake-api.md, "The package", for why this is
not a stand-in that pretends to move bytes.
"""
import enum
import warnings

ERR_NOT_IMPLEMENTED = -303  # Mooncake's transfer engine: mooncake-transfer-engine/include/error.h

# What this build supports, as Mooncake's module reports its build flags.
SUPPORT_CUDA = False
SUPPORT_MUSA = False
SUPPORT_INTRA_NVLINK = False

_WHY = ("the daemon (mooncaked) is this host's transfer engine and moves object bytes "
        "between hosts itself; applications reach it through MooncakeDistributedStore (put, "
        "get, batch_put_from, get_into, ...), not by memory address")


class TransferOpcode(enum.IntEnum):
    """Mooncake's transfer direction, with its values."""

    Read = 0
    Write = 1


Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """Mooncake's notification carried by a transfer: a name and a message."""

    def __init__(self, name: str = "", msg: str = "") -> None:
        self.name = name
        self.msg = msg

    def __repr__(self) -> str:
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"


def _refusing(name, result):
    """A TransferEngine method that warns why (once per engine) and returns result."""

    def method(self, *args, **kwargs):
        self._explain(name)
        return result

    method.__name__ = name
    method.__doc__ = f"Not available here ({_WHY}): returns {result!r}."
    return method


def _raising(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"TransferEngine.{name}: not available here: {_WHY}")

    method.__name__ = name
    method.__doc__ = f"Not available here ({_WHY}): raises RuntimeError."
    return method


class TransferEngine:
    """Mooncake's ``TransferEngine``, whose every call fails (see the module's docstring)."""

    TransferOpcode = TransferOpcode

    def __init__(self) -> None:
        self._explained = set()

    def _explain(self, name: str) -> None:
        if name in self._explained:
            return
        self._explained.add(name)
        warnings.warn(f"TransferEngine.{name}: returns Mooncake's error for a call that cannot "
                      f"be carried out here: {_WHY}", RuntimeWarning, stacklevel=3)

    def __repr__(self) -> str:
        return "<mooncake.engine.TransferEngine: not available, the daemon is the engine>"


_STATUS_METHODS = (
    "initialize", "initialize_ext", "free_managed_buffer", "transfer_sync_write",
    "transfer_sync_read", "batch_transfer_sync_write", "batch_transfer_sync_read",
    "batch_transfer_async_write", "batch_transfer_async_read", "transfer_sync",
    "batch_transfer_sync", "batch_transfer_async", "get_batch_transfer_status",
    "transfer_submit_write", "transfer_check_status", "write_bytes_to_buffer",
    "read_bytes_from_buffer", "register_memory", "unregister_memory", "batch_register_memory",
    "batch_unregister_memory", "warmup_efa_segment", "send_probe", "get_rpc_port",
)
for _name in _STATUS_METHODS:
    setattr(TransferEngine, _name, _refusing(_name, ERR_NOT_IMPLEMENTED))
for _name, _result in (("allocate_managed_buffer", 0), ("get_first_buffer_address", 0),
                       ("get_local_topology", ""), ("get_engine_ptr", 0), ("get_engine", None)):
    setattr(TransferEngine, _name, _refusing(_name, _result))


def _get_notifies(self):
    """Not available here: returns [] (a new list each call)."""
    self._explain("get_notifies")
    return []


TransferEngine.get_notifies = _get_notifies
for _name in ("transfer_write_on_cuda", "transfer_read_on_cuda", "batch_transfer_write_on_cuda",
              "batch_transfer_read_on_cuda"):
    setattr(TransferEngine, _name, _raising(_name))
del _name, _result

__all__ = ["TransferEngine", "TransferOpcode", "TransferNotify", "ERR_NOT_IMPLEMENTED",
           "SUPPORT_CUDA", "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK"]
