"""Tenants: setup(..., tenant_id=...) and connect(tenant_id=...) give a store a key space of
its own (mooncake_store_set_tenant): the same key in two tenants is two objects, and no
removal of one tenant reaches the other's keys or the default tenant's."""
import uuid

import pytest

from mooncake_store import MooncakeDistributedStore

INVALID_PARAMS = -600
POOL_SIZE = 16 << 20


@pytest.fixture
def tenants():
    """tenants("a") -> a tenant id of this test run's own."""
    run = uuid.uuid4().hex[:12]
    return lambda name: "py-" + run + "-" + name


def connected(tenant_id):
    s = MooncakeDistributedStore()
    assert s.connect(local_buffer_size=POOL_SIZE, tenant_id=tenant_id) == 0
    return s


def test_same_key_in_two_tenants_is_two_objects(key, tenants):
    a, b, plain = connected(tenants("a")), connected(tenants("b")), connected(None)
    try:
        assert a.put(key("k"), b"of a") == 0
        assert b.put(key("k"), b"of b") == 0
        assert a.get(key("k")) == b"of a"
        assert b.get(key("k")) == b"of b"
        assert plain.get(key("k")) == b""  # the default tenant has no such key
        assert plain.is_exist(key("k")) == 0

        # No removal of a's reaches b's keys (forced: the reads above hold leases).
        assert a.remove(key("k"), force=True) == 0
        assert b.get(key("k")) == b"of b"
        assert a.put(key("k2"), b"of a") == 0
        assert a.remove_by_regex("^" + key(""), force=True) == 1
        assert a.remove_all(force=True) == 0
        assert b.get(key("k")) == b"of b"
        assert b.remove_all(force=True) == 1
        assert b.is_exist(key("k")) == 0
    finally:
        for s in (a, b, plain):
            s.close()


def test_setup_takes_tenant_id(master, key, tenants):
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master,
                   tenant_id=tenants("setup")) == 0
    assert s.put(key("via-setup"), b"tenant's") == 0
    s.close()
    # Also as a key of the config dict.
    d = MooncakeDistributedStore()
    assert d.setup({"master_server_address": master, "tenant_id": tenants("setup")}) == 0
    assert d.get(key("via-setup")) == b"tenant's"
    assert d.remove_all(force=True) == 1
    d.close()


def test_tenant_ids_are_checked(tenants):
    s = MooncakeDistributedStore()
    for bad in ["a b", "x" * 65, "a/b", "a\0b", "é"]:
        assert s.connect(local_buffer_size=POOL_SIZE, tenant_id=bad) == INVALID_PARAMS
        assert s.health_check() == 1  # nothing was connected
    with pytest.raises(TypeError, match="tenant_id"):
        s.connect(local_buffer_size=POOL_SIZE, tenant_id=7)
    # 64 characters of the allowed set are fine; a reconnect may name another tenant.
    assert s.connect(local_buffer_size=POOL_SIZE, tenant_id=tenants("x").ljust(64, "_")) == 0
    assert s.close() == 0
    assert s.connect(local_buffer_size=POOL_SIZE, tenant_id=tenants("y")) == 0
    assert s.close() == 0
