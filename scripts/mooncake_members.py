#!/usr/bin/env python3
"""Checks that mooncake.store has every member Mooncake's pybind module declares.

    PYTHONPATH=build/bindings/python python3 scripts/mooncake_members.py STORE_PY_CPP

STORE_PY_CPP is Mooncake's mooncake-integration/store/store_py.cpp (scripts/
mooncake_conformance.py copies it from the pinned commit and runs this). Every class and
enum (py::class_, py::enum_), each of their members (.def, .def_static, .def_readonly,
.def_readwrite, .def_property*, enum .value) and each module function or attribute (m.def,
m.attr) is looked up with hasattr. Prints the count and each missing name; exits 1 when
any is missing. It checks presence, not behaviour: Mooncake's tests check that.
"""
import re
import sys

# A class or enum opens a scope that its members (.def..., .value) fall into; m.def and
# m.attr are the module's own.
TOKEN = re.compile(
    r'py::(?:class_|enum_)<[^"]*?"(\w+)"'
    r'|m\.def\(\s*"(\w+)"'
    r'|m\.attr\(\s*"(\w+)"\)'
    r'|\.(?:def|def_static|def_readonly|def_readwrite|def_property|def_property_readonly)'
    r'\(\s*"(\w+)"'
    r'|\.value\(\s*"(\w+)"')


def declared(source: str):
    """(class or None, member or None) for every declaration, in order."""
    scope = None
    for m in TOKEN.finditer(source):
        cls, module_def, module_attr, member, value = m.groups()
        if cls:
            scope = cls
            yield cls, None
        elif module_def or module_attr:
            yield None, module_def or module_attr
        else:
            yield scope, member or value


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    import mooncake.store as store
    names = list(declared(open(sys.argv[1], encoding="utf-8").read()))
    missing = []
    for cls, member in names:
        if cls is None:
            ok, label = hasattr(store, member), member
        elif member is None:
            ok, label = hasattr(store, cls), cls
        else:
            ok = hasattr(store, cls) and hasattr(getattr(store, cls), member)
            label = f"{cls}.{member}"
        if not ok:
            missing.append(label)
    print(f"members: {len(names) - len(missing)} of {len(names)} declared in store_py.cpp "
          f"present in mooncake.store" + ("" if not missing else "; missing: " +
                                           ", ".join(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
