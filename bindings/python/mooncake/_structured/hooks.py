"""The two functions the structured object store may be given other versions of: the native
gather copy and the test for the store's tensor codec. ``mooncake.structured_object_store``
holds the versions in force as its ``_concat_arrays_into`` and
``_has_tensor_codec_helpers`` (where Mooncake's module has them, and where its tests replace
them); the implementation asks for them here, at each use."""
import sys

try:
    from mooncake._fast_copy import concat_arrays_into as native_concat_arrays_into
except ImportError:  # not built: payloads are joined in Python instead
    native_concat_arrays_into = None

_PUBLIC = "mooncake.structured_object_store"


def store_module():
    """mooncake.store, or None when the extension cannot be loaded."""
    try:
        import mooncake.store as store
    except ImportError:
        return None
    return store


def tensor_codec_available() -> bool:
    """Whether mooncake.store serializes tensors itself (_serialize_tensor and
    _deserialize_tensor): tensor members are then stored in its format, else with
    torch.save."""
    store = store_module()
    return (store is not None and callable(getattr(store, "_serialize_tensor", None))
            and callable(getattr(store, "_deserialize_tensor", None)))


def concat_arrays_into():
    """The gather copy in force (None: unavailable)."""
    public = sys.modules.get(_PUBLIC)
    return getattr(public, "_concat_arrays_into", native_concat_arrays_into)


def has_tensor_codec_helpers() -> bool:
    public = sys.modules.get(_PUBLIC)
    return getattr(public, "_has_tensor_codec_helpers", tensor_codec_available)()
