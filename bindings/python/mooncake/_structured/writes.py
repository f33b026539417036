"""Calls that write to and clean up the store: a write config (Mooncake's ReplicateConfig,
or any object with its fields) passed on only when there is one, its group id expanded to
one per key written, statuses checked, and keys removed again after a failure.

A structured object is several store objects. ``config.group_ids`` names one logical group
for all of them, so it must hold one id (or be a bare string, or None/[] for none); each
write gets a copy of the config whose group_ids has one entry per key it writes. The
caller's config is never modified.
"""
from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any, Sequence

from mooncake._structured import hooks
from mooncake._structured.model import MISSING_OBJECT_ERROR, BundleStore

# The fields copied when a config cannot be copied with copy.copy (ReplicateConfig's).
_WRITE_CONFIG_COPY_FIELDS = ("data_type", "group_ids", "nof_replica_num",
                             "prefer_alloc_in_same_node", "preferred_nof_segments",
                             "preferred_segment", "preferred_segments", "replica_num",
                             "with_hard_pin", "with_soft_pin")
_GROUP_IDS_RULE = ("structured object store config.group_ids must contain exactly one logical "
                   "group id; it is expanded across internal Mooncake keys")
# What register_buffer answers for memory registered already (by the caller: tolerated).
_ALREADY_REGISTERED = -600


def _call_write_with_optional_config(fn: Any, *args: Any, config: Any = None) -> Any:
    return fn(*args) if config is None else fn(*args, config=config)


def _copy_write_config(config: Any) -> Any:
    """A copy of config: copy.copy, else a new instance of its type with its fields."""
    try:
        return copy.copy(config)
    except TypeError:
        pass
    try:
        copied = type(config)()
    except Exception as error:
        raise TypeError("structured object store config must be copyable or "
                        "default-constructible") from error
    for name in _WRITE_CONFIG_COPY_FIELDS:
        try:
            value = getattr(config, name)
        except Exception:  # absent, or unreadable: keep the default
            continue
        if isinstance(value, (list, tuple)):
            value = type(value)(value)
        try:
            setattr(copied, name, value)
        except Exception as error:
            raise TypeError(f"structured object store config field {name!r} is not "
                            "writable") from error
    return copied


def _config_for_grouped_keys(config: Any, key_count: int) -> Any:
    """config for a write of key_count keys: its one group id repeated per key (a copy), no
    group (a copy with group_ids None) for an empty list, config itself otherwise."""
    if config is None or key_count <= 0:
        return config
    group_ids = getattr(config, "group_ids", None)
    if group_ids is None:
        return config
    bare = isinstance(group_ids, str)
    ids = [group_ids] if bare else list(group_ids)
    if not ids:
        ungrouped = _copy_write_config(config)
        ungrouped.group_ids = None
        return ungrouped
    if len(ids) != 1:
        raise ValueError(_GROUP_IDS_RULE)
    if key_count == 1 and not bare:
        return config
    grouped = _copy_write_config(config)
    grouped.group_ids = [ids[0]] * key_count
    return grouped


def _config_with_group_id(config: Any, group_id: str) -> Any:
    """A copy of config (a new ReplicateConfig for None) in group group_id; ValueError when
    config names another group."""
    named = getattr(_config_for_grouped_keys(config, 1), "group_ids", None)
    if named and named[0] and named[0] != group_id:
        raise ValueError("config.group_ids conflicts with the DataProto storage group")
    if config is None:
        store = hooks.store_module()
        grouped = getattr(store, "ReplicateConfig", SimpleNamespace)()
    else:
        grouped = _copy_write_config(config)
    grouped.group_ids = [group_id]
    return grouped


def _put_with_optional_config(store: BundleStore, key: str, value: Any,
                              config: Any = None) -> int:
    return _call_write_with_optional_config(store.put, key, value,
                                            config=_config_for_grouped_keys(config, 1))


def _put_from_with_optional_config(store: BundleStore, key: str, ptr: int, size: int,
                                   config: Any = None) -> int:
    """A put from memory: put_tensor_from without a config (Mooncake's zero-copy entry),
    put_from otherwise."""
    config = _config_for_grouped_keys(config, 1)
    put_tensor_from = getattr(store, "put_tensor_from", None)
    if config is None and callable(put_tensor_from):
        return put_tensor_from(key, ptr, size)
    put_from = getattr(store, "put_from", None)
    if callable(put_from):
        return _call_write_with_optional_config(put_from, key, ptr, size, config=config)
    raise RuntimeError("put_from is unavailable")


def _batch_put_from_with_optional_config(batch_put_from: Any, keys: Sequence[str],
                                         ptrs: Sequence[int], sizes: Sequence[int],
                                         config: Any = None) -> Sequence[int]:
    return _call_write_with_optional_config(
        batch_put_from, list(keys), list(ptrs), list(sizes),
        config=_config_for_grouped_keys(config, len(keys)))


def _check_status(status: Any, operation: str, key: str) -> None:
    if status not in (None, 0):
        raise RuntimeError(f"{operation} failed for {key}: {status}")


def _check_batch_results(results: Sequence[int], keys: Sequence[str], operation: str) -> None:
    if len(results) != len(keys):
        raise RuntimeError(f"{operation} returned {len(results)} results for {len(keys)} "
                           "chunks")
    for key, status in zip(keys, results):
        _check_status(status, operation, key)


def _is_duplicate_buffer_registration(status: Any) -> bool:
    return status == _ALREADY_REGISTERED


def _cleanup_keys(store: BundleStore, keys: Sequence[str], strict: bool) -> None:
    """Removes keys with force: one batch_remove where the store has it, then one remove per
    key it did not take. A key already gone counts as removed. strict: the first error
    raises (else every key is tried and errors are dropped: a cleanup after a failure
    must not hide that failure)."""
    pending = list(dict.fromkeys(keys))
    batch_remove = getattr(store, "batch_remove", None)
    if callable(batch_remove) and pending:
        try:
            try:
                results = batch_remove(pending, True)
            except TypeError:  # a batch_remove without force
                results = batch_remove(pending)
            if len(results) != len(pending):
                raise RuntimeError(f"batch_remove returned {len(results)} results for "
                                   f"{len(pending)} keys")
            pending = [key for key, status in zip(pending, results)
                       if status not in (None, 0, MISSING_OBJECT_ERROR)]
            if not pending:
                return
        except Exception:
            if strict:
                raise
    failures = []
    for key in pending:
        try:
            status = store.remove(key, True)
        except KeyError:  # a store that raises for a missing key
            continue
        except Exception:
            if strict:
                raise
            continue
        if status not in (None, 0, MISSING_OBJECT_ERROR):
            failures.append((key, status))
    if failures and strict:
        raise RuntimeError(f"failed to remove {len(failures)} Mooncake keys: {failures[:3]}")
