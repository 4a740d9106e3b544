#!/usr/bin/env python3
"""tests/run_tests.py — the one test registry. Imports every tests/test_*.py,
runs each function named test_* in file order with a per-test time limit, and
prints PASS / FAIL / SKIP per test and the closing line CI reads:
'N passed, N failed, N skipped'. Usage: run_tests.py [substring ...] to run
only tests whose module:name contains one of the substrings.

Skips: a test that raises harness.Skip (a tool or a built file is missing)
FAILS — a missing tool is an install step (scripts/deps.sh, scripts/pydeps.sh),
never a reason for a green run with fewer tests. The only skip is
harness.SanitizerSkip (make test-asan: a test that measures something the
sanitizer runtime changes by design), and those are listed by name.

Temporary files: every test gets its own directory under one per-run root
(tempfile.tempdir and TMPDIR point there, so targets' temporaries land there
too); the root is removed at the end. SP_KEEP_FAILED=1 keeps the directories
of failing tests (printed) and removes the rest."""
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from harness import SanitizerSkip, Skip  # noqa: E402

TIME_LIMIT_S = int(os.environ.get("SP_TEST_TIMEOUT", "180"))


class TimeLimit(Exception):
    pass


def on_alarm(signum, frame):
    raise TimeLimit(f"test exceeded {TIME_LIMIT_S}s")


def collect(filters):
    tests = []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fname[:-3], os.path.join(HERE, fname))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fns = [(n, f) for n, f in vars(mod).items() if n.startswith("test_") and callable(f)]
        fns.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
        for n, f in fns:
            full = f"{fname[:-3]}:{n}"
            if not filters or any(s in full for s in filters):
                tests.append((full, f))
    return tests


def use_tmp(path):
    """Point this process's and its children's temporaries at path."""
    tempfile.tempdir = path
    os.environ["TMPDIR"] = path


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    # Started in the background by a shell without job control (`cmd &` in a script), this process
    # inherits SIGINT and SIGQUIT ignored, and so would every program the tests start: the tests that
    # end one by SIGINT or SIGQUIT would see it ignored and wait for ever. The targets get the defaults.
    for s in (signal.SIGINT, signal.SIGQUIT):
        if signal.getsignal(s) == signal.SIG_IGN:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    passed, failed, skipped, kept = [], [], [], []
    keep_failed = os.environ.get("SP_KEEP_FAILED", "") not in ("", "0")
    old_tmp = os.environ.get("TMPDIR")
    root = tempfile.mkdtemp(prefix="sp-run-")
    t_all = time.time()
    try:
        for i, (full, fn) in enumerate(collect(sys.argv[1:])):
            # Short: a Unix socket made under it (chromium's) must stay below 108 bytes.
            tdir = os.path.join(root, f"{i:03d}")
            os.mkdir(tdir)
            use_tmp(tdir)
            t0 = time.time()
            signal.alarm(TIME_LIMIT_S)
            ok = False
            try:
                fn()
                ok = True
                passed.append(full)
                print(f"PASS {full} ({time.time() - t0:.2f}s)", flush=True)
            except SanitizerSkip as s:
                ok = True
                skipped.append(full)
                print(f"SKIP {full}: {s}", flush=True)
            except Skip as s:
                failed.append(full)
                print(f"FAIL {full}: skipped for a missing prerequisite, which is an install step "
                      f"(scripts/deps.sh, scripts/pydeps.sh): {s}", flush=True)
            except BaseException as ex:  # noqa: BLE001 — a test failure of any kind is reported, not fatal
                failed.append(full)
                print(f"FAIL {full} ({time.time() - t0:.2f}s): {type(ex).__name__}: {ex}", flush=True)
                traceback.print_exc(limit=3, file=sys.stdout)
            finally:
                signal.alarm(0)
            if ok or not keep_failed:
                shutil.rmtree(tdir, ignore_errors=True)
            else:
                kept.append(f"{full} -> {tdir}")
    finally:
        tempfile.tempdir = None
        if old_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_tmp
        if kept:
            print("kept the temporary directories of failing tests (SP_KEEP_FAILED):\n  " + "\n  ".join(kept))
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{len(failed)} failed tests: {', '.join(failed)}" if failed else "")
    if skipped:
        print(f"skipped: {', '.join(skipped)}")
    print(f"ran in {time.time() - t_all:.1f}s")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
