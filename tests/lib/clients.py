#!/usr/bin/env python3
"""clients.py — runs the real clients of stepprof's traces, as released, and prints what they
computed as one JSON object on stdout, for tests/test_clients.py to check against the trace itself.

    python3 tests/lib/clients.py hta DIR     Holistic Trace Analysis on every rank's trace in DIR
    python3 tests/lib/clients.py tb FILE     TensorBoard profiler plugin's loader on one trace

A separate process per call: both clients start worker processes, log a lot and keep global state.
HTA 0.5.0 needs pandas < 3 for its critical path (pandas 3 refuses drop(axis=..., columns=...));
scripts/pydeps.sh installs that pandas under build/pydeps/hta, which test_clients.py puts first on
PYTHONPATH for this process only. Nothing here interprets a result: failures are reported as
{"error": "..."} per analysis so the test names which one broke."""
import json
import logging
import os
import sys
import tempfile
import traceback
import warnings


def _try(out, key, fn):
    try:
        out[key] = fn()
    except Exception as ex:  # noqa: BLE001 — the test reports which analysis failed and why
        out[key] = {"error": f"{type(ex).__name__}: {ex}", "where": traceback.format_exc(limit=-3)}


def _rows(df, cols):
    return [[(v.item() if hasattr(v, "item") else v) for v in row] for row in df[cols].itertuples(index=False)]


def hta(directory):
    from hta.trace_analysis import TimeSeriesTypes, TraceAnalysis
    out = {}
    ta = TraceAnalysis(trace_dir=directory, include_last_profiler_step=True)
    ranks = sorted(ta.t.traces)
    out["ranks"] = ranks
    out["pandas"] = __import__("pandas").__version__
    _try(out, "temporal", lambda: _rows(ta.get_temporal_breakdown(visualize=False),
                                        ["rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                                         "kernel_time(us)"]))

    def kernels():
        _, per = ta.get_gpu_kernel_breakdown(visualize=False, num_kernels=1000, duration_ratio=1.0,
                                             include_memory_kernels=True)
        return _rows(per, ["rank", "kernel_type", "name", "sum (us)"])
    _try(out, "kernel_breakdown", kernels)
    _try(out, "launch_stats", lambda: {r: _rows(df, ["correlation", "cpu_duration", "gpu_duration"])
                                       for r, df in ta.get_cuda_kernel_launch_stats(ranks=ranks,
                                                                                    visualize=False).items()})
    _try(out, "queue_length_summary", lambda: _rows(ta.get_queue_length_summary(ranks=ranks).reset_index(),
                                                    ["rank", "stream"]))
    _try(out, "queue_length_series", lambda: {r: sorted(int(s) for s in df["stream"].unique()) for r, df in
                                              ta.get_queue_length_time_series(ranks=ranks).items()})
    _try(out, "idle", lambda: _rows(ta.get_idle_time_breakdown(ranks=ranks, visualize=False)[0],
                                    ["rank", "stream", "idle_category", "idle_time"]))

    def critical():
        graph, ok = ta.critical_path_analysis(rank=ranks[0], annotation="ProfilerStep", instance_id=None)
        return {"ok": bool(ok), "nodes": graph.number_of_nodes(), "edges": len(graph.critical_path_edges_set)}
    _try(out, "critical_path", critical)
    _try(out, "memory_bw", lambda: _rows(ta.get_memory_bw_summary(ranks=ranks).reset_index(), ["rank", "name"]))

    def counters():
        work = tempfile.mkdtemp(prefix="sp-hta-counters-")
        before = set(os.listdir(directory))
        ta.generate_trace_with_counters(time_series=TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH,
                                        ranks=ranks)
        made = sorted(set(os.listdir(directory)) - before)
        found = {}
        for name in made:
            path = os.path.join(directory, name)
            os.replace(path, os.path.join(work, name))
            import gzip
            with gzip.open(os.path.join(work, name)) as f:
                t = json.load(f)
            found[name] = sorted({e["name"] for e in t["traceEvents"] if e.get("ph") == "C"})
        return found
    _try(out, "counters", counters)

    def sequences():
        work = tempfile.mkdtemp(prefix="sp-hta-seq-")
        df = ta.get_frequent_cuda_kernel_sequences(operator_name="train_step", output_dir=work,
                                                   min_pattern_len=2, rank=ranks[0], top_k=3)
        return len(df)
    _try(out, "kernel_sequences", sequences)
    _try(out, "user_annotations", lambda: _rows(ta.get_gpu_kernels_with_user_annotations(
        rank=ranks[0], expand_names=True, shortern_names=False), ["s_name", "s_user_annotation"]))
    return out


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage()[:300])


def _modules(stats):
    """TensorBoard's Module view: [name, id, occurrences, operators, children] per module, as it sorts them."""
    return [[s.name, s.id, s.occurences, s.operators, _modules(s.children)] for s in stats]


def tb(path):
    from torch_tb_profiler import utils
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator
    errors = _Errors()
    utils.get_logger().addHandler(errors)
    logging.getLogger().addHandler(errors)
    data = RunProfileData.parse("worker", None, path, tempfile.mkdtemp(prefix="sp-tb-"))
    profile = RunGenerator("worker", None, data).generate_run_profile()
    kernels = sorted([row[0], row[2]] for row in profile.kernel_table["data"]["rows"]) if profile.kernel_table else []
    return {"steps": list(data.steps_names),
            "step_total_us": [c.costs[-1] for c in data.steps_costs],
            "has_kernel": bool(data.has_kernel),
            "kernels": kernels,
            "gpu_summary": json.loads(json.dumps(profile.gpu_summary, default=str)),
            "memory": profile.memory_snapshot is not None,
            "memory_peaks": sorted([int(k[0]), int(k[1]), int(v)] for k, v in
                                   profile.memory_snapshot.get_peak_memory().items()) if profile.memory_snapshot else [],
            "views": [v.display_name for v in profile.views],
            "modules": _modules(profile.module_stats or []),
            "errors": errors.messages}


def main():
    warnings.filterwarnings("ignore")
    what, arg = sys.argv[1], sys.argv[2]
    if what == "hta":
        logging.disable(logging.ERROR)
    result = hta(arg) if what == "hta" else tb(arg)
    sys.stdout.write("\nCLIENTS-JSON " + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
