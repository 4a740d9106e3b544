"""tests/lib/relrun.py — running the reliability targets (tests/programs/rel_*.c) as real processes for
tests/test_reliability*.py: their environment (the runtime stand-in alone, or with its CUPTI stand-in),
start/finish with stderr drained on a thread, small readers of what they wrote, and the results table
of docs/reliability.md ($SP_BUILD/reliability.json)."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from harness import BUILD, FAKE_DIR, LIB, TRACE_RE

RESULTS = os.path.join(BUILD, "reliability.json")
# `make test-asan`: an ASan-built library needs the ASan runtime first in LD_PRELOAD.
PRELOAD_FIRST = os.environ.get("SP_PRELOAD_FIRST", "")
# `make test-valgrind`: targets run under memcheck, one log per process in BUILD.
VALGRIND = os.environ.get("SP_VALGRIND") == "1"
SLOW = 20 if VALGRIND else 1
# TensorBoard's trace-file pattern (formats.md section 2): a temporary must never match it.
TB_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
CYCLES, LAUNCHES = 2, 50


# ---- running targets ---------------------------------------------------------------------------

def _runtime_dir():
    """A library directory with the runtime stand-in and nothing else (no CUPTI stand-in)."""
    d = os.path.join(tempfile.gettempdir(), f"sp-rel-cudart-{os.getuid()}")
    os.makedirs(d, exist_ok=True)
    for name in ("libcudart.so.13", "libcudart.so"):
        link = os.path.join(d, name)
        if os.path.realpath(link) != os.path.realpath(os.path.join(FAKE_DIR, "libcudart.so.13")):
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(os.path.join(FAKE_DIR, "libcudart.so.13"), link)
    return d


def _env(env, preload, cwd, cupti=False):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PROF_")}
    for k in ("LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "RANK"):
        e.pop(k, None)
    e["LD_LIBRARY_PATH"] = FAKE_DIR if cupti else _runtime_dir()
    e["FAKECUDA_KERNEL_NS"] = "0"
    e["PROF_OUTPUT_DIR"] = os.path.join(cwd, "traces")
    if preload:
        e["LD_PRELOAD"] = f"{PRELOAD_FIRST} {LIB}".strip()
    elif PRELOAD_FIRST:
        e["LD_PRELOAD"] = PRELOAD_FIRST   # the stand-in is ASan-built too
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


class Proc:
    """One finished target run: returncode, stdout, stderr, stepprof: lines, files, seconds."""

    def __init__(self, rc, out, err, cwd, outdir, seconds):
        self.returncode, self.stdout, self.stderr = rc, out, err
        self.cwd, self.outdir, self.seconds = cwd, outdir, seconds
        self.sp_lines = [l for l in err.splitlines() if l.startswith("stepprof:")]

    def files(self):
        return sorted(os.listdir(self.outdir)) if os.path.isdir(self.outdir) else []

    def traces(self):
        found = [os.path.join(self.outdir, f) for f in self.files() if TRACE_RE.match(f)]
        return sorted(found, key=lambda p: int(TRACE_RE.match(os.path.basename(p)).group(2)))

    def temporaries(self):
        return [f for f in self.files() if ".tmp." in f]


def start(argv, env=None, preload=True, cupti=False, cwd=None, preexec=None, wrap=None):
    cwd = cwd or tempfile.mkdtemp(prefix="sp-rel-")
    e = _env(env, preload, cwd, cupti)
    if VALGRIND and preload:
        # The deliberate null write of `rel_ends segv` is memcheck's finding too: kept apart.
        log = "valgrind.expected-fault.%p.log" if "segv" in argv else "valgrind.%p.log"
        argv = ["valgrind", "--log-file=" + os.path.join(BUILD, log), "--leak-check=no"] + argv
    p = subprocess.Popen((wrap or []) + argv, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, errors="replace", preexec_fn=preexec)
    p.sp_cwd, p.sp_outdir, p.sp_t0 = cwd, e["PROF_OUTPUT_DIR"], time.time()
    # stderr is drained on a thread so a chatty target never blocks on a full pipe.
    p.sp_err = []
    t = threading.Thread(target=lambda: p.sp_err.append(p.stderr.read()), daemon=True)
    t.start()
    p.sp_err_thread = t
    return p


def finish(p, timeout=60):
    """Waits for the target (its stdout is small: the pipe never fills) and collects its output."""
    timeout *= SLOW
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError(f"{p.args} did not end within {timeout}s (deadlock?)")
    seconds = time.time() - p.sp_t0
    out = p.stdout.read()
    p.sp_err_thread.join(timeout=10)
    return Proc(p.returncode, out, "".join(p.sp_err), p.sp_cwd, p.sp_outdir, seconds)


def run(argv, **kw):
    timeout = kw.pop("timeout", 60)
    return finish(start(argv, **kw), timeout)


def read_until(p, text, timeout=20):
    """Reads the target's stdout up to the line `text`; returns the lines read."""
    lines, t0 = [], time.time()
    for line in p.stdout:
        lines.append(line)
        if line.strip() == text:
            return lines
        if time.time() - t0 > timeout:
            break
    raise AssertionError(f"no line {text!r} from {p.args}: {lines}")


def wait_for(pred, timeout=10):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.01)
    return False


def launches(trace, kernel=None):
    return [e for e in trace["traceEvents"] if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"
            and e["name"] == "cudaLaunchKernel" and (kernel is None or e["args"].get("kernel") == kernel)]


def runtime_calls(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"]


def status(rc):
    """A return code as a person reads it: 'exit 3' or 'SIGTERM'."""
    return f"exit {rc}" if rc >= 0 else signal.Signals(-rc).name


# ---- the results table -------------------------------------------------------------------------

def record(scenario, checked, events, files, exit_status, extra=""):
    """events/files/exit_status: (expected, found) pairs, kept for docs/reliability.md."""
    try:
        with open(RESULTS) as f:
            rows = json.load(f)
    except (OSError, ValueError):
        rows = {}
    rows[scenario] = {"checked": checked, "events": list(events), "files": list(files),
                      "exit": list(exit_status), "extra": extra, "order": rows.get(scenario, {}).get("order",
                                                                                                     len(rows))}
    with open(RESULTS, "w") as f:
        json.dump(rows, f, indent=1)


def render_table(path=RESULTS):
    with open(path) as f:
        rows = json.load(f)
    out = ["| scenario | what is checked | events expected / found | files expected / found | "
           "exit expected / found | notes |", "|---|---|---|---|---|---|"]
    for name, r in sorted(rows.items(), key=lambda kv: kv[1]["order"]):
        cell = lambda pair: f"{pair[0]} / {pair[1]}"  # noqa: E731
        out.append(f"| {name} | {r['checked']} | {cell(r['events'])} | {cell(r['files'])} | "
                   f"{cell(r['exit'])} | {r['extra']} |")
    return "\n".join(out)
