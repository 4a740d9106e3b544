"""tests/test_reliability_bounds.py — issue 14 items 2, 3, 5, 6, 9: the test
runner fails a test skipped for a missing tool and leaves no temporaries;
config files are read only when regular, small and shallow; summary.json
stays JSON whatever bytes a name holds; NVTX ranges opened before the first
CUDA call are recorded; every byte kept (CUPTI's records included) is bounded
by the settings, with exact drop counts."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import ROOT, run


# ---- item 9: the runner ----------------------------------------------------------------------

_FAKE_TESTS = '''
import os, tempfile
from harness import Skip, skip_under_sanitizer
def test_a_passes():
    d = tempfile.mkdtemp(prefix="sp-test-")
    open(os.path.join(d, "f"), "w").write("x")
def test_b_missing_tool():
    raise Skip("nvcc is not installed")
def test_c_sanitizer():
    skip_under_sanitizer("measures RSS")
def test_d_fails():
    tempfile.mkdtemp(prefix="sp-test-")
    assert False, "boom"
'''


def _runner(tmp, env, *filters):
    """Run a copy of tests/run_tests.py (and harness.py) over a test file of our own."""
    t = os.path.join(tmp, "tests")
    os.makedirs(os.path.join(t, "lib"))
    shutil.copy(os.path.join(ROOT, "tests", "run_tests.py"), t)
    shutil.copy(os.path.join(ROOT, "tests", "lib", "harness.py"), os.path.join(t, "lib"))
    with open(os.path.join(t, "test_fake.py"), "w") as f:
        f.write(_FAKE_TESTS)
    scratch = os.path.join(tmp, "scratch")
    os.makedirs(scratch)
    e = dict(os.environ, TMPDIR=scratch, **env)
    e.pop("SP_PRELOAD_FIRST", None) if "SP_PRELOAD_FIRST" not in env else None
    p = subprocess.run([sys.executable, os.path.join(t, "run_tests.py")] + list(filters),
                       env=e, capture_output=True, text=True, timeout=60)
    return p, scratch


def test_runner_fails_a_test_skipped_for_a_missing_tool():
    tmp = tempfile.mkdtemp(prefix="sp-runner-")
    p, scratch = _runner(tmp, {}, "test_a", "test_b")
    assert p.returncode != 0, p.stdout
    assert "FAIL test_fake:test_b_missing_tool" in p.stdout and "install step" in p.stdout, p.stdout
    assert "1 passed, 1 failed, 0 skipped" in p.stdout, p.stdout
    assert os.listdir(scratch) == [], ("temporaries left behind", os.listdir(scratch))


def test_runner_skips_only_the_sanitizer_tests_by_name():
    tmp = tempfile.mkdtemp(prefix="sp-runner-")
    p, scratch = _runner(tmp, {"SP_PRELOAD_FIRST": "/nonexistent/libasan.so"}, "test_a", "test_c")
    assert p.returncode == 0, p.stdout
    assert "SKIP test_fake:test_c_sanitizer" in p.stdout and "skipped: test_fake:test_c_sanitizer" in p.stdout
    assert "1 passed, 0 failed, 1 skipped" in p.stdout, p.stdout
    p, _ = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {}, "test_c")
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout   # no sanitizer: the test runs
    assert os.listdir(scratch) == [], os.listdir(scratch)


def test_runner_keeps_failing_tests_temporaries_only_when_asked():
    p, scratch = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {}, "test_a", "test_d")
    assert p.returncode != 0 and os.listdir(scratch) == [], (p.stdout, os.listdir(scratch))
    p, scratch = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {"SP_KEEP_FAILED": "1"}, "test_a", "test_d")
    assert p.returncode != 0
    (root,) = os.listdir(scratch)
    kept = os.listdir(os.path.join(scratch, root))
    assert len(kept) == 1 and kept[0].endswith("test_fake-test_d_fails"), kept
    assert "kept the temporary directories of failing tests" in p.stdout, p.stdout
