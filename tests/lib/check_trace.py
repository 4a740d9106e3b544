#!/usr/bin/env python3
"""check_trace.py — the reference checker for stepprof's Chrome trace files (Kineto flavour).

Owns every rule of /work/shared/formats.md section 3 (and the file-name rule of section 2) that can be
checked against one file: top-level key order, event shapes, categories and their args, flow arrows,
thread/process metadata, the final `Record Window End` event, memory instant events, and that
TensorBoard and HTA will find the file and its rank. Python 3.11 standard library only, so it runs
wherever the tests run.

Module use (tests import it):
    violations = check(path)             # [] when the file is valid, else one message per problem
    trace = load(path)                   # the parsed file (floats for times), .json or .json.gz
    events(trace, cat=None, name=None, ph=None)
    x_events_by_thread(trace)            # {(pid, tid): [X events sorted by ts]}
    thread_names(trace), process_names(trace), flow_pairs(trace), parse_file_name(path),
    find_traces(directory), abs_ns(trace, ts)
CLI:
    python3 tests/lib/check_trace.py TRACE.pt.trace.json[.gz] ...   [--any-name]
prints `ok: N events` per file (prefixed by the path when several are given) and exits 0, or prints
every violation and exits 1.
"""

import bisect
import decimal
import gzip
import json
import os
import re
import sys

# TensorBoard's profiler plugin: which files are traces, and how the worker name splits.
TB_FILE_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
TB_WORKER_RE = re.compile(r"^(.*)_(\d+)")
# HTA reads the rank from the raw text with this regex (at least one space after the colon).
HTA_RANK_RE = re.compile(r'"rank":\s+(\d+)')

# Positions of the fixed top-level keys; metadata keys (distributedInfo, ...) go between.
TOP_HEAD = ["schemaVersion", "deviceProperties"]
TOP_TAIL = ["displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName"]
DEVICE_PROPERTY_KEYS = ["id", "name", "totalGlobalMem", "computeMajor", "computeMinor",
                        "maxThreadsPerBlock", "maxThreadsPerMultiprocessor", "regsPerBlock",
                        "warpSize", "sharedMemPerBlock", "numSms"]

ALLOWED_PH = {"X", "i", "s", "f", "M", "C"}  # C: counter tracks (allocated bytes per device)
ALLOWED_CATS = {"cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync",
                "user_annotation", "gpu_user_annotation", "ac2g", "cpu_instant_event", "memory",
                "cpu_op", "fwdbwd",  # PyTorch operators and their forward-to-backward flows
                "python_function"}  # with_stack: Python calls
# Args HTA or TensorBoard read on GPU events: a host event carrying one is misread (docs/formats.md);
# HTA takes any event with args.stream for GPU work.
GPU_ONLY_ARGS = {"stream", "device", "context", "queued"}
# HTA and TensorBoard find launches by these exact names; the decorated spellings go in args.stepprof_api.
UNDECORATED_API_RE = re.compile(r"^(?!__cudaLaunch).*(?<!_ptsz)(?<!_ptds)$")
HOST_API_CATS = {"cuda_runtime", "cuda_driver"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}

KERNEL_ARGS_ORDER = ["External id", "queued", "device", "context", "stream", "correlation",
                     "registers per thread", "shared memory", "blocks per SM", "warps per SM",
                     "grid", "block", "est. achieved occupancy %"]
MEMCPY_ARGS_ORDER = ["device", "context", "stream", "correlation", "bytes",
                     "memory bandwidth (GB/s)"]
# Kineto's spellings of CUPTI's memcpy and memory kinds.
MEMCPY_KINDS = {"HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
                "Unknown"}
MEMORY_KINDS = {"Pageable", "Pinned", "Device", "Array", "Managed", "Device Static",
                "Managed Static", "Unknown"}
MEMCPY_NAME_RE = re.compile(r"^Memcpy (\S+) \(([A-Za-z ]+) -> ([A-Za-z ]+)\)$")
MEMSET_NAME_RE = re.compile(r"^Memset \(([A-Za-z ]+)\)$")
SYNC_NAMES = {"Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event"}

MEMORY_ARGS = ["Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"]
OOM_ARGS = [k for k in MEMORY_ARGS if k != "Addr"]
MEMORY_EVENT_ARGS = {"[memory]": MEMORY_ARGS, "[OutOfMemory]": OOM_ARGS}

METADATA_WITH_ARGS = {"process_name", "process_labels", "process_sort_index", "thread_name",
                      "thread_sort_index"}
WINDOW_END = "Record Window End"
WINDOW_END_KEYS = {"name", "ph", "s", "pid", "tid", "ts"}


# ---------------------------------------------------------------------------------------------
# Reading

def _read_text(path, problems):
    """The file's text; gzip is decided by the name, and content that disagrees is a violation."""
    with open(path, "rb") as f:
        raw = f.read()
    gzipped = raw[:2] == b"\x1f\x8b"
    if path.endswith(".gz"):
        if not gzipped:
            problems.append("file name ends in .gz but the content is not gzip")
        else:
            raw = gzip.decompress(raw)
    elif gzipped:
        problems.append("content is gzip but the file name does not end in .gz")
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _parse(text, exact, problems=None):
    """json.loads that keeps number text exact (Decimal) when asked and reports duplicate keys."""
    def pairs(items):
        obj = dict(items)
        if problems is not None and len(obj) != len(items):
            seen = set()
            for k, _ in items:
                if k in seen:
                    problems.append(f"duplicate key {k!r} in one JSON object")
                seen.add(k)
        return obj
    return json.loads(text, object_pairs_hook=pairs, parse_constant=_reject_constant,
                      parse_float=decimal.Decimal if exact else float)


def load(path):
    """The parsed trace (times as float), from .json or .json.gz."""
    return _parse(_read_text(path, []), exact=False)


# ---------------------------------------------------------------------------------------------
# Helpers for tests

def events(trace, cat=None, name=None, ph=None):
    """traceEvents filtered by cat, name and ph (each None = any)."""
    return [e for e in trace.get("traceEvents", [])
            if isinstance(e, dict)
            and (cat is None or e.get("cat") == cat)
            and (name is None or e.get("name") == name)
            and (ph is None or e.get("ph") == ph)]


def x_events_by_thread(trace):
    """{(pid, tid): [complete (ph X) events sorted by ts, longer first on ties]}."""
    def order(e):
        ts, dur = e.get("ts"), e.get("dur")
        return (ts if _is_num(ts) else 0, -dur if _is_num(dur) else 0)
    lanes = {}
    for e in events(trace, ph="X"):
        lanes.setdefault((_key(e.get("pid")), _key(e.get("tid"))), []).append(e)
    for lane in lanes.values():
        lane.sort(key=order)
    return lanes


def thread_names(trace):
    """{(pid, tid): name} from thread_name metadata."""
    return {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name")
            for e in events(trace, name="thread_name", ph="M")}


def process_names(trace):
    """{pid: name} from process_name metadata."""
    return {e.get("pid"): e.get("args", {}).get("name")
            for e in events(trace, name="process_name", ph="M")}


def flow_pairs(trace):
    """[(start, finish)] of the ac2g arrows, matched by id; unmatched ends are left out."""
    starts = {}
    for e in events(trace, cat="ac2g", ph="s"):
        starts.setdefault(e.get("id"), e)
    return [(starts[e.get("id")], e) for e in events(trace, cat="ac2g", ph="f")
            if e.get("id") in starts]


def parse_file_name(path):
    """TensorBoard's view of a trace file name: {worker, node, process, time} or None."""
    m = TB_FILE_RE.match(os.path.basename(path))
    if not m:
        return None
    worker = m.group(1)
    w = TB_WORKER_RE.match(worker)
    return {"worker": worker, "node": w.group(1) if w else None,
            "process": w.group(2) if w else None,
            "time": int(m.group(2)[1:]) if m.group(2) else None}


def find_traces(directory):
    """Trace files TensorBoard would list in directory, sorted by name."""
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if TB_FILE_RE.match(n) and not n.startswith("."))


def abs_ns(trace, ts):
    """Absolute nanoseconds (CLOCK_MONOTONIC domain) of a ts in this trace."""
    return trace["baseTimeNanoseconds"] + round(ts * 1000)


# ---------------------------------------------------------------------------------------------
# Checking

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def _key(v):
    """v itself when it can key a dict (the valid cases), else its repr, so that a malformed pid or
    id becomes one more violation instead of a crash of the checker."""
    return v if v is None or isinstance(v, (int, float, str, decimal.Decimal)) else repr(v)


def _decimals(v):
    """Digits after the point as written in the file (exact values are Decimal)."""
    if isinstance(v, decimal.Decimal):
        exp = v.as_tuple().exponent
        return -exp if isinstance(exp, int) and exp < 0 else 0
    return 0


def _label(i, e):
    return f"event #{i} ({e.get('ph')!s} {e.get('name')!r})"


def _check_order(where, keys, order, out):
    """The documented keys that are present appear in the documented relative order."""
    present = [k for k in keys if k in order]
    expected = sorted(present, key=order.index)
    if present != expected:
        out.append(f"{where}: args out of order: {present}, expected {expected}")


def _check_top(top, text, out):
    keys = list(top)
    if keys[:2] != TOP_HEAD or keys[-4:] != TOP_TAIL:
        out.append(f"top-level key order is {keys}; expected {TOP_HEAD} + metadata keys + "
                   f"{TOP_TAIL}")
    if top.get("schemaVersion") != 1 or not _is_int(top.get("schemaVersion")):
        out.append(f"schemaVersion must be 1, got {top.get('schemaVersion')!r}")
    props = top.get("deviceProperties")
    if not isinstance(props, list):
        out.append("deviceProperties must be a list ([] when unknown)")
    else:
        for n, p in enumerate(props):
            missing = [k for k in DEVICE_PROPERTY_KEYS if not isinstance(p, dict) or k not in p]
            if missing:
                out.append(f"deviceProperties[{n}] lacks {missing}")
    if top.get("displayTimeUnit") != "ms":
        out.append(f"displayTimeUnit must be \"ms\", got {top.get('displayTimeUnit')!r}")
    if not _is_int(top.get("baseTimeNanoseconds")):
        out.append("baseTimeNanoseconds must be an integer")
    if not isinstance(top.get("traceEvents"), list):
        out.append("traceEvents must be a list")
    if not isinstance(top.get("traceName"), str) or not top.get("traceName"):
        out.append("traceName must be a non-empty string")
    if "distributedInfo" in top:
        info = top["distributedInfo"]
        rank = info.get("rank") if isinstance(info, dict) else None
        if not _is_int(rank):
            out.append("distributedInfo.rank must be an integer")
        # HTA scans the raw text and stops at traceEvents: the first match must be ours.
        m = HTA_RANK_RE.search(text)
        cut = text.find('"traceEvents"')
        if not m or (cut >= 0 and m.start() > cut):
            out.append('HTA cannot find the rank: no match for "rank":\\s+(\\d+) before '
                       'traceEvents (a space after the colon is required)')
        elif _is_int(rank) and int(m.group(1)) != rank:
            out.append(f"HTA reads rank {m.group(1)} but distributedInfo.rank is {rank}")


def _check_event(i, e, out):
    """Shape rules of one event; returns its end time for X events, else None."""
    where = _label(i, e)
    name = e.get("name")
    if not isinstance(name, str):
        out.append(f"event #{i}: missing or non-string name")
    elif "\\" in name or "\n" in name or "\r" in name:
        out.append(f"{where}: name contains a backslash or newline")
    ph = e.get("ph")
    if ph not in ALLOWED_PH:
        out.append(f"{where}: ph {ph!r} not one of {sorted(ALLOWED_PH)}")
    for key in ("ts", "dur"):
        if key in e:
            v = e[key]
            if not _is_num(v):
                out.append(f"{where}: {key} must be a number, got {v!r}")
            elif _decimals(v) > 3:
                out.append(f"{where}: {key} {v} has more than 3 decimals")
    if ph != "M" and "ts" not in e:
        out.append(f"{where}: missing ts")
    if "dur" in e and _is_num(e["dur"]) and e["dur"] < 0:
        out.append(f"{where}: negative dur")
    cat = e.get("cat")
    if cat is not None and cat not in ALLOWED_CATS:
        out.append(f"{where}: cat {cat!r} not one of {sorted(ALLOWED_CATS)}")
    args = e.get("args")
    if args is not None and not isinstance(args, dict):
        out.append(f"{where}: args must be an object")
        args = None

    if ph == "X":
        missing = [k for k in ("cat", "pid", "tid", "ts", "dur") if k not in e]
        if missing:
            out.append(f"{where}: X event lacks {missing}")
        for k in ("pid", "tid"):
            if k in e and not _is_int(e[k]):
                out.append(f"{where}: {k} must be an integer (process/thread or device/stream id)")
        _check_x_cat(where, e, cat, args or {}, out)
        if _is_num(e.get("ts")) and _is_num(e.get("dur")):
            return e["ts"] + e["dur"]
    elif ph in ("s", "f"):
        missing = [k for k in ("id", "pid", "tid", "ts", "cat") if k not in e]
        if missing:
            out.append(f"{where}: flow event lacks {missing}")
        if cat in ("ac2g", "fwdbwd") and name != cat:
            out.append(f"{where}: {cat} flow events are named \"{cat}\"")
        if ph == "f" and cat in ("ac2g", "fwdbwd") and e.get("bp") != "e":
            out.append(f"{where}: flow finish needs \"bp\": \"e\" (bind to the enclosing slice)")
    elif ph == "i" and name in MEMORY_EVENT_ARGS:
        _check_memory(where, e, args, MEMORY_EVENT_ARGS[name], out)
    elif ph == "C" and "cat" not in e:
        out.append(f"{where}: counter events need a cat (viewers name the track after it)")
    elif ph == "M" and name in METADATA_WITH_ARGS:
        if args is None:
            out.append(f"{where}: metadata event needs args")
        if "pid" not in e or (name.startswith("thread_") and "tid" not in e):
            out.append(f"{where}: metadata event lacks pid/tid")
    return None


def _check_x_cat(where, e, cat, args, out):
    name = e.get("name", "")
    if cat in HOST_API_CATS:
        # A CUPTI-only driver call made inside an intercepted runtime call carries that call's id as
        # stepprof_runtime_correlation (exporters/gpu_trace.c), so clients count the call's GPU work once.
        nested = cat == "cuda_driver" and args.get("stepprof_source") == "cupti" and \
            "stepprof_runtime_correlation" in args and "correlation" not in args
        missing = [k for k in ("cbid", "correlation") if k not in args and not (nested and k == "correlation")]
        if missing:
            out.append(f"{where}: {cat} args lack {missing}")
        misread = sorted(GPU_ONLY_ARGS & set(args))
        if misread:
            out.append(f"{where}: host call args {misread} are GPU-event args to HTA/TensorBoard")
        if not UNDECORATED_API_RE.match(name):
            out.append(f"{where}: launch/API name {name!r} is not the one HTA and TensorBoard look for")
    elif cat == "gpu_user_annotation":
        if list(args) != ["External id"]:
            out.append(f"{where}: gpu_user_annotation args are {list(args)}, Kineto's are [\"External id\"]")
        if name.startswith("ProfilerStep#"):
            out.append(f"{where}: a GPU-side ProfilerStep# is counted as another step by TensorBoard")
    elif cat == "kernel":
        _check_order(where, list(args), KERNEL_ARGS_ORDER, out)
        for k in ("grid", "block"):
            v = args.get(k)
            if v is not None and not (isinstance(v, list) and len(v) == 3 and all(map(_is_int, v))):
                out.append(f"{where}: args.{k} must be [x, y, z] integers")
    elif cat == "gpu_memcpy":
        m = MEMCPY_NAME_RE.match(name)
        if not m or m.group(1) not in MEMCPY_KINDS or m.group(2) not in MEMORY_KINDS \
                or m.group(3) not in MEMORY_KINDS:
            out.append(f"{where}: memcpy name must read like \"Memcpy HtoD (Pageable -> Device)\"")
        _check_order(where, list(args), MEMCPY_ARGS_ORDER, out)
    elif cat == "gpu_memset":
        m = MEMSET_NAME_RE.match(name)
        if not m or m.group(1) not in MEMORY_KINDS:
            out.append(f"{where}: memset name must read like \"Memset (Device)\"")
        _check_order(where, list(args), MEMCPY_ARGS_ORDER, out)
    elif cat == "cuda_sync":
        if name not in SYNC_NAMES:
            out.append(f"{where}: cuda_sync name not one of {sorted(SYNC_NAMES)}")
    elif cat in ("user_annotation", "cpu_op"):
        if "External id" not in args:
            out.append(f"{where}: {cat} args lack \"External id\"")
    # GPU events sit on pid = device id, tid = stream id: args that name them must agree.
    if cat in GPU_CATS:
        if _is_num(e.get("dur")) and e["dur"] <= 0:
            out.append(f"{where}: GPU activity lasts 0 ns (no GPU reports that; HTA's breakdown fails on it)")
        for arg, key in (("device", "pid"), ("stream", "tid")):
            if arg in args and key in e and args[arg] != e[key]:
                out.append(f"{where}: args.{arg} {args[arg]!r} differs from {key} {e[key]!r}")


def _check_memory(where, e, args, expected, out):
    if e.get("s") != "t" or e.get("cat") != "cpu_instant_event":
        out.append(f"{where}: memory events are {{\"ph\": \"i\", \"s\": \"t\", "
                   f"\"cat\": \"cpu_instant_event\"}}")
    for k in ("pid", "tid"):
        if k not in e:
            out.append(f"{where}: memory event lacks {k}")
    keys = list(args or {})
    if keys != expected:
        out.append(f"{where}: args are {keys}, expected {expected}")
    for k in expected:
        if args and k in args and not _is_int(args[k]):
            out.append(f"{where}: args.{k} must be an integer")


def _lane_index(x_lanes):
    """Per thread: starts and running maximum of ends, to test 'some slice encloses ts' fast."""
    index = {}
    for lane, xs in x_lanes.items():
        starts, max_end, best = [], [], None
        for x in xs:
            if not (_is_num(x.get("ts")) and _is_num(x.get("dur"))):
                continue
            end = x["ts"] + x["dur"]
            best = end if best is None or end > best else best
            starts.append(x["ts"])
            max_end.append(best)
        index[lane] = (starts, max_end)
    return index


def _enclosed(index, pid, tid, ts):
    starts, max_end = index.get((pid, tid), ([], []))
    j = bisect.bisect_right(starts, ts) - 1
    return j >= 0 and max_end[j] >= ts


def _check_flows(evs, index, out):
    starts, finishes = {}, {}
    for i, e in enumerate(evs):
        if isinstance(e, dict) and e.get("cat") in ("ac2g", "fwdbwd") and e.get("ph") in ("s", "f"):
            fid = (e["cat"], _key(e.get("id")))
            (starts if e["ph"] == "s" else finishes).setdefault(fid, []).append((i, e))
    for fid, ends in starts.items():
        if fid not in finishes:
            out.append(f"{_label(*ends[0])}: flow start id {fid!r} has no finish (ph f)")
    for fid, ends in finishes.items():
        if fid not in starts:
            out.append(f"{_label(*ends[0])}: flow finish id {fid!r} has no start (ph s)")
    # An arrow is drawn between slices: each end must fall inside an X event on its thread.
    for group in (starts, finishes):
        for ends in group.values():
            for i, e in ends:
                if _is_num(e.get("ts")) and not _enclosed(index, _key(e.get("pid")),
                                                          _key(e.get("tid")), e["ts"]):
                    out.append(f"{_label(i, e)}: flow {e['ph']} at ts {e['ts']} is not inside any X "
                               f"event of pid {e.get('pid')!r} tid {e.get('tid')!r}")


def _check_metadata_cover(evs, out):
    threads, procs = set(), set()
    for e in evs:
        if isinstance(e, dict) and e.get("ph") == "M":
            if e.get("name") == "thread_name":
                threads.add((_key(e.get("pid")), _key(e.get("tid"))))
            elif e.get("name") == "process_name":
                procs.add(_key(e.get("pid")))
    seen = set()
    for e in evs:
        if isinstance(e, dict) and e.get("ph") == "X" and "pid" in e and "tid" in e:
            lane = (_key(e["pid"]), _key(e["tid"]))
            if lane in seen:
                continue
            seen.add(lane)
            if lane not in threads:
                out.append(f"pid {lane[0]!r} tid {lane[1]!r} has X events but no thread_name metadata")
            if lane[0] not in procs:
                out.append(f"pid {lane[0]!r} has X events but no process_name metadata")


def _check_window_end(evs, last_end, out):
    for i, e in enumerate(evs[:-1]):
        if isinstance(e, dict) and e.get("name") == WINDOW_END:
            out.append(f"event #{i}: {WINDOW_END} before the last event")
    last = evs[-1] if evs else None
    shape = (isinstance(last, dict) and last.get("name") == WINDOW_END and last.get("ph") == "i"
             and last.get("s") == "g" and last.get("pid") == "" and last.get("tid") == ""
             and _is_num(last.get("ts")) and set(last) == WINDOW_END_KEYS)
    if not shape:
        out.append('the last event must be {"name": "Record Window End", "ph": "i", "s": "g", '
                   '"pid": "", "tid": "", "ts": <end>}')
    elif last_end is not None and last["ts"] < last_end:
        out.append(f"{WINDOW_END} ts {last['ts']} is before the end of an X event ({last_end})")


def _check_file_name(path, out):
    info = parse_file_name(path)
    if info is None:
        out.append(f"file name {os.path.basename(path)!r} does not match TensorBoard's "
                   f"{TB_FILE_RE.pattern}")
    elif info["node"] is None:
        out.append(f"worker {info['worker']!r} does not split into node and process by "
                   f"{TB_WORKER_RE.pattern}")


def check(path, check_name=True):
    """Every violation of formats.md section 3 (and the section 2 name rule) found in the file."""
    return _check(path, check_name)[0]


def _check(path, check_name):
    """(violations, number of events)."""
    out = []
    if check_name:
        _check_file_name(path, out)
    try:
        text = _read_text(path, out)
        top = _parse(text, exact=True, problems=out)
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as err:
        return out + [f"cannot read {path} as JSON: {err}"], 0
    if not isinstance(top, dict):
        return out + ["top level is not a JSON object"], 0
    _check_top(top, text, out)
    evs = top.get("traceEvents")
    if not isinstance(evs, list):
        return out, 0
    last_end = None
    for i, e in enumerate(evs):
        if not isinstance(e, dict):
            out.append(f"event #{i}: not an object")
            continue
        end = _check_event(i, e, out)
        if end is not None and (last_end is None or end > last_end):
            last_end = end
    _check_flows(evs, _lane_index(x_events_by_thread(top)), out)
    _check_metadata_cover(evs, out)
    _check_window_end(evs, last_end, out)
    return out, len(evs)


def main(argv):
    paths = [a for a in argv if not a.startswith("--")]
    opts = {a for a in argv if a.startswith("--")}
    if not paths or opts - {"--any-name"}:
        print("usage: check_trace.py TRACE.pt.trace.json[.gz] ... [--any-name]", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        prefix = f"{path}: " if len(paths) > 1 else ""
        problems, count = _check(path, check_name="--any-name" not in opts)
        if problems:
            status = 1
            for p in problems:
                print(f"{prefix}{p}")
        else:
            print(f"{prefix}ok: {count} events")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
