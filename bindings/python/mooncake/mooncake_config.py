"""``mooncake.mooncake_config``: Mooncake's client configuration, read from a JSON file or
from the environment, with Mooncake's field names, defaults and checks.

A ``MooncakeConfig`` carries the arguments of ``MooncakeDistributedStore.setup()``; the
engines and Mooncake's own tools (``mooncake.mooncake_store_service``, the async store's
test script) build one with ``MooncakeConfig.load_from_env()`` and pass its fields to
``setup()``. What each field becomes in this store is ``setup()``'s business
(docs/mooncake-api.md, "setup()"): this module only reads and checks them.

Sources, in order:

* ``MooncakeConfig.from_file(path)``: a JSON object; ``local_hostname``,
  ``metadata_server`` and ``master_server_address`` are required, the rest default.
* ``MooncakeConfig.load_from_env()``: the file named by ``MOONCAKE_CONFIG_PATH`` when set,
  else the variables below, ``MOONCAKE_MASTER`` being required:

  ======================================  =========================  =====================
  variable                                field                      default
  ======================================  =========================  =====================
  ``MOONCAKE_MASTER``                     ``master_server_address``  (required)
  ``MOONCAKE_LOCAL_HOSTNAME``             ``local_hostname``         ``localhost``
  ``MOONCAKE_TE_META_DATA_SERVER``        ``metadata_server``        ``P2PHANDSHAKE``
  ``MOONCAKE_GLOBAL_SEGMENT_SIZE``        ``global_segment_size``    3355443200
  ``MOONCAKE_LOCAL_BUFFER_SIZE``          ``local_buffer_size``      1073741824
  ``MOONCAKE_PROTOCOL``                   ``protocol``               ``tcp``
  ``MOONCAKE_DEVICE``                     ``device_name``            ``""``
  ``MOONCAKE_OFFLOAD_ENABLED``            ``enable_ssd_offload``     false
  ``MOONCAKE_OFFLOAD_FILE_STORAGE_PATH``  ``ssd_offload_path``       ``""``
  ``MOONCAKE_TENANT_ID``                  ``tenant_id``              ``default``
  ``MOONCAKE_ENABLE_CLIENT_HTTP_SERVER``  ``enable_client_http_server``  false
  ``MOONCAKE_CLIENT_HTTP_PORT``           ``client_http_port``       9300
  ======================================  =========================  =====================

Values are read as Mooncake reads them: sizes as an int of bytes or a string with a binary
unit (``"3 GB"``, ``"512m"``, ``"1.5gb"``; a bare ``"1.5"`` is truncated to 1 byte, as
there), booleans as a bool, a number or a word (``true``/``false``, ``yes``/``no``,
``on``/``off``, ``enable``/``disable``, ``1``/``0``; another word is a ``ValueError``,
never a silent false). Every instance, however built, is checked: an empty or non-string
protocol, a negative size or an empty required field is a ``ValueError`` naming the field;
the protocol is lower-cased (the engines compare it case-sensitively) and a protocol no
Mooncake build knows is passed on with a warning on this module's ``logger``.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Optional

logger = logging.getLogger(__name__)

DEFAULT_GLOBAL_SEGMENT_SIZE = 3355443200  # Mooncake's default: 3.125 GiB
DEFAULT_LOCAL_BUFFER_SIZE = 1073741824  # 1 GiB
DEFAULT_CLIENT_HTTP_PORT = 9300
DEFAULT_TENANT_ID = "default"

# Units of a size string, binary as Mooncake's: longest spelling first, so that "kb" is
# not read as "k" followed by a stray "b".
_UNITS = (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("tb", 1 << 40),
          ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40), ("b", 1))

_TRUE_WORDS = frozenset({"true", "1", "yes", "on", "enable"})
_FALSE_WORDS = frozenset({"false", "0", "no", "off", "disable"})

# The protocols some Mooncake build accepts (its transfer engine's transports and the
# store's rpc_only mode). Only a hint for a typo: the engine decides, so another value is
# warned about and passed on. With this store the daemon chooses its transport
# (mooncaked --protocol) and setup() accepts any of these.
_KNOWN_PROTOCOLS = frozenset({
    "tcp", "rdma", "efa", "nvmeof", "nvlink", "musa", "nvlink_intra", "hip", "barex",
    "cxl", "ascend", "ub", "ubshmem", "maca", "sunrise_link", "rpc_only",
})

_REQUIRED_FIELDS = ("local_hostname", "metadata_server", "master_server_address")


def _parse_segment_size(value: Any) -> int:
    """Bytes of a size given as an int, a float (truncated) or a string ("4096", "3 GB",
    "1.5gb", "512k", "1e9"). ValueError for an empty string, a unit without a number, or
    text that is not a number."""
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return int(value)
    text = value.strip().lower()
    if not text:
        raise ValueError("Invalid segment size: empty string")
    for unit, scale in _UNITS:
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            if not number:
                raise ValueError(f"Invalid segment size: missing number before '{unit}'")
            return int(float(number) * scale)
    return int(float(text))


def _parse_bool(value: Any) -> bool:
    """A boolean setting given as a bool, a number, None (false) or a word. ValueError for
    a word that is neither a yes nor a no: "false" must not read as true, nor a typo as
    false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if value is None:
        return False
    word = str(value).strip().lower()
    if not word or word in _FALSE_WORDS:
        return False
    if word in _TRUE_WORDS:
        return True
    raise ValueError(f"Invalid boolean value: {value!r}")


@dataclass
class MooncakeConfig:
    """The arguments of ``MooncakeDistributedStore.setup()``, checked (see the module's
    docstring for the sources and rules).

    Example file::

        {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
         "master_server_address": "localhost:50051", "global_segment_size": "3 GB",
         "local_buffer_size": 1073741824, "protocol": "tcp", "device_name": ""}
    """

    local_hostname: str
    metadata_server: str
    global_segment_size: int
    local_buffer_size: int
    protocol: str
    device_name: Optional[str]
    master_server_address: str
    enable_ssd_offload: bool = False
    ssd_offload_path: str = ""
    tenant_id: str = DEFAULT_TENANT_ID
    enable_client_http_server: bool = False
    client_http_port: int = DEFAULT_CLIENT_HTTP_PORT

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(
                f"Invalid protocol: {self.protocol!r}. Protocol must be a non-empty "
                "string, e.g. 'tcp' or 'rdma'.")
        self.protocol = self.protocol.strip().lower()
        if self.protocol not in _KNOWN_PROTOCOLS:
            logger.warning(
                "Unrecognised protocol %r: passed on unchanged (known: %s)",
                self.protocol, ", ".join(sorted(_KNOWN_PROTOCOLS)))
        for name in ("global_segment_size", "local_buffer_size"):
            size = getattr(self, name)
            if size < 0:
                raise ValueError(f"Invalid {name}: {size}. Size must be non-negative.")
        for name in _REQUIRED_FIELDS:
            text = getattr(self, name)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(
                    f"Config field {name!r} must be a non-empty string, got {text!r}.")

    @staticmethod
    def from_file(file_path: str) -> "MooncakeConfig":
        """Reads a JSON object of settings; ValueError names a missing required field."""
        with open(file_path) as f:
            raw = json.load(f)
        for name in _REQUIRED_FIELDS:
            if name not in raw:
                raise ValueError(f"Missing required config field: {name}")
        ssd_path = raw.get("ssd_offload_path")
        tenant = raw.get("tenant_id")
        return MooncakeConfig(
            local_hostname=raw.get("local_hostname"),
            metadata_server=raw.get("metadata_server"),
            global_segment_size=_parse_segment_size(
                raw.get("global_segment_size", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                raw.get("local_buffer_size", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=raw.get("protocol", "tcp"),
            device_name=raw.get("device_name", ""),
            master_server_address=raw.get("master_server_address"),
            enable_ssd_offload=_parse_bool(raw.get("enable_ssd_offload", False)),
            ssd_offload_path="" if ssd_path is None else str(ssd_path),
            tenant_id=DEFAULT_TENANT_ID if tenant is None else str(tenant),
            enable_client_http_server=_parse_bool(raw.get("enable_client_http_server", False)),
            client_http_port=int(raw.get("client_http_port", DEFAULT_CLIENT_HTTP_PORT)),
        )

    @staticmethod
    def load_from_env() -> "MooncakeConfig":
        """The file of ``MOONCAKE_CONFIG_PATH``, else the ``MOONCAKE_*`` variables (the
        module's docstring lists them); ValueError when neither that nor ``MOONCAKE_MASTER``
        is set."""
        path = os.getenv("MOONCAKE_CONFIG_PATH")
        if path is not None:
            return MooncakeConfig.from_file(path)
        master = os.getenv("MOONCAKE_MASTER")
        if not master:
            raise ValueError(
                "Neither the environment variable 'MOONCAKE_CONFIG_PATH' nor "
                "'MOONCAKE_MASTER' is set.")
        env = os.getenv
        return MooncakeConfig(
            local_hostname=env("MOONCAKE_LOCAL_HOSTNAME", "localhost"),
            metadata_server=env("MOONCAKE_TE_META_DATA_SERVER", "P2PHANDSHAKE"),
            global_segment_size=_parse_segment_size(
                env("MOONCAKE_GLOBAL_SEGMENT_SIZE", DEFAULT_GLOBAL_SEGMENT_SIZE)),
            local_buffer_size=_parse_segment_size(
                env("MOONCAKE_LOCAL_BUFFER_SIZE", DEFAULT_LOCAL_BUFFER_SIZE)),
            protocol=env("MOONCAKE_PROTOCOL", "tcp"),
            device_name=env("MOONCAKE_DEVICE", ""),
            master_server_address=master,
            enable_ssd_offload=_parse_bool(env("MOONCAKE_OFFLOAD_ENABLED", "false")),
            ssd_offload_path=env("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", ""),
            tenant_id=env("MOONCAKE_TENANT_ID", DEFAULT_TENANT_ID),
            enable_client_http_server=_parse_bool(
                env("MOONCAKE_ENABLE_CLIENT_HTTP_SERVER", "false")),
            client_http_port=int(env("MOONCAKE_CLIENT_HTTP_PORT", DEFAULT_CLIENT_HTTP_PORT)),
        )


__all__ = ["MooncakeConfig", "DEFAULT_GLOBAL_SEGMENT_SIZE", "DEFAULT_LOCAL_BUFFER_SIZE"]
