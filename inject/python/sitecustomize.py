# inject/python/sitecustomize.py — run by the interpreter at start because
# libstepprof.so's constructor put this folder first on PYTHONPATH
# (inject/torch.c). It gives the program its own PYTHONPATH back (the
# constructor of each preloaded Python child puts this folder there again),
# installs a finder that notices `import torch` (the rest is in
# _stepprof_torch.py), then runs the user's own sitecustomize, if any, as
# site.py would have: errors in it propagate to site.py, which reports them as
# usual.
import os
import sys


def _restore_pythonpath(here):
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if parts[0] and os.path.abspath(parts[0]) == here:
        if len(parts) == 1:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = os.pathsep.join(parts[1:])


def _chain(here):
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  (the user's own, further down sys.path)
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        sys.modules["sitecustomize"] = ours


_here = os.path.dirname(os.path.abspath(__file__))
_restore_pythonpath(_here)
try:
    import _stepprof_torch
    _stepprof_torch.install()
except Exception as e:  # never break the program's start
    sys.stderr.write("stepprof: the PyTorch bootstrap failed (%s); operators and optimizer steps are not "
                     "recorded\n" % e)
_chain(_here)
