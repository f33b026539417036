"""Builds the mooncake_store extension, and installs it with the `mooncake` package (whose
`mooncake.store` re-exports it under Mooncake's name, beside Mooncake's other modules and
the extension mooncake._fast_copy), for `pip install ./bindings/python`. The commands
mooncake_master, mooncake_client and mc_store_rest_server are pyproject.toml's scripts.

The module wraps libmooncake_store (include/mooncake_store.h), which must exist first. It is
found, in this order:

1. MOONCAKE_STORE_BUILD_DIR=<cmake build dir>: that tree's libmc/libmooncake_store.so, and
   the header from the source tree it was configured from (CMakeCache.txt names it);
2. pkg-config mooncake_store: an installed library (`make install`, or `cmake --install
   build --prefix P` with PKG_CONFIG_PATH=P/lib/pkgconfig).

The library directory is also written into the module's RPATH, so importing it needs no
LD_LIBRARY_PATH.
"""
import hashlib
import os
import pathlib
import re
import shlex
import subprocess
import tempfile

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent


def from_build_dir(build_dir):
    build = pathlib.Path(build_dir).resolve()
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        raise SystemExit(f"MOONCAKE_STORE_BUILD_DIR={build_dir}: no CMakeCache.txt there")
    match = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(), re.M)
    source = pathlib.Path(match.group(1)) if match else HERE.parent.parent
    libdir = build / "libmc"
    if not (libdir / "libmooncake_store.so").exists():
        raise SystemExit(f"{libdir}/libmooncake_store.so is missing: build the "
                         "mooncake_store target first")
    return [str(source / "include")], [str(libdir)], ["mooncake_store"]


def bin_dirs_of_build_dir(build_dir):
    build = pathlib.Path(build_dir).resolve()
    return [str(build / "master"), str(build / "daemon")]


def bin_dirs_of_pkg_config():
    try:
        prefix = subprocess.check_output(
            ["pkg-config", "--variable=prefix", "mooncake_store"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [os.path.normpath(os.path.join(prefix, "bin"))] if prefix else []


def from_pkg_config():
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "mooncake_store"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs", "mooncake_store"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(
            "libmooncake_store not found: run `make install` (then pkg-config finds it; set "
            "PKG_CONFIG_PATH for a custom prefix), or set MOONCAKE_STORE_BUILD_DIR to a CMake "
            "build directory")
    # The installed .pc file is relocatable (prefix=${pcfiledir}/../..): normalise the paths.
    include_dirs = [os.path.normpath(f[2:]) for f in shlex.split(cflags) if f.startswith("-I")]
    library_dirs = [os.path.normpath(f[2:]) for f in shlex.split(libs) if f.startswith("-L")]
    libraries = [f[2:] for f in shlex.split(libs) if f.startswith("-l")]
    return include_dirs, library_dirs, libraries


if os.environ.get("MOONCAKE_STORE_BUILD_DIR"):
    include_dirs, library_dirs, libraries = from_build_dir(os.environ["MOONCAKE_STORE_BUILD_DIR"])
    bin_dirs = bin_dirs_of_build_dir(os.environ["MOONCAKE_STORE_BUILD_DIR"])
else:
    include_dirs, library_dirs, libraries = from_pkg_config()
    bin_dirs = bin_dirs_of_pkg_config()

# The module is src/ alone, over the C ABI: even setup()'s size strings ("16MB") are read by
# the library (mooncake_store_parse_size), so nothing of the project's common/ is needed.
extension = Pybind11Extension(
    "mooncake_store",
    # Every .cc of src/, so that a file added there is built by pip as by CMake.
    sources=sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.cc")),
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    libraries=libraries,
    runtime_library_dirs=library_dirs,
    cxx_std=17,
)

# mooncake._fast_copy: a module of its own (src/fast_copy), as CMake builds it.
fast_copy = Pybind11Extension("mooncake._fast_copy", sources=["src/fast_copy/fast_copy.cc"],
                              cxx_std=17)


class BuildPyWithPaths(build_py):
    """build_py, plus mooncake/_install_paths.py naming where the library's programs are
    (mooncake_master and mooncake_client start them)."""

    def run(self):
        super().run()
        template = (HERE / "mooncake" / "_install_paths.py.in").read_text()
        listed = ", ".join(repr(d) for d in bin_dirs)
        target = pathlib.Path(self.build_lib) / "mooncake" / "_install_paths.py"
        target.write_text(template.replace("@MC_PYTHON_BIN_DIRS@", listed))


# The module's files compiled side by side (setuptools compiles one at a time otherwise);
# MOONCAKE_BUILD_JOBS=N bounds it, all cores by default.
ParallelCompile("MOONCAKE_BUILD_JOBS", default=0).install()

# setuptools would put its intermediate files (build/, *.egg-info) inside the source tree.
# The directory is named after the library linked, because setuptools does not relink an
# up-to-date module when only the library's location (and so the RPATH) changed.
_where = hashlib.sha1(repr((include_dirs, library_dirs)).encode()).hexdigest()[:12]
BUILD_BASE = os.path.join(tempfile.gettempdir(), f"mooncake-store-py-build-{os.getuid()}-{_where}")
os.makedirs(BUILD_BASE, exist_ok=True)

setup(
    ext_modules=[extension, fast_copy],
    cmdclass={"build_ext": build_ext, "build_py": BuildPyWithPaths},
    # The extension module and the `mooncake` package, named here rather than discovered
    # (src/ holds C++ sources, not a src-layout package; tests/ is not installed).
    packages=["mooncake", "mooncake._structured"],
    py_modules=[],
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
