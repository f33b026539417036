"""Where the store's programs (``mooncake-master``, ``mooncaked``) are, for the package's
commands (``mooncake_master``, ``mooncake_client``), which start them.

Looked for, in order:

1. ``$MOONCAKE_BIN_DIR``, when set: a directory holding them;
2. the directories the build wrote into ``mooncake/_install_paths.py`` (``BIN_DIRS``): the
   build tree's ``master/`` and ``daemon/`` for the package copied there, the prefix's
   ``bin/`` for ``make install`` (relative to the package, so any ``--prefix`` works), the
   library's build tree or prefix for ``pip install``;
3. ``$PATH``.

Mooncake's wheel carries its binaries inside the package; this store's are installed once
per host (``make install``, a Debian package), so the package only finds them.
"""
import os
import shutil

try:
    from mooncake._install_paths import BIN_DIRS
except ImportError:  # a source tree: nothing recorded
    BIN_DIRS = []


def _candidate_dirs():
    if os.environ.get("MOONCAKE_BIN_DIR"):
        yield os.environ["MOONCAKE_BIN_DIR"]
    here = os.path.dirname(os.path.abspath(__file__))
    for d in BIN_DIRS:
        yield d if os.path.isabs(d) else os.path.normpath(os.path.join(here, d))


def find_program(name):
    """The path of program name; FileNotFoundError saying where it was looked for."""
    looked = []
    for d in _candidate_dirs():
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        looked.append(d)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"{name} not found (looked in {', '.join(looked + ['$PATH']) or '$PATH'}): install "
        f"the store (make install), or set MOONCAKE_BIN_DIR to the directory holding {name}")
