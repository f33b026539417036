"""``mooncake_master``: Mooncake's command for the master, which runs this store's
``mooncake-master`` with the arguments as given (it reads Mooncake's flags: ``--port``,
``--max_threads``, ``--metrics_port``, ``--default_kv_lease_ttl``, ...; docs/operations.md,
"Compatibility with Mooncake").

The master replaces this process (exec), so the command's pid is the master's and a signal
sent to it reaches the master, as Mooncake's command guarantees.
"""
import os
import sys

from mooncake._programs import find_program


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        path = find_program("mooncake-master")
    except FileNotFoundError as error:
        print(f"mooncake_master: {error}", file=sys.stderr)
        return 127
    os.execv(path, [path, *argv])


if __name__ == "__main__":
    sys.exit(main())
