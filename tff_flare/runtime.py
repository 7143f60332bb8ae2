"""Keeps TFF's local C++ runtime from outliving the Python process.

TFF's default execution context starts a `worker_binary` subprocess the first time a
computation runs. It inherits stdout/stderr and, if the interpreter exits without stopping it
(TFF's own `__del__` fails at interpreter shutdown), it keeps running and holds the parent's
output pipe open. `stop_local_workers()` ends every such child of this process;
`install_cleanup()` (called when `tff_flare` is imported) runs it at exit and on SIGTERM and
SIGHUP (after which the process dies of that signal). Ctrl-C raises `KeyboardInterrupt`, which
ends in the atexit hook.
"""

import atexit
import os
import signal
import sys
import time

WORKER_BINARY_NAME = 'worker_binary'
_installed = False


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


def _command_line(pid: int) -> str:
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
          if WORKER_BINARY_NAME in _command_line(pid)]


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


def install_cleanup() -> None:
  """Registers `stop_local_workers` at exit and on SIGTERM/SIGHUP."""
  global _installed
  if _installed:
    return
  _installed = True
  atexit.register(_stop_workers_at_exit)
  for signum in (signal.SIGTERM, signal.SIGHUP):
    try:
      if signal.getsignal(signum) in (signal.SIG_DFL, None):
        signal.signal(signum, _stop_workers_then_die)
    except ValueError:  # Not the main thread.
      pass
