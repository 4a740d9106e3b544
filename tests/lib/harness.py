"""tests/lib/harness.py — what every stepprof test needs: the build paths, a
runner that starts a target program as a real process (optionally preloaded,
optionally on the CUDA stand-in) in a fresh temporary directory, and the traces
it wrote. Tests raise Skip when a prerequisite (nvcc, a toolkit file) is
missing: the runner counts that as a failure (a missing tool is an install
step, scripts/deps.sh); only SanitizerSkip, a test that measures something a
sanitizer runtime changes by design, is a real skip. Temporary directories go
under the runner's per-test root (tempfile.tempdir), removed after the run."""
import glob
import json
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SP_BUILD") or os.path.join(ROOT, "build")
LIB = os.path.join(BUILD, "libstepprof.so")
FAKE_DIR = os.path.join(BUILD, "fakecuda")
PROGS = os.path.join(BUILD, "programs")
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")


TRACE_RE = re.compile(r"^(.*)\.(\d+)\.pt\.trace\.json(\.gz)?$")


class Skip(Exception):
    """Raised by a test whose prerequisite is missing: run_tests.py fails it."""


class SanitizerSkip(Skip):
    """The one principled skip: the test measures something a preloaded
    sanitizer runtime changes by design (make test-asan)."""


def skip_under_sanitizer(why):
    """Tests that measure something a sanitizer runtime changes by design."""
    if os.environ.get("SP_PRELOAD_FIRST"):
        raise SanitizerSkip(f"under a preloaded sanitizer runtime: {why}")


def prog(name):
    path = os.path.join(PROGS, name)
    if not os.path.exists(path):
        raise Skip(f"{name} was not built (needs nvcc at {CUDA_HOME}/bin/nvcc?)")
    return path


class Run:
    """The outcome of one target run: returncode, stdout, stderr (text),
    the stepprof: lines, the non-stepprof stderr, and the trace files."""

    def __init__(self, proc, outdir, cwd):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.outdir = outdir
        self.cwd = cwd
        lines = proc.stderr.splitlines(keepends=True)
        self.sp_lines = [l.rstrip("\n") for l in lines if l.startswith("stepprof:")]
        self.other_stderr = "".join(l for l in lines if not l.startswith("stepprof:"))

    def traces(self):
        found = [p for p in glob.glob(os.path.join(self.outdir, "*.pt.trace.json*"))
                 if TRACE_RE.match(os.path.basename(p))]
        return sorted(found, key=lambda p: int(TRACE_RE.match(os.path.basename(p)).group(2)))

    def trace(self):
        t = self.traces()
        if len(t) != 1:
            raise AssertionError(f"expected exactly one trace in {self.outdir}, found {t}; stderr:\n{self.stderr}")
        return t[0]

    def files(self):
        return sorted(os.listdir(self.outdir)) if os.path.isdir(self.outdir) else []


def run(argv, preload=True, fake=True, env=None, timeout=120, cwd=None, stdin=None):
    """Run argv as a real process. env entries override the environment;
    a None value removes the variable. PROF_OUTPUT_DIR defaults to a fresh
    temporary directory (Run.outdir)."""
    cwd = cwd or tempfile.mkdtemp(prefix="sp-test-")
    e = {k: v for k, v in os.environ.items() if not k.startswith("PROF_")}
    for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH"):
        e.pop(k, None)
    e["PROF_OUTPUT_DIR"] = os.path.join(cwd, "traces")
    # SP_PRELOAD_FIRST: a sanitizer runtime that must precede the library (make test-asan).
    first = os.environ.get("SP_PRELOAD_FIRST", "")
    if preload:
        e["LD_PRELOAD"] = (first + " " + LIB).strip()
    elif first:
        e["LD_PRELOAD"] = first
    if fake:
        e["LD_LIBRARY_PATH"] = FAKE_DIR
        e.setdefault("FAKECUDA_KERNEL_NS", "2000")
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    proc = subprocess.run(argv, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout,
                          stdin=stdin if stdin is not None else subprocess.DEVNULL, errors="replace")
    return Run(proc, e.get("PROF_OUTPUT_DIR"), cwd)


def load(path):
    from check_trace import load as _load
    return _load(path)


def runtime_events(trace, name=None, all_sources=False):
    """cuda_runtime X events in trace order: by default the calls stepprof
    intercepted; CUPTI's records of calls nobody intercepted (marked
    "stepprof_source": "cupti") only with all_sources."""
    ev = [e for e in trace["traceEvents"] if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"]
    if not all_sources:
        ev = [e for e in ev if e["args"].get("stepprof_source") != "cupti"]
    if name:
        ev = [e for e in ev if api_name(e) == name]
    return ev


def call_result(e):
    """A call's return code: args.result, written only when the call failed
    (docs/formats.md), so absent means 0, and an explicit 0 is a format error."""
    assert e["args"].get("result", 1) != 0, f"result 0 is never written: {e}"
    return e["args"].get("result", 0)


def api_name(e):
    """The call's true name: launches are drawn as HTA and TensorBoard expect
    (cudaLaunchKernel for __cudaLaunchKernel, no _ptsz), the spelling called
    is in args.stepprof_api."""
    return e["args"].get("stepprof_api", e["name"])


def assert_valid(path):
    from check_trace import check
    problems = check(path)
    if problems:
        raise AssertionError(f"{path} breaks formats.md:\n  " + "\n  ".join(problems[:20]))


def read_json(path):
    with open(path) as f:
        return json.load(f)
