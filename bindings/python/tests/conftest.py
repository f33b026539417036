"""Fixtures for the binding's tests. They run against a real mooncake-master and mooncaked,
started by scripts/with-cluster.sh, which exports MOONCAKE_SOCKET (connect()'s default),
MOONCAKE_MASTER and MOONCAKE_HOSTNAME:

    scripts/with-cluster.sh --build build -- /usr/bin/python3 -m pytest -q bindings/python/tests

with PYTHONPATH=build/bindings/python (ctest sets both up: `ctest -R python_binding_test`).
"""
import os
import uuid

import pytest

import mooncake_store

# Small enough that tests exercising "bigger than the pool" stay fast, large enough for
# every zero-copy test's blocks.
POOL_SIZE = 64 << 20


def pytest_configure(config):
    if not os.environ.get("MOONCAKE_SOCKET"):
        raise pytest.UsageError(
            "MOONCAKE_SOCKET is not set: run the suite under scripts/with-cluster.sh "
            "(see bindings/python/tests/conftest.py)")


@pytest.fixture
def master():
    return os.environ["MOONCAKE_MASTER"]


@pytest.fixture
def store():
    """A connected store, closed after the test."""
    s = mooncake_store.MooncakeDistributedStore()
    rc = s.connect(local_buffer_size=POOL_SIZE)
    assert rc == 0, mooncake_store.strerror(rc)
    yield s
    assert s.close() == 0


@pytest.fixture
def key():
    """key("name") -> a key unique to this test run, so tests never see each other's objects
    (put never overwrites, so a reused key would keep an old value)."""
    prefix = "pytest-" + uuid.uuid4().hex[:12] + "-"
    return lambda name="k": prefix + name
