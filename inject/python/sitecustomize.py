# inject/python/sitecustomize.py — run by the interpreter at start because
# libstepprof.so's constructor put this folder first on PYTHONPATH
# (inject/torch.c). It only installs a finder that notices `import torch`
# (the rest is in _stepprof_torch.py), then runs the user's own
# sitecustomize, if any, as site.py would have: errors in it propagate to
# site.py, which reports them as usual.
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  (the user's own, further down sys.path)
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        sys.modules["sitecustomize"] = ours


try:
    import _stepprof_torch
    _stepprof_torch.install()
except Exception as e:  # never break the program's start
    sys.stderr.write("stepprof: the PyTorch bootstrap failed (%s); operators and optimizer steps are not "
                     "recorded\n" % e)
_chain()
