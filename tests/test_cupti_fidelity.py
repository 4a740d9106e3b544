"""tests/test_cupti_fidelity.py — issue 15: the collector against a CUPTI
stand-in that behaves like NVIDIA's where the first stand-in did not
(tests/fakecuda/README.md, "real CUPTI / stand-in / test that covers it"):
driver records whose cbids overlap runtime ones (lazy module loading inside
the first cudaMalloc), correlation ids that must not collide, peer copies,
errno, fork children, short-lived threads."""
import collections

from harness import assert_valid, load, prog, run, runtime_events
from test_cupti import gpu, need_fake_cupti


def whole_run(binary="train", env=None, args=()):
    need_fake_cupti()
    r = run([prog(binary), *args], env={"STEPS": 2, **(env or {})})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    return r, load(path)


def test_lazy_load_driver_record_does_not_steal_the_first_malloc():
    """Lazy loading puts cuModuleLoadDataEx (driver cbid 20) inside the
    first cudaMalloc (runtime cbid 20) on the same thread. With CUPTI's clock
    50 us off, only pairing per domain keeps every cudaMalloc with its own
    runtime record: none is drawn twice, the driver call is drawn once as
    CUPTI's own cuda_driver event, inside the cudaMalloc that issued it."""
    _, t = whole_run(env={"FAKECUPTI_CLOCK_SKEW_NS": -50000})
    mallocs = runtime_events(t, "cudaMalloc")
    assert len(mallocs) == 6, [e["name"] for e in mallocs]
    extra = [e["name"] for e in runtime_events(t, all_sources=True) if e["args"].get("stepprof_source") == "cupti"]
    assert "cudaMalloc" not in extra, extra
    drv = [e for e in t["traceEvents"] if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    loads = [e for e in drv if e["name"] == "cuModuleLoadDataEx"]
    assert len(loads) == 1, [e["name"] for e in drv]
    assert loads[0]["args"]["cbid"] == 20 and mallocs[0]["args"]["cbid"] == 20
    # the ids of intercepted calls: CUPTI's where paired, else synthetic ones that no CUPTI id can equal
    ids = collections.Counter(e["args"]["correlation"] for e in runtime_events(t))
    assert max(ids.values()) == 1, [k for k, v in ids.items() if v > 1][:5]


def test_synthetic_correlation_ids_above_every_cupti_id():
    """A call no CUPTI record claimed gets a synthetic id; CUPTI's ids are
    32-bit and start at 1, so a synthetic id must be at least 2^32, also on
    the first thread (slot 0), or it names some kernel's launch."""
    r, t = whole_run(env={"FAKECUPTI_ENABLE_ERROR": 999})
    assert any("CUPTI" in l for l in r.sp_lines), r.sp_lines
    calls = runtime_events(t)
    assert len(calls) > 20
    ids = [e["args"]["correlation"] for e in calls]
    assert min(ids) >= 1 << 32, sorted(ids)[:5]
    assert len(set(ids)) == len(ids)
