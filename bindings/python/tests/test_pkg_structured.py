"""mooncake.structured_object_store and mooncake.dataproto_catalog (issue 31, part pkg),
against the suite's real cluster: structured objects and DataProto batches stored as chunk
objects behind manifests (Mooncake's formats), read whole, by member, by row slice and by
row index, through the store's batch, ranged and pool paths; appends, handles, cleanup, and
a tampered manifest refused.

Most DataProtos here are written with an explicit ungrouped config (group_ids [""]);
test_sliced_rows_outlive_the_next_fields_reads uses the default, Mooncake's storage group
(config.group_ids), as its DataProto puts name one.

Runs in the main suite (ctest python_binding_test).
"""
import json

import numpy as np
import pytest

from mooncake.dataproto_catalog import DataProtoCatalog
from mooncake.store import MooncakeDistributedStore, ReplicateConfig
from mooncake.structured_object_store import (
    BundleTransferPolicy, FieldSchema, MooncakeBundleTransfer, StructuredObjectPayload,
    export_dataproto_ref, import_dataproto_ref)


@pytest.fixture
def transfer(store, key):
    """A transfer over the suite's store, its keys under a prefix of this test's."""
    return MooncakeBundleTransfer(store, key_prefix=key("sos"))


def ungrouped():
    config = ReplicateConfig()
    config.group_ids = [""]
    return config


def store_keys_exist(store, keys):
    return [store.is_exist(k) for k in keys]


def bundle_keys(ref):
    manifest = ref.manifest
    keys = [c["key"] for spec in [manifest["meta"], *manifest["buffers"].values()]
            for c in spec["chunks"]]
    return keys + [ref.manifest_key]


def test_structured_object_roundtrip_by_member_slice_and_destination(store, transfer):
    weights = np.arange(96, dtype=np.float32).reshape(12, 8)
    ref = transfer.put_structured_object(
        StructuredObjectPayload(metadata={"kind": "unit"},
                                buffers={"weights": weights, "raw": b"raw bytes"}),
        chunk_bytes=100)  # several chunks per member: ranged reads across chunk objects
    assert len(ref.manifest["buffers"]["weights"]["chunks"]) == 4
    assert all(store_keys_exist(store, bundle_keys(ref)))
    # The manifest is Mooncake's JSON, in the store under its key.
    assert json.loads(store.get(ref.manifest_key))["buffers"] == ref.manifest["buffers"]

    whole = transfer.materialize(transfer.read_spec(ref))
    assert whole.metadata["kind"] == "unit"
    assert np.array_equal(whole.objects["weights"], weights)
    assert bytes(whole.objects["raw"]) == b"raw bytes"
    # This store's client gets a BufferPool: arrays read are leases of its pool, given back
    # by release_result (or when collected).
    assert hasattr(whole.objects["weights"], "_mooncake_pool_owner")
    MooncakeBundleTransfer.release_result(whole.objects)

    rows = transfer.materialize(transfer.read_spec(ref).select_members(["weights"])
                                .slice_member("weights", axis=0, start=3, end=11, step=2))
    assert list(rows.objects) == ["weights"]
    assert np.array_equal(rows.objects["weights"], weights[3:11:2])
    out = np.empty((5, 8), dtype=np.float32)
    into = transfer.materialize_into(
        transfer.read_spec(ref).slice_member("weights", axis=0, start=7, end=12),
        {"weights": out})
    assert into.objects["weights"] is out and np.array_equal(out, weights[7:])

    transfer.remove_bundle(ref)
    assert store_keys_exist(store, bundle_keys(ref)) == [0] * len(bundle_keys(ref))


def test_put_object_and_copy_policy(store, transfer):
    array = np.arange(10, dtype=np.int64)
    ref = transfer.put_object(array, policy=BundleTransferPolicy(copy_mode="copy"))
    assert np.array_equal(transfer.get_object(ref), array)
    ref2 = transfer.put_object({"a": array, "b": b"xyz"}, chunk_bytes=16,
                               policy=BundleTransferPolicy(max_inflight_put=4,
                                                           put_mode="parallel"))
    got = transfer.get_object(ref2)
    assert np.array_equal(got["a"], array) and bytes(got["b"]) == b"xyz"
    for r in (ref, ref2):
        transfer.remove_bundle(r)


def test_dataproto_rows_fields_appends_and_cleanup(store, transfer):
    input_ids = np.arange(48, dtype=np.int64).reshape(6, 8)
    prompts = np.asarray(["", "b", None, "dddd", "e", "fff"], dtype=object)
    meta = np.asarray([{"row": i, "tags": ["x"] * i} for i in range(6)], dtype=object)
    tokens = np.empty(6, dtype=object)
    tokens[:] = [np.arange(i, dtype=np.int32) for i in range(6)]
    ref = transfer.put_dataproto(
        {"batch": {"input_ids": input_ids},
         "non_tensor_batch": {"prompts": prompts, "meta": meta, "tokens": tokens},
         "meta_info": {"step": 3}},
        stage="rollout", chunk_bytes=64, config=ungrouped())
    assert {n: e["codec"] for n, e in ref.encoded_non_tensor.items()} == {
        "prompts": "utf8_ragged", "meta": "msgpack_ragged", "tokens": "typed_ragged"}
    scores = np.linspace(0, 1, 6, dtype=np.float32)
    ref = transfer.append_dataproto_fields(ref, {"batch": {"scores": scores},
                                                 "meta_info": {"critic": True}},
                                           stage="rollout", config=ungrouped())
    handle = export_dataproto_ref(ref)
    json.dumps(handle)  # travels as JSON
    reader = MooncakeBundleTransfer(store, key_prefix=transfer.key_prefix)
    imported = import_dataproto_ref(handle)

    full = reader.get_dataproto(imported)
    assert full["meta_info"] == {"step": 3, "critic": True}
    assert np.array_equal(full["batch"]["input_ids"], input_ids)
    assert np.array_equal(full["batch"]["scores"], scores)
    assert full["non_tensor_batch"]["prompts"].tolist() == prompts.tolist()
    assert full["non_tensor_batch"]["meta"].tolist() == meta.tolist()
    assert [t.tolist() for t in full["non_tensor_batch"]["tokens"]] == \
        [t.tolist() for t in tokens]

    for rows, index in [(slice(1, 5), slice(1, 5)), ([5, 0, 5, 2], [5, 0, 5, 2])]:
        part = reader.get_dataproto(handle, fields=["input_ids", "scores", "prompts", "meta",
                                                    "tokens"], rows=rows)
        assert np.array_equal(part["batch"]["input_ids"], input_ids[index])
        assert np.array_equal(part["batch"]["scores"], scores[index])
        assert part["non_tensor_batch"]["prompts"].tolist() == prompts[index].tolist()
        assert part["non_tensor_batch"]["meta"].tolist() == meta[index].tolist()
        assert [t.tolist() for t in part["non_tensor_batch"]["tokens"]] == \
            [t.tolist() for t in tokens[index]]
    flat = reader.get(handle, type="dict", fields=["prompts"], meta_info_keys=[])
    assert flat == {"prompts": prompts.tolist()}

    view = reader.dataproto_manifest_view(handle)
    assert view["batch_fields"]["scores"]["stage"] == "rollout"
    merged = ref.stage_refs["rollout"].manifest
    keys = [c["key"] for spec in [merged["meta"], *merged["buffers"].values()]
            for c in spec["chunks"]] + merged["cleanup_keys"]
    reader.cleanup_dataproto(handle)
    assert store_keys_exist(store, keys) == [0] * len(keys)


def test_dataproto_field_schema_and_flat_dict(transfer):
    tokens = [np.asarray([1, 2], np.int32), None, np.asarray([3], np.int32)]
    ref = transfer.put({"input_ids": np.arange(3), "tokens": tokens, "uid": ["a", "b", "c"],
                        "step": 7},
                       type="dict", config=ungrouped(), field_schemas={
                           "tokens": FieldSchema(codec="typed_ragged", metadata={
                               "section": "non_tensor_batch", "dtype": "int32"})})
    got = transfer.get(ref, type="dict")
    assert got["step"] == 7 and got["uid"] == ["a", "b", "c"]
    assert np.array_equal(got["input_ids"], np.arange(3))
    assert [None if t is None else t.tolist() for t in got["tokens"]] == [[1, 2], None, [3]]
    transfer.cleanup_dataproto(ref)


def test_tensor_members_roundtrip(transfer):
    torch = pytest.importorskip("torch")
    tensor = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    ref = transfer.put_object({"t": tensor, "scalar": torch.tensor(2.5)})
    got = transfer.get_object(ref)
    assert torch.equal(got["t"], tensor) and torch.equal(got["scalar"], torch.tensor(2.5))
    transfer.remove_bundle(ref)


def test_sliced_rows_outlive_the_next_fields_reads(transfer):
    """Rows read by slice into BufferPool leases stay valid while later fields of the same
    read take leases of their own: a ragged tensor column's rows once lost their lease's
    owner (views skipped the array holding it) and read back another field's bytes."""
    torch = pytest.importorskip("torch")
    ragged = np.empty(6, dtype=object)
    ragged[:] = [torch.arange(i + 1, dtype=torch.float32) for i in range(6)]
    tensor = torch.arange(24, dtype=torch.int64).reshape(6, 4)
    ref = transfer.put_dataproto({
        "batch": {"tensor": tensor, "array": np.arange(18, dtype=np.int64).reshape(6, 3)},
        "non_tensor_batch": {
            "ragged": ragged,
            "text": np.asarray(["a", "bb", "ccc", "dddd", "eeeee", "ffffff"], dtype=object),
            "json": np.asarray([{"i": i} for i in range(6)], dtype=object)}})
    got = transfer.get_dataproto(ref, rows=slice(2, 5))
    assert [t.tolist() for t in got["non_tensor_batch"]["ragged"]] == [
        [0.0, 1.0, 2.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0, 4.0]]
    assert got["non_tensor_batch"]["text"].tolist() == ["ccc", "dddd", "eeeee"]
    assert torch.equal(got["batch"]["tensor"], tensor[2:5])
    # A tensor member sliced by rows: its header's size plus the rows' bytes.
    member = transfer.put_structured_object(StructuredObjectPayload(buffers={"t": tensor}))
    spec = member.manifest["buffers"]["t"]
    assert spec["bytes"] == spec["metadata_bytes"] + tensor.numel() * tensor.element_size()
    rows = transfer.materialize(transfer.read_spec(member).select_members(["t"])
                                .slice_member("t", axis=0, start=3, end=5))
    assert torch.equal(rows.objects["t"], tensor[3:5])
    transfer.remove_bundle(member)
    transfer.cleanup_dataproto(ref)


def test_tampered_manifest_is_refused(store, transfer, key):
    ref = transfer.put_bundle(b"meta", {"payload": b"abcdef"}, chunk_bytes=2)
    tampered = dict(ref.manifest)
    tampered["buffers"] = {"payload": {"key": key("foreign"), "bytes": 6,
                                       "chunks": [{"key": key("foreign"), "bytes": 6}]}}
    with pytest.raises(ValueError, match="namespace"):
        transfer.materialize(transfer.read_spec({"manifest_key": ref.manifest_key,
                                                 "manifest": tampered}))
    with pytest.raises(ValueError, match="manifest_key"):
        transfer.remove_bundle({"manifest_key": key("elsewhere/manifest"),
                                "manifest": ref.manifest})
    transfer.remove_bundle(ref)


def test_a_failed_put_leaves_nothing_behind(store, transfer):
    class Refusing:
        """The store, refusing the third put."""

        def __init__(self, inner):
            self.inner, self.count, self.written = inner, 0, []

        def put(self, k, value, config=None):
            self.count += 1
            if self.count == 3:
                return -200  # no space
            self.written.append(k)
            return self.inner.put(k, value)

        def get(self, k):
            return self.inner.get(k)

        def remove(self, k, force=False):
            return self.inner.remove(k, force)

    refusing = Refusing(store)
    t = MooncakeBundleTransfer(refusing, key_prefix=transfer.key_prefix)
    with pytest.raises(RuntimeError, match="put failed .*: -200"):
        t.put_bundle(b"meta", {"payload": bytes(range(64))}, chunk_bytes=16)
    assert refusing.written and store_keys_exist(store, refusing.written) == \
        [0] * len(refusing.written)


def test_catalog_over_real_handles(transfer):
    ref = transfer.put_dataproto({"batch": {"value": np.arange(2)}}, stage="rollout",
                                 config=ungrouped())
    catalog = DataProtoCatalog()
    catalog.update("train", ["a", "b"], tags=[{"s": 1}, {"s": 2}],
                   handle=export_dataproto_ref(ref))
    plan = catalog.resolve("train", ["b", "a"])
    (fragment, handle), = plan["handles"].items()
    assert plan["field_groups"] == [{"fields": ["value"],
                                     "locations": [(fragment, 1), (fragment, 0)]}]
    rows = [row for _fid, row in plan["field_groups"][0]["locations"]]
    got = transfer.get_dataproto(handle, fields=["value"], rows=rows)
    assert got["batch"]["value"].tolist() == [1, 0]
    catalog.remove("train", ["a", "b"])
    assert catalog.list() == {}
    transfer.cleanup_dataproto(ref)


def test_a_store_connected_later_gets_its_pool_then(key):
    """A transfer made over a store not yet connected reads and writes once it is."""
    s = MooncakeDistributedStore()
    t = MooncakeBundleTransfer(s, key_prefix=key("late"))
    assert s.connect(local_buffer_size=16 << 20) == 0
    ref = t.put_object({"v": np.arange(4)})
    assert np.array_equal(t.get_object(ref)["v"], np.arange(4))
    t.remove_bundle(ref)
    assert s.close() == 0
