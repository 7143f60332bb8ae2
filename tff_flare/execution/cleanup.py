"""No TFF worker outlives the Python process that started it.

TFF's runtime runs computations in a C++ `worker_binary` subprocess. It inherits the
parent's stdout/stderr, and one that outlives its parent holds the parent's output pipe open
(a CI job then hangs). This module keeps that from happening, without touching TFF:

  * `WorkerPopen` starts a process with a Linux parent-death signal, so the kernel ends it
    when the process that started it dies, even by SIGKILL. The execution modes start their
    TFF workers with it (`workers.LoopbackWorkers`; `--execution=local` starts one).
  * `stop_local_workers()` ends every `worker_binary` child of this process (also one that
    TFF's own default context started outside this project's execution modes).
  * `install_process_cleanup()` is for binaries: it stops the workers at exit, on SIGTERM and
    SIGHUP (then the process dies of that signal) and on Ctrl-C (then a run stops after its
    round and that round's checkpoint, or, at a second Ctrl-C or outside the rounds, the
    process exits at once with status 130, `exit_interrupted`). Importing this module does
    none of this.
  * `parent_death_signal(signum)` is the same for any child (`experiments/schedule.py`
    gives its runs SIGINT: a run ends as on Ctrl-C, resumable, when the scheduler dies).
  * `stop_workers_at_exit()` stops them when the process exits (the package's builders,
    `tff_flare.build_*`, register it at their first call);
    `stopping_local_workers()` is a context manager for a notebook or a script.
  * `noting_interrupts()` is for a call that runs rounds (`tff_flare.simulate`, the
    binaries' runs): Ctrl-C is noted, and the loop checks the note at every round
    (`hooks.StopOnInterrupt`). Under Python's own handler it is raised as well, since
    TensorFlow's XLA garbage-collection callback swallows a `KeyboardInterrupt` raised inside
    it ("Exception ignored in _xla_gc_callback") and the run would go on.
"""

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

WORKER_BINARY_NAME = 'worker_binary'
_PR_SET_PDEATHSIG = 1


def parent_death_signal(signum: int = signal.SIGKILL) -> Callable[[], None]:
  """A `preexec_fn`: in the forked child, before exec, ask the kernel to send it `signum`
  when its parent dies, however the parent dies (Linux prctl; elsewhere nothing)."""

  def preexec() -> None:
    if sys.platform.startswith('linux'):
      libc = ctypes.CDLL(None, use_errno=True)
      libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)

  return preexec


_die_with_parent = parent_death_signal(signal.SIGKILL)


class WorkerPopen(subprocess.Popen):
  """`subprocess.Popen` whose child is killed by the kernel when its parent dies.

  Linux sends the signal when the *thread* that started the child ends: start workers from
  a thread that lives as long as they should (e.g. the main thread).
  """

  def __init__(self, args, **kwargs):
    if sys.platform.startswith('linux'):
      kwargs.setdefault('preexec_fn', _die_with_parent)
    super().__init__(args, **kwargs)


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
  """The command line of process `pid` ('' if it is gone)."""
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return f.read().replace(b'\0', b' ').decode(errors='replace')
  except OSError:
    return ''


def local_worker_pids() -> list[int]:
  """Pids of TFF `worker_binary` processes started by this process."""
  if not os.path.isdir('/proc'):
    return []
  return [pid for pid in _children_of(os.getpid()) if WORKER_BINARY_NAME in command_line(pid)]


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


@contextlib.contextmanager
def stopping_local_workers() -> Iterator[None]:
  """Stops this process's TFF workers when the `with` block ends."""
  try:
    yield
  finally:
    stop_local_workers()


def mute_tff_shutdown_noise() -> None:
  """For binaries: mute the ignored `AttributeError` of TFF's `ServiceManager.__del__`.

  At interpreter shutdown the `__del__` of TFF's default local context finds the
  `subprocess` module already torn down and prints an ignored exception with its traceback
  (after every run, flag error or `--helpfull` of a program that imports TFF); its worker is
  gone by then. Only that message is muted; calling this twice changes nothing more.
  """
  default_hook = sys.unraisablehook
  if getattr(default_hook, '_mutes_tff_shutdown_noise', False):
    return

  def hook(unraisable):
    name = getattr(unraisable.object, '__qualname__', '')
    if name.endswith('ServiceManager.__del__'):
      return
    default_hook(unraisable)

  hook._mutes_tff_shutdown_noise = True  # type: ignore[attr-defined]  # Seen by a 2nd call.
  sys.unraisablehook = hook


def _stop_workers_at_exit() -> None:
  """The atexit hook: stop the workers (TFF's shutdown noise muted, see above)."""
  stop_local_workers()
  mute_tff_shutdown_noise()


def _stop_workers_then_die(signum, frame):
  """SIGTERM/SIGHUP: stop the workers, then die of the same signal (default action).

  Raising SystemExit here instead could be swallowed when the signal lands inside a
  `__del__` or a gc callback, leaving the process running.
  """
  del frame
  stop_local_workers()
  signal.signal(signum, signal.SIG_DFL)
  os.kill(os.getpid(), signum)


_registered: list[bool] = []


def stop_workers_at_exit() -> None:
  """Stops this process's TFF workers when it exits (once, however often it is called).

  The package's builders (`tff_flare.build_*`) call it: a script or notebook that runs their
  processes leaves no `worker_binary` behind holding its output, and TFF's shutdown noise is
  muted.
  """
  if not _registered:
    atexit.register(_stop_workers_at_exit)
    _registered.append(True)


# The event of the `noting_interrupts` block running under a binary's Ctrl-C handler: the
# handler's first Ctrl-C sets it (the loop then stops after its round and a checkpoint).
_stop_after_round: list[threading.Event] = []


@contextlib.contextmanager
def noting_interrupts() -> Iterator[threading.Event]:
  """Yields an event that Ctrl-C (SIGINT) sets while the block runs (the loop checks it
  between rounds, `hooks.StopOnInterrupt`). Only on the main thread:

  * under Python's default handler (a terminal, a notebook), the `KeyboardInterrupt` is
    raised as usual too, and the event catches one that TensorFlow swallowed;
  * under a binary's handler (`install_process_cleanup`), the first Ctrl-C only sets the
    event: the run stops after the round it is in, with that round checkpointed; a second
    stops it at once;
  * under any other handler (a notebook's own, say) it is left alone; the event stays unset.

  The handler before is restored on exit."""
  noted = threading.Event()
  if threading.current_thread() is not threading.main_thread():
    yield noted
    return
  if getattr(signal.getsignal(signal.SIGINT), 'stops_after_round', False):
    _stop_after_round.append(noted)
    try:
      yield noted
    finally:
      _stop_after_round.remove(noted)
    return
  if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
    yield noted
    return

  def note_then_raise(signum, frame):
    noted.set()
    signal.default_int_handler(signum, frame)

  signal.signal(signal.SIGINT, note_then_raise)
  try:
    yield noted
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def exit_interrupted(message: str) -> None:
  """Stops this process's TFF workers, writes `message` on stderr and exits 130 at once (a
  `KeyboardInterrupt` raised while TFF's synchronous context waits for a computation would
  leave the interpreter hung at exit)."""
  stop_local_workers()
  try:
    sys.stdout.flush()
    sys.stderr.write(f'\n{message}\n')
    sys.stderr.flush()
  finally:
    os._exit(130)  # pylint: disable=protected-access


def install_process_cleanup(interrupt_message: str = 'Interrupted.') -> None:
  """For binaries: stop TFF workers at exit, on SIGTERM/SIGHUP, and on Ctrl-C.

  Ctrl-C while a run's rounds go on (`noting_interrupts`) stops it after the round it is in,
  once that round is checkpointed (a line says so); a second Ctrl-C, or one at any other time,
  prints `interrupt_message` (e.g. how to resume) and exits at once with status 130
  (`exit_interrupted`). Nothing a resume needs is lost either way: checkpoints are written to
  a temporary directory and renamed into place; a stop at once loses the rounds since the
  last checkpoint. Call it from the main thread.
  """

  def on_ctrl_c(signum, frame):
    del signum, frame
    pending = [event for event in _stop_after_round if not event.is_set()]
    if pending:
      for event in pending:
        event.set()
      sys.stderr.write('\nCtrl-C: stopping after this round, once it is checkpointed (Ctrl-C '
                       'again stops at once, losing the rounds since the last checkpoint).\n')
      sys.stderr.flush()
      return
    exit_interrupted(interrupt_message)

  on_ctrl_c.stops_after_round = True  # type: ignore[attr-defined]  # Seen by noting_interrupts.
  stop_workers_at_exit()
  handlers = {
      signal.SIGTERM: _stop_workers_then_die,
      signal.SIGHUP: _stop_workers_then_die,
      signal.SIGINT: on_ctrl_c
  }
  for signum, handler in handlers.items():
    signal.signal(signum, handler)
