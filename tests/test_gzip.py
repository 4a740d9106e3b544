"""tests/test_gzip.py — use_gzip through both compressors (gzip_lib, exporters/gz.c): ISA-L's igzip
(the default when libisal.so.2 is installed, as scripts/deps.sh does) and zlib. Each run's
.pt.trace.json.gz is one gzip member (Perfetto UI reads only the first), its trailer checks, it passes
formats.md, and it decompresses to the same trace as a plain run of the same program, field for
field, apart from what differs between any two runs (times, pid/tid, addresses). log: debug names the
compressor. HTA and TensorBoard read a gzip trace in test_clients.py."""
import json
import zlib

from harness import assert_valid, prog, run

# Values that differ between two runs of one program whatever the output format.
PER_RUN = {"ts", "dur", "pid", "tid", "baseTimeNanoseconds", "traceName", "sort_index", "ptr", "dst", "src",
           "stream handle"}
ENGINE_LINE = {"isal": "stepprof: gzip: ISA-L igzip level 1 (libisal.so.2)", "zlib": "stepprof: gzip: zlib "}


def one_member(path):
    """The decompressed bytes; fails unless the file is exactly one complete gzip member."""
    with open(path, "rb") as f:
        data = f.read()
    d = zlib.decompressobj(wbits=31)
    text = d.decompress(data) + d.flush()
    assert d.eof, f"{path}: gzip stream not finished"
    assert d.unused_data == b"", f"{path}: {len(d.unused_data)} bytes after the first gzip member"
    return text


def normalized(t, pid):
    if isinstance(t, dict):
        return {k: None if k in PER_RUN else normalized(v, pid) for k, v in t.items()}
    if isinstance(t, list):
        return [normalized(v, pid) for v in t]
    if isinstance(t, str):
        return t.replace(f"thread {pid} (", "thread PID (")  # thread_name of the main thread
    return t


def record(argv, env, lib=None):
    e = dict(env, PROF_LOG="debug")
    if lib:
        e.update({"PROF_USE_GZIP": 1, "PROF_GZIP_LIB": lib})
    r = run(argv, env=e)
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert path.endswith(".pt.trace.json.gz" if lib else ".pt.trace.json"), path
    assert_valid(path)
    if lib:
        said = [line for line in r.sp_lines if line.startswith("stepprof: gzip:")]
        assert len(said) == 1 and said[0].startswith(ENGINE_LINE[lib]), r.sp_lines
        text = one_member(path)
    else:
        with open(path, "rb") as f:
            text = f.read()
    t = json.loads(text)
    return normalized(t, t["traceEvents"][0]["pid"]), len(text)


def same_trace_each_way(argv, env):
    """Each compressor's trace equals a plain run's, field for field."""
    for lib in ("isal", "zlib"):
        plain, size = record(argv, env)
        got, _ = record(argv, env, lib)
        assert got == plain, f"{lib}: the gzip trace differs from the plain one"
    return size


def test_gzip_both_compressors_write_the_plain_trace():
    same_trace_each_way([prog("train")], {"STEPS": 5, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 1,
                                          "PROF_ACTIVE": 3})


def test_gzip_both_compressors_many_buffers():
    """Several MB of JSON: many 256 KiB writes into the compressor, and its output buffer refilled."""
    size = same_trace_each_way([prog("export_bench"), "20000"],
                               {"PROF_MARKER": "nvtx:step", "PROF_WAIT": 0, "PROF_WARMUP": 1, "PROF_ACTIVE": 1,
                                "PROF_REPEAT": 1, "PROF_CUPTI": 0, "FAKECUDA_KERNEL_NS": 0})
    assert size > 4 << 20, size


def test_gzip_lib_default_is_isal_and_zlib_can_be_named():
    r = run([prog("train")], env={"STEPS": 3, "PROF_USE_GZIP": 1, "PROF_LOG": "debug"})
    assert r.returncode == 0, r.stderr
    assert ENGINE_LINE["isal"] in r.sp_lines, r.sp_lines
    r = run([prog("train")], env={"STEPS": 3, "PROF_USE_GZIP": 1, "PROF_GZIP_LIB": "zip"})
    assert r.returncode == 0, r.stderr
    assert r.sp_lines == ['stepprof: PROF_GZIP_LIB="zip": expected one of auto, isal, zlib (did you mean zlib?); '
                          'profiling disabled for this run'], r.sp_lines
