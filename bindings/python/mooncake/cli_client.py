"""``mooncake_client``: Mooncake's standalone "real client" command, as this store's daemon.

In Mooncake, ``mooncake_client`` is a process that owns memory lent to the cluster and a
transfer engine, and serves "dummy clients" (``MooncakeDistributedStore.setup_dummy``) of
its host. Here that role is ``mooncaked``'s: this command runs ``mooncaked`` with Mooncake's
flags and defaults translated, and replaces itself with it (exec: the pid is the daemon's).
Applications then reach it with ``setup_dummy(mem_pool_size, local_buffer_size,
"host:<port>")`` or ``setup()``, through its socket.

Mooncake's flags (mooncake-store/src/real_client_main.cpp) and what they become:

=============================  ==================  ==========================================
flag                           Mooncake default    here
=============================  ==================  ==========================================
``--port``                     50052               ``--port``: the daemon's transfer port,
                                                   which ``setup_dummy``'s server_address
                                                   names
``--master_server_address``    127.0.0.1:50051     ``--master``
``--global_segment_size``      4 GB                ``--global_segment_size``
``--host``                     0.0.0.0             ``--hostname`` (advertised); 0.0.0.0 means
                                                   every interface: ``--transfer_bind_address
                                                   0.0.0.0``, advertising this host's name
``--device_names``, ``--protocol``                 the same flags of the daemon
``--enable_offload``           false               true: an SSD tier, ``--ssd_path``
                                                   ``$MOONCAKE_OFFLOAD_FILE_STORAGE_PATH``
                                                   (Mooncake's default /data/file_storage,
                                                   which must exist) of ``--ssd_capacity``
                                                   ``$MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES``
                                                   (default 2 TB), unless those are given
``--enable_http_server``,      false, 9300         enabled: the daemon's admin HTTP port
``--http_port``                                    (``--metrics_port``: /metrics, /health) on
                                                   http_port; disabled: none
                                                   (``--metrics_port=-1``), unless
                                                   ``--metrics_port`` is given
``--local_buffer_size``, ``--threads``,            passed on: the daemon accepts them and
``--tenant_id``, ``--metadata_server``,            warns they do not apply (no local buffer,
``--start_offload_rpc_server``                     its own worker threads, tenants per
                                                   connection, no metadata service, disk
                                                   reads served on the transfer port)
=============================  ==================  ==========================================

The daemon's socket is ``$MOONCAKE_SOCKET`` when set (so that applications started with the
same environment find it), else the daemon's default, /run/mooncake/mooncaked.sock. Every
other flag is the daemon's own (``mooncaked --help``) and passed on as given.
"""
import os
import sys

from mooncake._programs import find_program

# Mooncake's real client's defaults where they differ from the daemon's. Given first, so
# that the same flag on the command line, later, wins.
_DEFAULTS = ("--port=50052", "--master=127.0.0.1:50051", "--global_segment_size=4GB")
_HTTP_PORT_DEFAULT = "9300"
_OFFLOAD_PATH_DEFAULT = "/data/file_storage"
_OFFLOAD_CAPACITY_DEFAULT = str(2 << 40)  # Mooncake's total_size_limit: 2 TB
_TRUE = {"", "1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}


def _split(arg):
    """(name, value or None) of a flag written -name, --name or --name=value; None when arg
    is not a flag."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    name, sep, value = arg.lstrip("-").partition("=")
    return name, (value if sep else None)


def translate(argv, environ=os.environ):
    """mooncaked's argument list for mooncake_client's argv (see the module's docstring).
    ValueError for a boolean flag whose value is not one."""
    out = list(_DEFAULTS)
    http_enabled, http_port, offload = False, _HTTP_PORT_DEFAULT, False
    given = set()  # daemon flags named on the command line
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        split = _split(arg)
        if split is None:
            out.append(arg)
            i += 1
            continue
        name, value = split

        def take_value():
            nonlocal i
            if value is not None:
                return value
            if i + 1 < len(args):
                i += 1
                return args[i]
            raise ValueError(f"mooncake_client: --{name} needs a value")

        def boolean():
            if name.startswith("no"):
                return False
            if value is None:
                return True
            if value.lower() in _TRUE:
                return True
            if value.lower() in _FALSE:
                return False
            raise ValueError(f"mooncake_client: --{name}={value} is not a boolean")

        if name in ("enable_http_server", "noenable_http_server"):
            http_enabled = boolean()
        elif name == "http_port":
            http_port = take_value()
        elif name in ("enable_offload", "noenable_offload"):
            offload = boolean()
        elif name == "master_server_address":
            out.append("--master=" + take_value())
        elif name == "host":
            host = take_value()
            bare = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            if bare in ("", "0.0.0.0"):
                out.append("--transfer_bind_address=0.0.0.0")
            else:
                out.append("--hostname=" + bare)
        else:
            given.add(name)
            out.append(arg)
        i += 1

    if not given & {"metrics_port"}:
        out.append("--metrics_port=" + (http_port if http_enabled else "-1"))
    if offload:
        if "ssd_path" not in given:
            out.append("--ssd_path=" + environ.get("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH",
                                                   _OFFLOAD_PATH_DEFAULT))
        if "ssd_capacity" not in given:
            out.append("--ssd_capacity=" + environ.get("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES",
                                                       _OFFLOAD_CAPACITY_DEFAULT))
    if "socket" not in given and environ.get("MOONCAKE_SOCKET"):
        out.append("--socket=" + environ["MOONCAKE_SOCKET"])
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "-help", "--help") for arg in argv):
        print(__doc__)
        print("The daemon's own flags: mooncaked --help")
        return 0
    try:
        args = translate(argv)
        path = find_program("mooncaked")
    except (ValueError, FileNotFoundError) as error:
        print(f"mooncake_client: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 127
    os.execv(path, [path, *args])


if __name__ == "__main__":
    sys.exit(main())
