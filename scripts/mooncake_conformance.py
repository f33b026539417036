#!/usr/bin/python3
"""Runs upstream Mooncake's own Python store tests, unchanged, against this store.

    scripts/mooncake_conformance.py --mooncake-src DIR [--build build] [--out DIR] [-k TEXT]
    make mooncake-conformance MOONCAKE_SRC=DIR

DIR is a checkout of kvcache-ai/Mooncake (a git clone: the files are taken from commit
3b5a594, the commit this store's client API follows, whatever is checked out; any other
directory: its files as they are, with a warning). Only the test files are copied, into
OUT/src, never Mooncake's own `mooncake` package: its tests' conftest falls back to that
package when a module is missing here, which would test Mooncake against itself.

Each file runs in a cluster of its own (scripts/with-cluster.sh: a master and daemons on
127.0.0.1, the flags the table below names), with the environment Mooncake's CI gives
it (MASTER_SERVER, LOCAL_HOSTNAME, MC_METADATA_SERVER, PROTOCOL, DEFAULT_KV_LEASE_TTL)
and PYTHONPATH naming this build's module. pytest files report per test (JUnit XML);
the files Mooncake's CI runs as scripts count as one test each, passed when they exit 0.
Files that need hardware this machine lacks are listed with the reason and not run.

Prints one line per file as it finishes, then the totals; writes OUT/results.csv (one
row per file) and OUT/logs/<file>.log. Exits 0 when every file that ran passed.
The per-file table, its flags and every skip's reason: docs/mooncake-api.md,
"Mooncake's own tests".
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tarfile
import io
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

MOONCAKE_COMMIT = "3b5a594"
PYTHON = "/usr/bin/python3"
# The master's read lease as Mooncake's CI sets it (its tests sleep past it).
LEASE_MS = "500"


@dataclass
class Entry:
    path: str                      # relative to Mooncake's checkout
    kind: str = "pytest"           # "pytest", or "script" (run as Mooncake's CI runs it)
    args: list = field(default_factory=list)       # a script's arguments
    cluster: list = field(default_factory=list)    # with-cluster.sh arguments
    env: dict = field(default_factory=dict)        # set for the test; None unsets
    skip: str = ""                 # why this file is not run here
    check: str = ""                # a script passes only if its output matches this regex
    instances: list = field(default_factory=list)  # a script's argument lists, run at once


# Mooncake's dummy-client tests dial the real client (here: the daemon) at its default port.
REAL_CLIENT = ["--daemon-flag", "--port=50052"]
# Mooncake's SSD tests run with only the clients' memory (their 512 MiB segments overflow
# into the tier) and the master offloading what it evicts, as their CI starts the master.
SSD = ["--segment", "0", "--daemon-flag", "--ssd_path={dir}/ssd-{i}",
       "--daemon-flag", "--ssd_capacity=2GB", "--master-flag", "--offload_on_evict=true"]
# The clients' memory is the only memory, as in Mooncake's CI: a daemon's own segment would
# take the puts, and a clear or a drain by a client's name would find nothing there.
CLIENTS_ONLY = ["--segment", "0"]

# The store's test files of Mooncake's wheel, scripts and e2e folders. Transfer-engine,
# expert-parallel and packaging tests are not the store's client and are not listed.
TABLE = [
    # LOCAL_HOSTNAME unset, as Mooncake's run_tests.sh runs it: test_basic_get_hostname
    # expects "localhost:<port>".
    Entry("mooncake-wheel/tests/test_distributed_object_store.py", cluster=CLIENTS_ONLY,
          env={"LOCAL_HOSTNAME": None}),
    Entry("mooncake-wheel/tests/test_replicated_distributed_object_store.py",
          cluster=["--daemons", "2"]),
    Entry("mooncake-wheel/tests/test_batch_replica_clear.py",
          cluster=["--daemons", "2"] + CLIENTS_ONLY),
    Entry("mooncake-wheel/tests/test_buffer_pool_native.py"),
    Entry("mooncake-wheel/tests/test_import_structure.py"),
    Entry("mooncake-wheel/tests/test_mooncake_config.py"),
    Entry("mooncake-wheel/tests/test_structured_object_store.py"),
    Entry("mooncake-wheel/tests/test_mooncake_store_service_api.py"),
    Entry("mooncake-wheel/tests/test_dataproto_catalog.py"),
    Entry("mooncake-wheel/tests/test_fast_copy.py"),
    Entry("mooncake-wheel/tests/test_cli.py"),
    Entry("mooncake-wheel/tests/test_dummy_client.py", cluster=REAL_CLIENT),
    # Two clients that wait for each other's keys, as Mooncake's run_tests.sh starts them.
    Entry("mooncake-wheel/tests/test_multi_dummy_clients.py", kind="script",
          instances=[["--client-id", "client1"], ["--client-id", "client2"]],
          cluster=REAL_CLIENT),
    Entry("mooncake-wheel/tests/test_put_get_tensor.py"),
    Entry("mooncake-wheel/tests/test_safetensor_functions.py"),
    Entry("mooncake-wheel/tests/test_ssd_offload_in_evict.py", cluster=SSD),
    Entry("mooncake-wheel/tests/test_offload_on_eviction.py", cluster=SSD),
    Entry("mooncake-wheel/tests/test_promotion_on_hit.py",
          cluster=SSD + ["--master-flag", "--promotion_on_hit=true"]),
    Entry("mooncake-wheel/tests/test_distributed_object_store_cxl.py",
          skip="needs a CXL memory device (MC_CXL_DEV_PATH) and a master with --enable_cxl"),
    Entry("mooncake-wheel/tests/test_regmr_overhead.py",
          skip="measures RDMA memory registration through mooncake.mooncake_ep_buffer: "
               "needs RDMA NICs and CUDA"),
    Entry("scripts/test_tensor_api.py"),
    Entry("scripts/test_upsert_api.py"),
    Entry("scripts/test_copy_move_api.py", cluster=["--daemons", "2"] + CLIENTS_ONLY),
    Entry("scripts/test_engram_store.py"),
    Entry("scripts/test_hicache_hugepage_requirements.py"),
    Entry("scripts/test_async_store.py", kind="script"),
    # It calls the master's admin HTTP and cannot send the admin token: a cluster without a
    # key, whose admin port admits this user (docs/security.md, "The admin HTTP port").
    Entry("scripts/test_drain_http_api.py", kind="script", args=["--timeout-sec", "90"],
          cluster=["--daemons", "2", "--no-key"] + CLIENTS_ONLY),
    Entry("mooncake-store/tests/e2e/store_client_e2e.py", kind="script",
          args=["--master-server", "{master}", "--local-hostname", "127.0.0.1",
                "--duration-sec", "5", "--sleep-ms", "20", "--nof-replica-num", "0"],
          # A workload generator: it exits 0 whatever happened, and prints a summary.
          check=r"summary put_ok=[1-9][0-9]* put_fail=0 get_ok=[1-9][0-9]* get_fail=0 mismatch=0"),
    Entry("mooncake-store/tests/e2e/session_ranges_tcp_e2e.py", kind="script"),
]

STORE_PY = "mooncake-integration/store/store_py.cpp"
# Helper modules the test files import from their own folders.
# Also Mooncake's pybind module, whose declared members scripts/mooncake_members.py checks.
SUPPORT = ["mooncake-wheel/tests/conftest.py", "scripts/check_hicache_hugepage_requirements.py",
           STORE_PY]


def fetch_sources(src: Path, dest: Path) -> None:
    """Copies the listed files of Mooncake's checkout into dest (from its commit if a git clone)."""
    wanted = [e.path for e in TABLE] + SUPPORT
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git = subprocess.run(["git", "-C", str(src), "cat-file", "-e", MOONCAKE_COMMIT + "^{commit}"],
                         capture_output=True)
    if git.returncode == 0:
        tar = subprocess.run(["git", "-C", str(src), "archive", MOONCAKE_COMMIT, "--"] + wanted,
                             capture_output=True, check=True).stdout
        tarfile.open(fileobj=io.BytesIO(tar)).extractall(dest)
        return
    print(f"mooncake_conformance: {src} is not a git clone holding {MOONCAKE_COMMIT}: "
          "using its files as they are", file=sys.stderr)
    for rel in wanted:
        if (src / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)


def junit_counts(xml_path: Path):
    """(passed, failed, skipped) from pytest's JUnit XML; errors count as failures."""
    root = ET.parse(xml_path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = failed = skipped = 0
    for s in suites:
        total += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def run_entry(e: Entry, args, src: Path, out: Path):
    name = Path(e.path).stem
    log = out / "logs" / f"{name}.log"
    xml = out / "logs" / f"{name}.xml"
    test = src / e.path
    env = dict(os.environ)
    env.update({
        # The build's module, and the shim that names it `store` as Mooncake's build tree does,
        # in that tree's directory: scripts/test_engram_store.py finds it as
        # $MOONCAKE_BUILD_DIR/mooncake-integration.
        "PYTHONPATH": os.pathsep.join([str(args.build.resolve() / "bindings" / "python"),
                                       str(out / "mooncake-integration")]),
        "MOONCAKE_BUILD_DIR": str(out),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LOCAL_HOSTNAME": "127.0.0.1",
        "MC_METADATA_SERVER": "P2PHANDSHAKE",
        "MOONCAKE_TE_META_DATA_SERVER": "P2PHANDSHAKE",
        "PROTOCOL": "tcp",
        "MOONCAKE_PROTOCOL": "tcp",
        "DEVICE_NAME": "",
        "DEFAULT_KV_LEASE_TTL": LEASE_MS,
    })
    for k, v in e.env.items():  # None: unset
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    # MASTER_SERVER is the cluster's master, known only inside with-cluster.sh; so are the
    # "{master}" of a script's arguments and the admin URL test_drain_http_api.py calls
    # (Mooncake's default is port 9003; with-cluster.sh picks a free one).
    inner = ('export MASTER_SERVER=$MOONCAKE_MASTER; '
             'export MOONCAKE_MASTER_CONTROL_BASE=$MOONCAKE_MASTER_ADMIN_URL; '
             'exec "${@//\\{master\\}/$MOONCAKE_MASTER}"')
    if e.kind == "pytest":
        cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
               str(test)] + (["-k", args.k] if args.k else [])
    elif e.instances:  # every instance in the background; fails if any fails
        script = " ".join(
            f"{PYTHON} {test} {' '.join(a)} & p{i}=$!;" for i, a in enumerate(e.instances))
        waits = " && ".join(f"wait $p{i}" for i in range(len(e.instances)))
        cmd = ["bash", "-c", f"{script} {waits}"]
    else:
        cmd = [PYTHON, str(test)] + e.args
    full = ([str(Path(__file__).parent / "with-cluster.sh"), "--build", str(args.build.resolve()),
             "--master-port", str(args.master_port),
             "--master-flag", f"--default_kv_lease_ttl={LEASE_MS}"] + e.cluster +
            ["--", "bash", "-c", inner, "bash"] + cmd)
    with open(log, "w") as f:
        try:
            rc = subprocess.run(full, cwd=test.parent, env=env, stdout=f, stderr=subprocess.STDOUT,
                                timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\nmooncake_conformance: timed out after {args.timeout} s\n")
            rc = 124
    if e.kind == "pytest" and xml.exists():
        passed, failed, skipped = junit_counts(xml)
    else:
        ok = rc == 0 and (not e.check or re.search(e.check, log.read_text(errors="replace")))
        passed, failed, skipped = (1, 0, 0) if ok else (0, 1, 0)
    return rc, passed, failed, skipped


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mooncake-src", type=Path, required=True,
                   help="a checkout of kvcache-ai/Mooncake (a git clone holding 3b5a594)")
    p.add_argument("--build", type=Path, default=Path("build"), help="this store's build tree")
    p.add_argument("--out", type=Path, default=None,
                   help="where the copied tests, logs and results.csv go "
                        "(default BUILD/mooncake-conformance)")
    p.add_argument("--only", default="", help="run only the files whose path contains this")
    p.add_argument("-k", default="", help="passed to pytest's -k")
    p.add_argument("--master-port", type=int, default=50051,
                   help="the master's port: Mooncake's default, which some of its tests dial "
                        "without asking the environment")
    p.add_argument("--timeout", type=int, default=900, help="seconds per file")
    args = p.parse_args()
    out = args.out or args.build / "mooncake-conformance"
    out = out.resolve()
    src = out / "src"
    fetch_sources(args.mooncake_src.resolve(), src)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    # Mooncake's e2e scripts `import store`: its build tree's name for the module that its
    # wheel installs as mooncake.store.
    (out / "mooncake-integration").mkdir(exist_ok=True)
    (out / "mooncake-integration" / "store.py").write_text(
        "# mooncake.store under the name Mooncake's build tree gives it (written by "
        "scripts/mooncake_conformance.py)\nfrom mooncake.store import *  # noqa: F401,F403\n")

    rows, totals, all_ok = [], [0, 0, 0], True
    entries = [e for e in TABLE if args.only in e.path]
    for i, e in enumerate(entries, 1):
        if e.skip:
            print(f"[{i}/{len(entries)}] {e.path}: not run: {e.skip}", flush=True)
            rows.append([e.path, "not run", 0, 0, 0, e.skip])
            continue
        if not (src / e.path).exists():
            print(f"[{i}/{len(entries)}] {e.path}: missing from the checkout", flush=True)
            rows.append([e.path, "missing", 0, 0, 0, ""])
            all_ok = False
            continue
        rc, passed, failed, skipped = run_entry(e, args, src, out)
        status = "pass" if rc == 0 and failed == 0 and passed + skipped > 0 else "fail"
        all_ok &= status == "pass"
        for j, n in enumerate((passed, failed, skipped)):
            totals[j] += n
        print(f"[{i}/{len(entries)}] {e.path}: {status}: {passed} passed, {failed} failed, "
              f"{skipped} skipped (exit {rc})", flush=True)
        rows.append([e.path, status, passed, failed, skipped, ""])
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "status", "passed", "failed", "skipped", "not run because"])
        w.writerows(rows)
    print(f"total: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped; "
          f"{out / 'results.csv'}, logs in {out / 'logs'}")
    # Every member Mooncake's module declares, present here (what the tests do not call too).
    members = subprocess.run(
        [PYTHON, str(Path(__file__).parent / "mooncake_members.py"), str(src / STORE_PY)],
        env=dict(os.environ, PYTHONPATH=str(args.build.resolve() / "bindings" / "python")),
        capture_output=True, text=True)
    print((members.stdout + members.stderr).strip())
    return 0 if all_ok and members.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
