"""How the tensor calls move bytes: over the store's own calls, never past them.

- Writes gather each object's pieces (the header, then the tensor's bytes or a shard's
  rows) into one block of the pool and store the batch in one request
  (``store._write_tensor_objects``): one copy, as any put of caller memory costs.
- Whole reads go into memory torch owns (get_size, then batch_get_into), and the tensors
  returned are views of it: the pool is never held by a returned tensor. A read that
  overran its lease is read again (get_into).
- Headers alone, and shard fragments, are ranged reads (get_into_ranges).

Also the refusal every call makes the same way: why goes to last_error() (and stderr, at
most once a second), the call returns Mooncake's code or None.
"""
import copy

from mooncake import _tensor_codec as codec

INVALID_PARAMS = -600
LEASE_EXPIRED = -707
# How often a read whose value grew between get_size and get_into (an upsert in between)
# is tried again, as the binding's get does.
_READ_ATTEMPTS = 8
_MAX_VALUE_SIZE = 4 << 30
# How often a read that overran its lease is tried again (each time with fewer entries).
_LEASE_RETRIES = 4


def refuse(store, method, why, result=INVALID_PARAMS):
    """Records why method refused (store.last_error()) and returns result."""
    store._refuse(f"{method}: {why}")
    return result


def config_for_key(config, index):
    """Mooncake's ReplicateConfig.ForSingleKey: the config of entry index of a batch (its
    group id alone)."""
    if config is None or getattr(config, "group_ids", None) is None:
        return config
    single = copy.copy(config)
    single.group_ids = [config.group_ids[index]] if index < len(config.group_ids) else []
    return single


def check_preferred_segments(config):
    """Mooncake's validate_replicate_config: preferred_segments, when given, name one
    segment per replica. The reason, or None."""
    if config is None or not config.preferred_segments:
        return None
    if len(config.preferred_segments) != config.replica_num:
        return (f"config names {len(config.preferred_segments)} preferred_segments for "
                f"replica_num {config.replica_num}: name one per replica, or none")
    return None


def write_objects(store, keys, objects, config=None, upsert=False):
    """Stores objects[i] (a list of pieces: bytes, (address, size) or (address, row,
    stride, rows)) under keys[i], all in one batch; one code per key."""
    if not keys:
        return []
    return list(store._write_tensor_objects(list(keys), objects, config, upsert))


def get_into(store, keys, buffer_ptrs, sizes):
    """store.batch_get_into, with the entries whose read overran its lease (-707: a large
    batch copied on a busy host can outlast the master's --default_kv_lease_ttl) read
    again, as a client of a store with leases must; the rest as batch_get_into answered."""
    results = list(store.batch_get_into(keys, buffer_ptrs, sizes))
    for _ in range(_LEASE_RETRIES):
        again = [i for i, n in enumerate(results) if n == LEASE_EXPIRED]
        if not again:
            break
        retried = store.batch_get_into([keys[i] for i in again],
                                       [buffer_ptrs[i] for i in again], [sizes[i] for i in again])
        for i, n in zip(again, retried):
            results[i] = n
    return results


def read_objects(store, keys):
    """The whole values of keys, each as a uint8 tensor of its bytes (None for a miss or a
    failure), read into memory torch owns."""
    t = codec.torch()
    out = [None] * len(keys)
    pending = list(range(len(keys)))
    largest = [0] * len(keys)
    for attempt in range(_READ_ATTEMPTS):
        if not pending:
            break
        batch, buffers = [], []
        for i in pending:
            size = store.get_size(keys[i])
            if size <= 0:
                continue
            # A retry means an upsert grew the value since get_size: room for more.
            largest[i] = max(largest[i], size)
            capacity = min(largest[i] << min(3 * attempt, 32), _MAX_VALUE_SIZE)
            buffers.append(t.empty(capacity, dtype=t.uint8))
            batch.append(i)
        if not batch:
            break
        results = get_into(store, [keys[i] for i in batch], [b.data_ptr() for b in buffers],
                           [b.numel() for b in buffers])
        pending = []
        for i, buffer, n in zip(batch, buffers, results):
            if n > 0:
                out[i] = buffer[:n]
            elif n == INVALID_PARAMS:
                pending.append(i)
    return out


def read_object(store, key):
    """read_objects for one key."""
    return read_objects(store, [key])[0]


def read_headers(store, keys):
    """The headers of keys' objects, read alone (their first 304 bytes, one ranged read
    each, in one request): a header namespace per key, None for a miss or an object that
    is not a tensor."""
    if not keys:
        return []
    size = codec.HEADER_SIZE
    scratch = bytearray(size * len(keys))
    results = store.get_into_ranges([scratch], [list(keys)],
                                    [[[i * size] for i in range(len(keys))]],
                                    [[[0] for _ in keys]], [[[size] for _ in keys]])
    headers = []
    for i, fragments in enumerate(results[0]):
        header = None
        if fragments and fragments[0] == size:
            try:
                header = codec.decode(memoryview(scratch)[i * size:(i + 1) * size])
            except codec.Refused:
                header = None
        headers.append(header)
    return headers


def read_fragments(store, destination, fragments):
    """Reads fragments, a list of (key, dst_offset, src_offset, size), into destination (an
    address in registered or pool memory, or a writable buffer object) in one request.
    True when every fragment read all its bytes."""
    by_key = {}
    for key, dst, src, size in fragments:
        if size == 0:
            continue
        entry = by_key.setdefault(key, ([], [], []))
        entry[0].append(dst)
        entry[1].append(src)
        entry[2].append(size)
    if not by_key:
        return True
    keys = list(by_key)
    for _ in range(1 + _LEASE_RETRIES):
        results = store.get_into_ranges([destination], [keys],
                                        [[by_key[k][0] for k in keys]],
                                        [[by_key[k][1] for k in keys]],
                                        [[by_key[k][2] for k in keys]])
        got = [list(r) for r in results[0]]
        if all(g == by_key[k][2] for k, g in zip(keys, got)):
            return True
        if not any(LEASE_EXPIRED in g for g in got):
            return False
    return False
