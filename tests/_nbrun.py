"""Run one notebook's tests as `nbdev-test` does, in a process that runs many: tests/test_notebooks.py keeps one per
pytest worker, so torch, transformers and the other libraries are imported once per worker instead of once per notebook.

Each notebook still starts from a fresh `cove`: after it, every `cove` module is dropped from `sys.modules`, so the
next notebook imports them anew, and nothing a notebook registered (families, methods, toolsets, plugins, config keys)
or cached is seen by the next. The environment variables, the working directory and `sys.path` are put back too."""
import gc, os, sys, tempfile, time
from pathlib import Path

def forget_cove():
    "Drop every `cove` module from `sys.modules`: the next import of one runs it anew."
    for n in [n for n in sys.modules if n == 'cove' or n.startswith('cove.')]: del sys.modules[n]

def run(path:str, flags:str='') -> tuple[bool, str, float]:
    """Test notebook `path` with nbdev's `test_nb` and the project's `tst_flags` (less `flags`): (passed, its stderr,
    seconds)."""
    from nbdev.config import get_config
    from nbdev.test import test_nb
    from fastcore.xtras import working_directory
    cfg = get_config(Path(path).parent)
    force = flags.split()
    skip = [f for f in (cfg.tst_flags.split() if isinstance(cfg.tst_flags, str) else cfg.tst_flags) if f not in force]
    env, cwd, syspath = dict(os.environ), os.getcwd(), list(sys.path)
    t0 = time.time()
    with tempfile.TemporaryFile() as err:   # test_nb writes a failing cell's traceback to fd 2 (sys.__stderr__)
        sys.__stderr__.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            with working_directory(cfg.nbs_path):
                ok, _ = test_nb(path, skip_flags=skip, force_flags=force, basepath=cfg.config_path,
                                cell_timeout=cfg.cell_timeout or None)
        finally:
            sys.__stderr__.flush()
            os.dup2(saved, 2)
            os.close(saved)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            sys.path[:] = syspath
            forget_cove()
            gc.collect()
        err.seek(0)
        return bool(ok), err.read().decode(errors='replace'), time.time() - t0
