#!/usr/bin/env python3
"""test_check_trace.py — self-test of tests/lib/check_trace.py.

One hand-written valid trace (host API calls with flows to a kernel, a memcpy, a memset, a sync, NVTX
and ProfilerStep ranges, memory events, metadata, distributedInfo) must pass, plain and gzipped; then
each broken variant must be caught, and for the right reason (the message must mention the rule).
Plain python, no test framework: prints one line per failure and exits 1 if any, else prints
`test_check_trace: N cases ok`. Runs in well under a second.
"""

import contextlib
import copy
import gzip
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_trace  # noqa: E402

NAME = "host1_4242.1700000000000000000.pt.trace.json"
PID, TID, DEV, STREAM = 4242, 4243, 0, 7


def meta(name, pid, tid, args):
    e = {"name": name, "ph": "M", "ts": 0, "pid": pid}
    if tid is not None:
        e["tid"] = tid
    e["args"] = args
    return e


def valid_trace():
    """A trace shaped as formats.md section 3 says, small enough to read."""
    api = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
           "ts": 10.5, "dur": 4.25, "args": {"cbid": 211, "correlation": 1, "External id": 3}}
    kernel = {"ph": "X", "cat": "kernel", "name": "void axpy_kernel<float, 4>(float, float const*, float*, int)",
              "pid": DEV, "tid": STREAM, "ts": 16.0, "dur": 20.125,
              "args": {"External id": 3, "queued": 0, "device": DEV, "context": 1, "stream": STREAM,
                       "correlation": 1, "registers per thread": 32, "shared memory": 0,
                       "blocks per SM": 0.5, "warps per SM": 4.0, "grid": [64, 1, 1],
                       "block": [256, 1, 1], "est. achieved occupancy %": 6}}
    cpy_api = {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": PID, "tid": TID,
               "ts": 15.0, "dur": 1.0, "args": {"cbid": 41, "correlation": 2}}
    cpy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": DEV,
           "tid": STREAM, "ts": 37.0, "dur": 3.0,
           "args": {"device": DEV, "context": 1, "stream": STREAM, "correlation": 2, "bytes": 4096,
                    "memory bandwidth (GB/s)": 1.365}}
    mset = {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": DEV, "tid": STREAM,
            "ts": 41.0, "dur": 1.0, "args": {"device": DEV, "context": 1, "stream": STREAM,
                                             "correlation": 3, "bytes": 64}}
    sync = {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": DEV, "tid": STREAM,
            "ts": 42.0, "dur": 0.5, "args": {"stream": STREAM}}
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": PID, "tid": TID,
            "ts": 1.0, "dur": 50.0, "args": {"External id": 1}}
    rng = {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": PID, "tid": TID,
           "ts": 2.0, "dur": 20.0, "args": {"External id": 2}}
    grng = {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": DEV, "tid": STREAM,
            "ts": 16.0, "dur": 20.125, "args": {"External id": 2}}
    mem = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": PID, "tid": TID,
           "ts": 3.0, "args": {"Device Type": 1, "Device Id": 0, "Addr": 140000000, "Bytes": 4096,
                               "Total Allocated": 4096, "Total Reserved": 2097152}}
    oom = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[OutOfMemory]", "pid": PID,
           "tid": TID, "ts": 4.0, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1 << 40,
                                           "Total Allocated": 4096, "Total Reserved": 2097152}}
    flows = [
        {"ph": "s", "id": 1, "pid": PID, "tid": TID, "ts": 10.5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 1, "pid": DEV, "tid": STREAM, "ts": 16.0, "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
        {"ph": "s", "id": 2, "pid": PID, "tid": TID, "ts": 15.0, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 2, "pid": DEV, "tid": STREAM, "ts": 37.0, "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
    ]
    metadata = [
        meta("process_name", PID, None, {"name": "train"}),
        meta("process_labels", PID, None, {"labels": "CPU"}),
        meta("process_sort_index", PID, None, {"sort_index": PID}),
        meta("thread_name", PID, TID, {"name": "thread 4243 (train)"}),
        meta("thread_sort_index", PID, TID, {"sort_index": TID}),
        meta("process_name", DEV, None, {"name": "python"}),
        meta("process_labels", DEV, None, {"labels": "GPU 0"}),
        meta("thread_name", DEV, STREAM, {"name": "stream 7 "}),
    ]
    evs = metadata + [step, rng, mem, oom, api, cpy_api, kernel, grng, cpy, mset, sync] + flows
    evs.append({"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 52.0})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000,
                              "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                              "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
                              "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
        "profile_memory": 1,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1700000000000000000,
        "traceEvents": evs,
        "traceName": "/tmp/out/" + NAME,
    }


def ev(trace, name, ph=None):
    return next(e for e in trace["traceEvents"] if e["name"] == name and (ph is None or e["ph"] == ph))


def reorder(trace, keys):
    return {k: trace[k] for k in keys}


# Each case: (label, mutate(trace) -> trace or text, substring expected in a violation, file name).
def cases():
    def move_props(t):
        keys = list(t)
        keys.remove("deviceProperties")
        keys.insert(0, "deviceProperties")
        return reorder(t, keys)

    def name_last_but_one(t):
        keys = list(t)
        keys.remove("traceName")
        keys.insert(len(keys) - 1, "traceName")
        return reorder(t, keys)

    def drop(key, name, ph=None):
        def f(t):
            del ev(t, name, ph)[key]
            return t
        return f

    def setf(name, key, value, ph=None):
        def f(t):
            ev(t, name, ph)[key] = value
            return t
        return f

    def remove_events(pred):
        def f(t):
            t["traceEvents"] = [e for e in t["traceEvents"] if not pred(e)]
            return t
        return f

    def swap_kernel_args(t):
        k = ev(t, "void axpy_kernel<float, 4>(float, float const*, float*, int)")
        a = k["args"]
        k["args"] = {"device": a["device"], "External id": a["External id"],
                     **{x: y for x, y in a.items() if x not in ("device", "External id")}}
        return t

    def tight_json(t):
        return json.dumps(t, separators=(",", ":"))

    def dup_key(t):
        return json.dumps(t).replace('"displayTimeUnit": "ms"',
                                     '"displayTimeUnit": "ms", "displayTimeUnit": "ms"')

    def many_decimals(t):
        return json.dumps(t).replace('"ts": 10.5,', '"ts": 10.5001,', 1)

    def late_window(t):
        t["traceEvents"][-1]["ts"] = 40.0
        return t

    def drop_addr(t):
        del ev(t, "[memory]")["args"]["Addr"]
        return t

    is_flow = lambda ph, fid: lambda e: e.get("ph") == ph and e.get("id") == fid  # noqa: E731
    return [
        ("key order: deviceProperties first", move_props, "top-level key order", NAME),
        ("key order: traceName not last", name_last_but_one, "top-level key order", NAME),
        ("missing dur", drop("dur", "cudaLaunchKernel"), "X event lacks ['dur']", NAME),
        ("negative dur", setf("cudaLaunchKernel", "dur", -1), "negative dur", NAME),
        ("unmatched flow start", remove_events(is_flow("f", 1)), "has no finish", NAME),
        ("unmatched flow finish", remove_events(is_flow("s", 2)), "has no start", NAME),
        ("flow finish without bp", drop("bp", "ac2g", "f"), "bp", NAME),
        ("flow start outside any slice", setf("ac2g", "ts", 0.5, "s"), "not inside any X event", NAME),
        ("backslash in name", setf("forward", "name", "a\\b", "X"), "backslash", NAME),
        ("newline in name", setf("forward", "name", "a\nb", "X"), "newline", NAME),
        ("missing Record Window End",
         remove_events(lambda e: e["name"] == "Record Window End"), "Record Window End", NAME),
        ("Record Window End too early", late_window, "before the end of an X event", NAME),
        ("bad rank spacing", tight_json, "HTA cannot find the rank", NAME),
        ("kernel args out of order", swap_kernel_args, "args out of order", NAME),
        ("runtime args lack cbid",
         lambda t: (ev(t, "cudaMemcpyAsync")["args"].pop("cbid"), t)[1], "lack ['cbid']", NAME),
        ("unknown cat", setf("forward", "cat", "cpu_operator", "X"), "cat 'cpu_operator'", NAME),
        ("more than 3 decimals", many_decimals, "more than 3 decimals", NAME),
        ("thread without thread_name", remove_events(lambda e: e["name"] == "thread_name"
                                                     and e["pid"] == DEV), "no thread_name", NAME),
        ("metadata without args", drop("args", "process_sort_index"), "needs args", NAME),
        ("memory event without Addr", drop_addr, "expected ['Device Type'", NAME),
        ("bad memcpy name", setf("Memcpy HtoD (Pageable -> Device)", "name", "Memcpy to device"),
         "memcpy name", NAME),
        ("schemaVersion 2", lambda t: {**t, "schemaVersion": 2}, "schemaVersion", NAME),
        ("duplicate key", dup_key, "duplicate key", NAME),
        ("bad file name", lambda t: t, "does not match TensorBoard", "trace.json"),
        ("worker without pid", lambda t: t, "does not split", "host.123.pt.trace.json"),
    ]


def write(dirname, fname, content, gz=False):
    path = os.path.join(dirname, fname)
    text = content if isinstance(content, str) else json.dumps(content, indent=1)
    data = text.encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)
    return path


def main():
    failures, ran = [], 0
    with tempfile.TemporaryDirectory() as d:
        for gz in (False, True):
            ran += 1
            path = write(d, NAME + (".gz" if gz else ""), valid_trace(), gz)
            problems = check_trace.check(path)
            if problems:
                failures.append(f"valid trace (gz={gz}) rejected: {problems}")

        for label, mutate, expect, fname in cases():
            ran += 1
            path = write(d, fname, mutate(copy.deepcopy(valid_trace())))
            problems = check_trace.check(path)
            if not any(expect in p for p in problems):
                failures.append(f"{label}: expected a violation mentioning {expect!r}, got {problems}")
            os.unlink(path)

        ran += 1
        path = write(d, NAME, valid_trace(), gz=True)
        if not any("content is gzip" in p for p in check_trace.check(path)):
            failures.append("gzip content under a .json name not caught")

        ran += 1
        path = write(d, NAME, valid_trace())
        t = check_trace.load(path)
        lanes = check_trace.x_events_by_thread(t)
        helper_checks = [
            (len(check_trace.events(t, cat="kernel")) == 1, "events(cat=kernel)"),
            (len(check_trace.events(t, name="ac2g", ph="s")) == 2, "events(name, ph)"),
            ([e["name"] for e in lanes[(PID, TID)]][:2] == ["ProfilerStep#3", "forward"],
             "x_events_by_thread order"),
            (check_trace.thread_names(t)[(DEV, STREAM)] == "stream 7 ", "thread_names"),
            (check_trace.process_names(t)[PID] == "train", "process_names"),
            (len(check_trace.flow_pairs(t)) == 2, "flow_pairs"),
            (check_trace.parse_file_name(path)["process"] == "4242", "parse_file_name"),
            (check_trace.find_traces(d) == [path, path + ".gz"], "find_traces"),
            (check_trace.abs_ns(t, 10.5) == 1700000000000010500, "abs_ns"),
        ]
        with contextlib.redirect_stdout(io.StringIO()) as cli:
            helper_checks.append((check_trace.main([path]) == 0, "main exit 0"))
        helper_checks.append((cli.getvalue() == "ok: 24 events\n", "main output"))
        failures += [f"helper {what} wrong" for ok, what in helper_checks if not ok]

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"test_check_trace: {ran} cases ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
