"""scripts/stepprof_trace.py — the offline trace readers of the `stepprof`
command written in Python: a streaming reader of Chrome/Kineto traces (plain
or .gz) that yields one event at a time, `merge` (every rank's trace on one
timeline) and the per-name statistics `diff` compares. Memory is one event
plus a read buffer, never the file: a merge of 8 x 1 GB traces runs in the
same memory as one small trace."""
import glob
import gzip
import json
import os
import re

CHUNK = 1 << 20
TRACE_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
OP_CATS = ("cuda_runtime", "cuda_driver", "user_annotation", "cpu_op")


class TraceError(Exception):
    """A file that is not a readable trace; the message names the file."""


def is_trace(path):
    return bool(TRACE_RE.match(os.path.basename(path)))


def traces_in(path):
    """TRACE -> [TRACE]; DIR -> its traces sorted by name (rank, then time)."""
    if os.path.isdir(path):
        found = sorted(p for p in glob.glob(os.path.join(path, "*.pt.trace.json*")) if is_trace(p))
        if not found:
            raise TraceError(f"{path}: no *.pt.trace.json[.gz] in this directory")
        return found
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or directory")
    return [path]


def _open(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "rt", encoding="utf-8", errors="replace")


class Reader:
    """One trace: .header (the top-level keys before traceEvents, parsed) and
    events() (each traceEvents element, decoded one at a time)."""

    def __init__(self, path):
        self.path = path
        self.f = _open(path)
        self.dec = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.header = self._read_header()

    def close(self):
        self.f.close()

    def _more(self):
        chunk = self.f.read(CHUNK)
        if not chunk:
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def _read_header(self):
        key = '"traceEvents"'
        while True:
            i = self.buf.find(key)
            if i >= 0:
                j = self.buf.find("[", i + len(key))
                if j >= 0:
                    break
            if len(self.buf) > 64 * CHUNK or not self._more():
                raise TraceError(f"{self.path}: not a Chrome trace (no traceEvents array)")
        head = self.buf[:i].rstrip()
        head = head[:-1] if head.endswith(",") else head
        try:
            header = json.loads(head + "}") if head.lstrip().startswith("{") else None
        except ValueError:
            header = None
        if not isinstance(header, dict):
            raise TraceError(f"{self.path}: not a Chrome trace (unreadable top-level object)")
        self.pos = j + 1
        return header

    def events(self):
        while True:
            while True:
                n = len(self.buf)
                p = self.pos
                while p < n and self.buf[p] in " \t\r\n,":
                    p += 1
                self.pos = p
                if p < n:
                    break
                if not self._more():
                    raise TraceError(f"{self.path}: truncated trace (traceEvents never closed)")
            if self.buf[self.pos] == "]":
                return
            while True:
                try:
                    ev, end = self.dec.raw_decode(self.buf, self.pos)
                    break
                except ValueError:
                    if not self._more():
                        raise TraceError(f"{self.path}: truncated or invalid event at character {self.pos}")
            self.pos = end
            if isinstance(ev, dict):
                yield ev


def rank_of(header, default):
    info = header.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    return default


# ---- merge -------------------------------------------------------------------

def _num(x):
    return "%.3f" % x if isinstance(x, float) else str(x)


class _RankMap:
    """A rank's threads and streams as threads of one process (pid = rank)."""

    def __init__(self, rank):
        self.rank = rank
        self.tids = {}
        self.proc_names = {}

    def tid(self, pid, tid, out, label=None):
        key = (pid, tid)
        new = self.tids.get(key)
        if new is None:
            new = self.tids[key] = len(self.tids) + 1
            where = self.proc_names.get(pid, f"pid {pid}")
            name = f"{where}: {label}" if label else f"{where}: tid {tid}"
            meta(out, "thread_name", self.rank, new, {"name": name})
            meta(out, "thread_sort_index", self.rank, new, {"sort_index": new})
        return new


def meta(out, name, pid, tid, args):
    out.write(",\n" + json.dumps({"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}))


def merge(paths, out_path):
    """Writes one trace with every input on one timeline: one process per rank
    (pid = rank, labelled with its worker), aligned on baseTimeNanoseconds.
    Returns the ranks merged."""
    heads = []
    for i, p in enumerate(paths):
        r = Reader(p)
        r.close()
        base = r.header.get("baseTimeNanoseconds", 0)
        heads.append((rank_of(r.header, i), int(base) if isinstance(base, (int, float)) else 0, p))
    base0 = min(h[1] for h in heads)
    tmp = out_path + ".tmp"
    opener = gzip.open if out_path.endswith(".gz") else open
    maps = {}
    with opener(tmp, "wt", encoding="utf-8") as out:
        out.write('{\n  "schemaVersion": 1,\n  "displayTimeUnit": "ms",\n')
        out.write(f'  "baseTimeNanoseconds": {base0},\n')
        out.write('  "stepprof_merged": ' + json.dumps([{"rank": h[0], "file": os.path.basename(h[2])}
                                                       for h in heads]) + ",\n")
        out.write('  "traceEvents": [\n')
        out.write(json.dumps({"name": "stepprof merge", "ph": "i", "s": "g", "pid": min(heads)[0], "tid": 0, "ts": 0}))
        for k, (rank, base, path) in enumerate(sorted(heads)):
            m = maps.get(rank)
            if m is None:
                m = maps[rank] = _RankMap(rank)
                worker = TRACE_RE.match(os.path.basename(path)).group(1) if is_trace(path) else path
                meta(out, "process_name", rank, 0, {"name": f"rank {rank}"})
                meta(out, "process_labels", rank, 0, {"labels": worker})
                meta(out, "process_sort_index", rank, 0, {"sort_index": rank})
            _merge_one(Reader(path), m, (base - base0) / 1000.0, k, len(heads), out)
        out.write("\n  ]\n}\n")
    os.replace(tmp, out_path)
    return sorted(maps)


def _merge_one(reader, m, shift_us, k, nfiles, out):
    try:
        for ev in reader.events():
            pid, tid = ev.get("pid"), ev.get("tid")
            if ev.get("ph") == "M":
                name = ev.get("name")
                args = ev.get("args") or {}
                if name == "process_name":
                    m.proc_names[pid] = str(args.get("name", pid))
                elif name == "thread_name":
                    m.tid(pid, tid, out, str(args.get("name", tid)))
                continue    # the rank's own process/thread metadata replaces the rest
            if isinstance(pid, int):
                ev["tid"] = m.tid(pid, tid, out)
            else:
                ev["tid"] = 0
            ev["pid"] = m.rank
            if isinstance(ev.get("ts"), (int, float)) and ev.get("ph") != "M":
                ev["ts"] = round(ev["ts"] + shift_us, 3)
            if "id" in ev and isinstance(ev["id"], int):
                # Flow ids stay unique across files: ranks, and two processes of one rank (a
                # restart, a fork) whose correlation ids both start at 1.
                ev["id"] = ev["id"] * nfiles + k
            out.write(",\n" + json.dumps(ev, separators=(", ", ": ")))
    finally:
        reader.close()


# ---- statistics for diff -----------------------------------------------------

def name_stats(paths):
    """Per (kind, name): total duration in us and calls, over every trace given;
    kind is "kernel" (GPU work) or "operator" (host calls and ranges). Also the
    mean ProfilerStep duration."""
    rows = {}
    steps = []
    for p in paths:
        r = Reader(p)
        try:
            for ev in r.events():
                if ev.get("ph") != "X" or not isinstance(ev.get("dur"), (int, float)):
                    continue
                cat, name = ev.get("cat"), str(ev.get("name", ""))
                if cat in GPU_CATS:
                    kind = "kernel"
                elif cat in OP_CATS:
                    if name.startswith("ProfilerStep#"):
                        if cat == "user_annotation":
                            steps.append(ev["dur"])
                        continue
                    kind = "operator"
                else:
                    continue
                row = rows.setdefault((kind, name), [0.0, 0])
                row[0] += ev["dur"]
                row[1] += 1
        finally:
            r.close()
    return rows, (sum(steps) / len(steps) if steps else None), len(steps)
