"""ReplicateConfig and SoftPinAction, and their effect on put/upsert."""
import copy

import pytest

from mooncake_store import ReplicateConfig, SoftPinAction

INVALID_PARAMS = -600
UNAVAILABLE_IN_CURRENT_STATUS = -1010


def test_defaults():
    c = ReplicateConfig()
    assert c.replica_num == 1
    assert c.with_hard_pin is False
    assert c.with_soft_pin is False
    assert c.soft_pin_action == SoftPinAction.PRESERVE
    assert c.soft_pin_ttl_ms is None
    assert c.preferred_segment == ""
    assert c.preferred_segments == []
    assert c.prefer_alloc_in_same_node is False


def test_str_shows_every_field():
    c = ReplicateConfig()
    c.replica_num = 2
    c.with_hard_pin = True
    c.soft_pin_action = SoftPinAction.ENABLE
    c.soft_pin_ttl_ms = 1500
    c.preferred_segment = "a:1"
    c.preferred_segments = ["b:2", "c:3"]
    text = str(c)
    for part in ["replica_num=2", "with_soft_pin=True", "with_hard_pin=True",
                 "soft_pin_action=SoftPinAction.ENABLE", "soft_pin_ttl_ms=1500",
                 "preferred_segment='a:1'", "preferred_segments=['b:2', 'c:3']"]:
        assert part in text
    assert repr(c) == text


def test_with_soft_pin_is_the_boolean_view_of_the_action():
    c = ReplicateConfig()
    c.with_soft_pin = True
    assert c.soft_pin_action == SoftPinAction.ENABLE
    c.with_soft_pin = False
    assert c.soft_pin_action == SoftPinAction.DISABLE
    c.soft_pin_action = SoftPinAction.ENABLE
    assert c.with_soft_pin is True
    actions = (SoftPinAction.PRESERVE, SoftPinAction.ENABLE, SoftPinAction.DISABLE)
    assert [a.name for a in actions] == ["PRESERVE", "ENABLE", "DISABLE"]


@pytest.mark.parametrize("bad", [-1, 2 ** 64, 1.5, "10"])
def test_soft_pin_ttl_range(bad):
    c = ReplicateConfig()
    with pytest.raises(TypeError):
        c.soft_pin_ttl_ms = bad
    c.soft_pin_ttl_ms = 2 ** 64 - 1
    assert c.soft_pin_ttl_ms == 2 ** 64 - 1
    c.soft_pin_ttl_ms = None
    assert c.soft_pin_ttl_ms is None


def test_replica_num_must_be_non_negative():
    c = ReplicateConfig()
    with pytest.raises(TypeError):
        c.replica_num = -1


def test_copy():
    c = ReplicateConfig()
    c.replica_num = 3
    c.preferred_segments = ["x:1"]
    for d in (copy.copy(c), copy.deepcopy(c)):
        assert str(d) == str(c)
        d.replica_num = 1
        assert c.replica_num == 3


@pytest.mark.parametrize("action", [SoftPinAction.PRESERVE, SoftPinAction.DISABLE])
def test_ttl_without_enable_is_invalid(store, key, action):
    c = ReplicateConfig()
    c.soft_pin_action = action
    c.soft_pin_ttl_ms = 1000
    value = b"v" * 100
    assert store.put(key(), value, c) == INVALID_PARAMS
    assert store.upsert(key(), value, c) == INVALID_PARAMS
    buf = store.alloc(100)
    assert store.put_from(key(), buf, 100, c) == INVALID_PARAMS
    assert store.upsert_from(key(), buf, 100, c) == INVALID_PARAMS
    assert store.put_parts(key(), value, config=c) == INVALID_PARAMS
    assert store.put_batch([key()], [value], c) == INVALID_PARAMS
    assert store.batch_put_from([key()], [buf], [100], c) == [INVALID_PARAMS]
    assert store.is_exist(key()) == 0


def test_ttl_with_enable_is_accepted(store, key):
    c = ReplicateConfig()
    c.soft_pin_action = SoftPinAction.ENABLE
    c.soft_pin_ttl_ms = 60_000
    assert store.put(key(), b"pinned", c) == 0
    assert store.upsert(key(), b"pinned again", c) == 0
    assert store.get(key()) == b"pinned again"


def test_replica_num_zero_is_invalid(store, key):
    c = ReplicateConfig()
    c.replica_num = 0
    assert store.put(key(), b"v", c) == INVALID_PARAMS


def test_preferred_segment_wins_over_preferred_segments(store, key):
    me = store.get_hostname()
    c = ReplicateConfig()
    c.preferred_segments = [me]
    assert store.put(key("list"), b"v", c) == 0
    c.preferred_segment = me
    c.preferred_segments = ["no-such-daemon:1", "another:2"]
    assert store.put(key("single"), b"v", c) == 0
    assert store.get(key("single")) == b"v"


def test_config_none_means_defaults(store, key):
    assert store.put(key(), b"v", None) == 0
    assert store.put(key("kw"), b"v", config=None) == 0


def test_hard_pin_keeps_the_object_until_forced(store, key):
    c = ReplicateConfig()
    c.with_hard_pin = True
    assert store.put(key(), b"pinned", c) == 0
    assert store.remove(key()) == UNAVAILABLE_IN_CURRENT_STATUS
    assert store.remove_all() >= 0
    assert store.is_exist(key()) == 1
    assert store.remove(key(), force=True) == 0
    assert store.is_exist(key()) == 0


def test_soft_pin_put(store, key):
    c = ReplicateConfig()
    c.with_soft_pin = True
    assert store.put(key(), b"soft", c) == 0
    assert store.get(key()) == b"soft"
