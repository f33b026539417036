#!/usr/bin/env python3
"""Checks that code includes only what lies below it (docs/architecture.md, "Layers").

Each folder of the core may include headers of the folders its layer names, and of those
folders' own layers, transitively; never one above it or beside it. The CMake libraries
(one per folder) enforce the same at link time for what is compiled; this catches what a
header alone could smuggle in (an inline function, a template, a type).

Usage: check_layering.py [REPO_ROOT]     exit 1 with one line per wrong include.
"""
import os
import re
import sys

# folder -> the folders it may include directly (what its CMake library links).
LAYERS = {
    'common/base': [],
    'common/uds': ['common/base'],
    'common/auth': ['common/base'],
    'common/admin': ['common/auth'],
    'common/etcd': ['common/base'],
    'common/master_link': ['common/auth', 'common/etcd'],

    'daemon/base': ['common/base', 'common/uds'],
    'daemon/memory': ['daemon/base'],
    'daemon/ssd_store': ['common/base'],
    'daemon/master_link': ['daemon/base', 'common/master_link'],
    'daemon/transfer': ['daemon/memory', 'daemon/ssd_store', 'daemon/master_link', 'common/auth'],
    'daemon/cluster': ['daemon/transfer'],
    'daemon/replicas': ['daemon/cluster'],
    'daemon/ssd_tier': ['daemon/replicas'],
    'daemon/service': ['daemon/ssd_tier'],
    'daemon/server': ['daemon/service', 'common/admin'],

    'master/directory': ['common/base', 'common/master_link'],
    'master/log': ['master/directory', 'common/uds'],
    'master/eviction': ['master/directory'],
    'master/ssd_tier': ['master/eviction'],
    'master/liveness': ['master/ssd_tier', 'master/log'],
    'master/drains': ['master/directory'],
    'master/service': ['master/liveness', 'master/drains'],
    'master/snapshot': ['master/service'],
    'master/ha': ['master/snapshot', 'common/etcd'],
    'master/server': ['master/ha', 'common/admin'],

    'libmc': ['common/base', 'common/uds'],
    'cli': ['libmc', 'common/master_link'],
}
# Headers every layer may use: the public C ABI and the Thrift stubs generated into the build.
ANYWHERE = ('include/', 'MasterService.h', 'master_types.h')
# The folders of the repository whose headers belong to some layer.
TOPS = {folder.split('/')[0] for folder in LAYERS}


def closure(folder, seen=None):
    seen = set() if seen is None else seen
    for below in LAYERS.get(folder, []):
        if below not in seen:
            seen.add(below)
            closure(below, seen)
    return seen


def layer_of(path):
    best = None
    for folder in LAYERS:
        if path.startswith(folder + '/') and (best is None or len(folder) > len(best)):
            best = folder
    return best


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    wrong = []
    checked = 0
    for folder in LAYERS:
        allowed = closure(folder) | {folder}
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not name.endswith(('.h', '.cc', '.c')):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if layer_of(path) != folder:
                    continue  # a sub-folder with a layer of its own
                checked += 1
                with open(os.path.join(root, path), errors='replace') as f:
                    for number, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m or m.group(1).startswith(ANYWHERE):
                            continue
                        target = layer_of(m.group(1))
                        if target is None:
                            if m.group(1).split('/')[0] in TOPS:
                                wrong.append(f'{path}:{number}: includes "{m.group(1)}", '
                                             'which is in no layer of the core')
                            continue  # a system or library header
                        if target not in allowed:
                            wrong.append(f'{path}:{number}: {folder} includes "{m.group(1)}" '
                                         f'of {target}, which is not below it')
    for line in wrong:
        print(line)
    print(f'layering: {checked} files checked, {len(wrong)} include(s) against the layers')
    return 1 if wrong else 0


if __name__ == '__main__':
    sys.exit(main())
