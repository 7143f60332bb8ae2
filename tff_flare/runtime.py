"""Keeps TFF's local C++ runtime from outliving the Python process.

TFF's default execution context starts a `worker_binary` subprocess the first time a
computation runs. It inherits stdout/stderr and, if the interpreter exits without stopping it
(TFF's own `__del__` fails at interpreter shutdown), it keeps running and holds the parent's
output pipe open. Workers are started with a parent-death signal (`_tie_workers_to_this_process`),
so the kernel ends them whenever this process dies, even by SIGKILL; besides,
`stop_local_workers()` ends every such child of this process;
`install_cleanup()` (called when `tff_flare` is imported) runs it at exit and on SIGTERM and
SIGHUP (after which the process dies of that signal), and on Ctrl-C, which then exits at once
with status 130 (see `_stop_workers_then_exit_130` for why not via `KeyboardInterrupt`).
"""

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import time
import types

WORKER_BINARY_NAME = 'worker_binary'
_PR_SET_PDEATHSIG = 1
_installed = False


def _die_with_parent() -> None:
  """In the forked child, before exec: get SIGKILL when the parent dies (Linux prctl)."""
  libc = ctypes.CDLL(None, use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class WorkerPopen(subprocess.Popen):
  """`subprocess.Popen` whose child is killed by the kernel when its parent dies."""

  def __init__(self, args, **kwargs):
    if sys.platform.startswith('linux'):
      kwargs.setdefault('preexec_fn', _die_with_parent)
    super().__init__(args, **kwargs)


def _tie_workers_to_this_process() -> None:
  """Makes TFF start its local workers with a parent-death signal.

  TFF offers no hook for how it starts `worker_binary`, so its executor-factory module's
  `subprocess` name is pointed at a copy of the module whose `Popen` sets PR_SET_PDEATHSIG.
  Then even a SIGKILLed driver leaves no worker behind. (The signal follows the thread that
  started the worker: TFF starts it from its long-lived event-loop or main thread.)
  """
  from tensorflow_federated.python.core.impl.executor_stacks import executor_factory  # pylint: disable=g-import-not-at-top
  shim = types.ModuleType('subprocess')
  shim.__dict__.update(subprocess.__dict__)
  shim.Popen = WorkerPopen
  executor_factory.subprocess = shim


def _children_of(pid: int) -> list[int]:
  children = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit():
      continue
    try:
      with open(f'/proc/{entry}/stat', 'rb') as f:
        fields = f.read().rsplit(b')', 1)[1].split()
      if int(fields[1]) == pid:
        children.append(int(entry))
    except (OSError, IndexError, ValueError):
      continue
  return children


def command_line(pid: int) -> str:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return f.read().replace(b'\0', b' ').decode(errors='replace')
  except OSError:
    return ''


def local_worker_pids() -> list[int]:
  """Pids of TFF `worker_binary` processes started by this process."""
  if not os.path.isdir('/proc'):
    return []
  return [pid for pid in _children_of(os.getpid())
          if WORKER_BINARY_NAME in command_line(pid)]


def stop_local_workers(timeout_s: float = 5.0) -> list[int]:
  """Stops this process's TFF worker children (SIGINT, then SIGKILL); returns their pids."""
  pids = local_worker_pids()
  for pid in pids:
    _signal(pid, signal.SIGINT)
  deadline = time.monotonic() + timeout_s
  remaining = list(pids)
  while remaining and time.monotonic() < deadline:
    remaining = [pid for pid in remaining if not _reap(pid)]
    if remaining:
      time.sleep(0.05)
  for pid in remaining:
    _signal(pid, signal.SIGKILL)
    _reap(pid, block=True)
  return pids


def _signal(pid: int, signum: int) -> None:
  try:
    os.kill(pid, signum)
  except ProcessLookupError:
    pass


def _reap(pid: int, block: bool = False) -> bool:
  """True once `pid` has exited (and is reaped)."""
  try:
    done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
    return done == pid
  except ChildProcessError:
    return True


def _stop_workers_at_exit() -> None:
  """The atexit hook: stop the workers, then mute TFF's failing `ServiceManager.__del__`.

  At interpreter shutdown TFF's `__del__` finds the `subprocess` module already torn down
  and prints an ignored AttributeError; the worker it meant to stop is gone by then.
  """
  stop_local_workers()
  default_hook = sys.unraisablehook

  def hook(unraisable):
    name = getattr(unraisable.object, '__qualname__', '')
    if name.endswith('ServiceManager.__del__'):
      return
    default_hook(unraisable)

  sys.unraisablehook = hook


def _stop_workers_then_die(signum, frame):
  """SIGTERM/SIGHUP: stop the workers, then die of the same signal (default action).

  Raising SystemExit here instead could be swallowed when the signal lands inside a
  `__del__` or a gc callback, leaving the process running.
  """
  del frame
  stop_local_workers()
  signal.signal(signum, signal.SIG_DFL)
  os.kill(os.getpid(), signum)


_interrupt_message = 'Interrupted.'


def set_interrupt_message(message: str) -> None:
  """What Ctrl-C prints before the process exits (e.g. how to resume)."""
  global _interrupt_message
  _interrupt_message = message


def _stop_workers_then_exit_130(signum, frame):
  """Ctrl-C: stop the workers and exit at once with status 130.

  A `KeyboardInterrupt` raised while TFF's synchronous context waits for a computation leaves
  the interpreter hung at exit (the computation never completes), so Ctrl-C ends the process
  here instead. Nothing is lost that a resume needs: checkpoints are written to a temporary
  directory and renamed into place.
  """
  del signum, frame
  stop_local_workers()
  try:
    sys.stdout.flush()
    sys.stderr.write(f'\n{_interrupt_message}\n')
    sys.stderr.flush()
  finally:
    os._exit(130)  # pylint: disable=protected-access


def install_cleanup() -> None:
  """Registers `stop_local_workers` at exit, on SIGTERM/SIGHUP, and on Ctrl-C (SIGINT)."""
  global _installed
  if _installed:
    return
  _installed = True
  _tie_workers_to_this_process()
  atexit.register(_stop_workers_at_exit)
  handlers = {signal.SIGTERM: _stop_workers_then_die, signal.SIGHUP: _stop_workers_then_die,
              signal.SIGINT: _stop_workers_then_exit_130}
  for signum, handler in handlers.items():
    try:
      if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler, None):
        signal.signal(signum, handler)
    except ValueError:  # Not the main thread.
      pass
