"""``mooncake.dataproto_catalog``: ``DataProtoCatalog``, which maps logical rows (keys of a
partition) and their fields to the immutable DataProto fragments that hold them (Mooncake's
mooncake-wheel/mooncake/dataproto_catalog.py).

A fragment is a single-stage DataProto handle (``mooncake.structured_object_store``'s
``export_dataproto_ref``): rows 0..n-1 of some fields, written once. ``update`` publishes a
fragment for n keys (key i is row i) and/or merges tags into the keys' entries; ``resolve``
turns an ordered read of keys and fields into fragment locations grouped by field, with the
handles to read them from; ``list`` gives the tags; ``remove`` forgets keys. The catalog
holds metadata only: bytes stay in the store, whose objects the handles name, and their
lifetime is the caller's (``MooncakeBundleTransfer.cleanup_dataproto``).

A fragment is kept while a field of some key points into it (a reference count per
fragment), so replacing a field's location or removing keys drops fragments nobody reads.

Threads: none of its own; a host serialises its calls on one catalog. Input policy: names
(partition, keys, fields) must be non-empty strings, keys and fields unique; a failed call
raises ``ValueError`` (``TypeError`` for a tag that is not a mapping) and changes nothing.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Location = tuple  # (fragment id: the stage's manifest key, row)


class DataProtoCatalog:
    """Logical keys and fields of partitions, mapped to immutable DataProto fragments."""

    def __init__(self) -> None:
        # partition -> key -> {"tag": dict, "fields": {field: (fragment_id, row)}}
        self._partitions: dict[str, dict[str, dict[str, Any]]] = {}
        self._fragments: dict[str, dict[str, Any]] = {}  # fragment id -> exported handle
        self._fragment_refcounts: dict[str, int] = {}  # fragment id -> field locations in it

    def update(self, partition: str, keys: Sequence[str], *,
               tags: Sequence[Mapping[str, Any]] | None = None,
               handle: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Merges tags[i] into key i's tag and points every field of the single-stage
        handle, row i, at key i. Returns the keys, their merged tags and the union of their
        fields. At least one of tags and handle is needed."""
        partition = _nonempty_string(partition, "partition")
        keys = _names(keys, "keys")
        new_tags = _tags(tags, len(keys))
        fragment = _fragment(handle, len(keys)) if handle is not None else None
        if new_tags is None and fragment is None:
            raise ValueError("catalog update requires tags or a DataProto handle")
        if fragment is not None:
            fragment_id, exported, _ = fragment
            known = self._fragments.get(fragment_id)
            if known is not None and known != exported:
                raise ValueError(f"DataProto fragment id collision: {fragment_id!r}")

        # Everything is checked: from here on nothing raises.
        entries = self._partitions.setdefault(partition, {})
        merged = []
        for row, key in enumerate(keys):
            entry = entries.setdefault(key, {"tag": {}, "fields": {}})
            if new_tags is not None:
                entry["tag"].update(new_tags[row])
            merged.append(copy.deepcopy(entry["tag"]))
        if fragment is not None:
            fragment_id, exported, fields = fragment
            self._fragments.setdefault(fragment_id, exported)
            self._fragment_refcounts.setdefault(fragment_id, 0)
            for row, key in enumerate(keys):
                located = entries[key]["fields"]
                for field in fields:
                    previous = located.get(field)
                    located[field] = (fragment_id, row)
                    if previous is not None and previous[0] == fragment_id:
                        continue  # same fragment (another row at most): no count changes
                    self._fragment_refcounts[fragment_id] += 1
                    if previous is not None:
                        self._release(previous[0])
        return {"keys": list(keys), "tags": merged, "fields": _field_union(entries, keys)}

    def resolve(self, partition: str, keys: Sequence[str],
                fields: Sequence[str] | None = None) -> dict[str, Any]:
        """Where each of fields (default: every field the keys have) lives for each key, in
        key order: ``field_groups`` gathers fields whose rows share the same locations,
        ``handles`` has each fragment named. ValueError for a missing key, or a field some
        key does not have yet."""
        partition = _nonempty_string(partition, "partition")
        keys = _names(keys, "keys")
        entries = self._partitions.get(partition, {})
        missing = [key for key in keys if key not in entries]
        if missing:
            raise ValueError(f"keys were not found in partition {partition!r}: {missing}")
        wanted = (list(_names(fields, "field names")) if fields is not None
                  else _field_union(entries, keys))
        if not wanted:
            raise ValueError("requested keys do not contain any fields")
        for key in keys:
            absent = [field for field in wanted if field not in entries[key]["fields"]]
            if absent:
                raise ValueError(f"fields are not ready for key {key!r}: {absent}")

        groups: dict[tuple, list[str]] = {}
        for field in wanted:
            locations = tuple(entries[key]["fields"][field] for key in keys)
            groups.setdefault(locations, []).append(field)
        used = {location[0] for locations in groups for location in locations}
        return {
            "keys": list(keys),
            "tags": [copy.deepcopy(entries[key]["tag"]) for key in keys],
            "fields": wanted,
            "field_groups": [{"fields": names, "locations": list(locations)}
                             for locations, names in groups.items()],
            "handles": {fid: copy.deepcopy(self._fragments[fid]) for fid in used},
        }

    def list(self, partition: str | None = None) -> dict[str, dict[str, Any]]:
        """{partition: {key: tag}}, for one partition (empty when unknown) or all."""
        if partition is None:
            names = list(self._partitions)
        else:
            partition = _nonempty_string(partition, "partition")
            names = [partition] if partition in self._partitions else []
        return {name: {key: copy.deepcopy(entry["tag"])
                       for key, entry in self._partitions[name].items()}
                for name in names}

    def remove(self, partition: str, keys: Sequence[str]) -> None:
        """Forgets keys (unknown ones are skipped), and fragments nothing points into any
        more. Metadata only: the store's objects stay."""
        partition = _nonempty_string(partition, "partition")
        keys = _names(keys, "keys")
        entries = self._partitions.get(partition)
        if entries is None:
            return
        for key in keys:
            entry = entries.pop(key, None)
            if entry is not None:
                for fragment_id, _row in entry["fields"].values():
                    self._release(fragment_id)
        if not entries:
            del self._partitions[partition]

    def _release(self, fragment_id: str) -> None:
        """One location fewer in fragment_id; forgotten at zero."""
        left = self._fragment_refcounts[fragment_id] - 1
        if left:
            self._fragment_refcounts[fragment_id] = left
        else:
            del self._fragment_refcounts[fragment_id]
            del self._fragments[fragment_id]


def _fragment(handle: Mapping[str, Any], rows: int) -> tuple[str, dict[str, Any], tuple]:
    """(fragment id, exported handle, field names) of a single-stage handle of rows rows."""
    from mooncake.structured_object_store import export_dataproto_ref, import_dataproto_ref

    ref = import_dataproto_ref(handle)
    if ref.batch_size != rows:
        raise ValueError(f"DataProto batch size {ref.batch_size!r} does not match "
                         f"{rows} logical keys")
    if len(ref.stage_refs) != 1:
        raise ValueError("catalog fragments must contain exactly one DataProto stage")
    (stage,) = ref.stage_refs.values()
    fragment_id = _nonempty_string(stage.manifest_key, "manifest_key")
    fields = _names(ref.field_index, "field names")
    return fragment_id, export_dataproto_ref(ref), fields


def _field_union(entries: Mapping[str, Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """The keys' fields, each once, in the order first seen."""
    return list(dict.fromkeys(field for key in keys for field in entries[key]["fields"]))


def _names(values: Any, label: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValueError(f"{label} must be a sequence of non-empty strings")
    names = tuple(values)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"{label} must be non-empty strings")
    if len(set(names)) != len(names):
        raise ValueError(f"{label} must be unique")
    return names


def _tags(tags: Sequence[Mapping[str, Any]] | None, count: int) -> list[dict] | None:
    if tags is None:
        return None
    if len(tags) != count:
        raise ValueError("tags must have the same length as keys")
    if not all(isinstance(tag, Mapping) for tag in tags):
        raise TypeError("tags must be mappings")
    return [copy.deepcopy(dict(tag)) for tag in tags]


def _nonempty_string(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


__all__ = ["DataProtoCatalog"]
