"""What every binary of `experiments/` shares: one-line errors, one exit status per kind.

  binary.run(main)        # instead of absl's app.run(main)

* A flag error prints one line (`error: ...`) and exits 2, before any work.
* An exception of a kind in `EXIT_STATUS`, raised by `main`, prints `error: <message>` as one
  line and exits with its status: 2 bad input (flags, data, a configuration that does not
  fit the run directory), 3 a TFF worker unreachable, 4 non-finite training or evaluation,
  5 a file that cannot be read or written (a full disk, a file size limit, permissions).
* TFF's local context prints an ignored `AttributeError` from `ServiceManager.__del__` at
  every interpreter exit (its `subprocess` module is already gone); a binary mutes that one
  message (`cleanup.mute_tff_shutdown_noise`).
* Once `main` has returned or reported its error, the interpreter's shutdown writes nothing
  more on stderr: native libraries can print there as their threads meet closed descriptors
  (gRPC's `Kick failed: eventfd_write: Bad file descriptor`), a line after the one line.
  An error of a kind not in `EXIT_STATUS` keeps its traceback (stderr is muted only after).
* Ctrl-C exits 130 with a line (`cleanup.install_process_cleanup`, which `main` calls with
  the resume advice): while a run's rounds go on, after the round it is in and that round's
  checkpoint (a second Ctrl-C: at once); during the imports before it,
  `experiments/__init__.py` exits at once.
"""

import os
import sys
from collections.abc import Callable, Iterable

from absl import app
from absl import flags
from absl import logging

from tff_flare.execution import cleanup
from tff_flare.execution import remote
from tff_flare.experiment import config as config_lib
from tff_flare.simulation import files
from tff_flare.simulation import hooks
from tff_flare.tasks import data_sources

BAD_INPUT, WORKER_UNAVAILABLE, NON_FINITE, CANNOT_WRITE, INTERRUPTED = 2, 3, 4, 5, 130
# The data directory the binaries read by default (`python -m experiments.get_data` fills it),
# relative to where they run: the repository's root.
DEFAULT_DATA_DIR = data_sources.DEFAULT_DATA_DIR


class BadInput(Exception):
  """A binary's own bad input (a missing run directory for the plot, say): exit 2."""


# The one mapping of errors to exit statuses (first match wins).
EXIT_STATUS = (
    (BadInput, BAD_INPUT),
    (config_lib.ConfigError, BAD_INPUT),
    (data_sources.DataSourceError, BAD_INPUT),
    (files.LinkedPathError, BAD_INPUT),
    (remote.WorkerUnavailableError, WORKER_UNAVAILABLE),
    (hooks.NonFiniteRoundError, NON_FINITE),
    (hooks.NonFiniteEvaluationError, NON_FINITE),
    (OSError, CANNOT_WRITE),  # Checkpoints' `SaveError` among them.
)


def one_line(error: BaseException) -> str:
  """The error's message on one line (TF's node text and tracebacks cut)."""
  text = ' '.join(str(error).split())
  for cut in (' Detected at node', ' [[{{node', ' Traceback'):
    if cut in text:
      text = text[:text.index(cut)]
  return text or type(error).__name__


def exit_status(error: BaseException) -> int | None:
  for kind, status in EXIT_STATUS:
    if isinstance(error, kind):
      return status
  return None


def report(error: BaseException) -> int:
  """Prints `error: <message>` on stderr; returns its exit status (re-raises unknown ones)."""
  status = exit_status(error)
  if status is None:
    raise error
  print(f'error: {one_line(error)}', file=sys.stderr, flush=True)
  return status


def each_one_of(flag: flags.FlagHolder, known: Iterable[str] | Callable[[str], bool],
                what: str) -> None:
  """Each value of list `flag` must be in `known` (or pass it, a predicate): else a flag
  error, one line and exit 2 before any work. `what` names what it takes, for the message."""
  if callable(known):
    accepts = known
  else:
    known = tuple(known)
    accepts = known.__contains__
  flags.register_validator(flag,
                           lambda values: all(accepts(value) for value in values),
                           message=f'--{flag.name} takes {what}')


_PATH_FLAGS: list[flags.FlagHolder] = []


def path_flag(holder: flags.FlagHolder) -> flags.FlagHolder:
  """Marks a binary's flag as a path: `run` refuses one the system would refuse by its form
  (`config.check_path_form`: too long a name or path) in one line, before any work."""
  _PATH_FLAGS.append(holder)
  return holder


HELP_FLAGS = ('--help', '-help', '-h', '-?', '--helpshort', '-helpshort')


def usage() -> str:
  """The binary's docstring and its own flags, each with its help and default (absl's
  `--helpfull` lists every module's)."""
  doc = (sys.modules['__main__'].__doc__ or '').strip()
  listed = [
      line for line in flags.FLAGS.main_module_help().splitlines()
      if line.strip() and not line.endswith('.py:')
  ]  # Not the module's path.
  return f'{doc}\n\nFlags (--helpfull: every module\'s):\n\n' + '\n'.join(listed) + '\n'


def _flag_files(args: Iterable[str]) -> list[str]:
  """The files `--flagfile=F` (or `--flagfile F`) of `args` name, as absl reads them."""
  args = list(args)
  files_named = []
  for i, arg in enumerate(args):
    name, equals, value = arg.lstrip('-').partition('=')
    if arg.startswith('-') and name == 'flagfile':
      if equals:
        files_named.append(value)
      elif i + 1 < len(args):
        files_named.append(args[i + 1])
  return files_named


def check_flag_files(argv: list[str]) -> None:
  """Refuses a flag file that is not a regular file (a pipe would block absl's read forever),
  at any depth of flag files naming flag files.

  Raises:
    flags.Error: naming the file.
  """
  seen: set[str] = set()
  pending = _flag_files(argv[1:])
  while pending:
    path = pending.pop()
    if path in seen:
      continue
    seen.add(path)
    if os.path.exists(path) and not os.path.isfile(path):
      raise flags.Error(f'--flagfile={path} is not a file (a folder, a pipe or a device?).')
    if os.path.isfile(path):
      with open(path, encoding='utf-8', errors='replace') as f:
        pending += _flag_files(line.strip() for line in f)


def _parse_flags(argv: list[str]) -> list[str]:
  if any(arg in HELP_FLAGS for arg in argv[1:]):
    sys.stdout.write(usage())
    sys.exit(0)
  try:
    check_flag_files(argv)
    return flags.FLAGS(argv)
  except flags.Error as e:
    # absl's flag-file errors begin 'ERROR:: ' of their own: one 'error:' a line.
    message = one_line(e).removeprefix('ERROR:: ')
    print(f'error: {message} (--helpfull lists the flags)', file=sys.stderr, flush=True)
  except UnicodeDecodeError as e:  # A --flagfile that is not UTF-8 text.
    print(f'error: a flag file is not UTF-8 text ({e.reason} at byte {e.start}).',
          file=sys.stderr,
          flush=True)
  mute_stderr_for_shutdown()
  sys.exit(BAD_INPUT)


def mute_stderr_for_shutdown() -> None:
  """Points file descriptor 2 at /dev/null (what is written so far is flushed first): for
  the interpreter's shutdown, after a binary's last own line."""
  sys.stdout.flush()
  sys.stderr.flush()
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
  finally:
    os.close(devnull)


def run(main: Callable[[list[str]], int | None]) -> None:
  """`app.run(main)` with this module's error handling (see the module docstring)."""
  cleanup.mute_tff_shutdown_noise()

  def main_with_statuses(argv):
    if not flags.FLAGS['verbosity'].present:  # TFF's and Keras's INFO lines are noise here.
      logging.set_verbosity(logging.WARNING)
    try:
      for holder in _PATH_FLAGS:
        if holder.value:
          config_lib.check_path_form(holder.value, f'--{holder.name}')
      status = main(argv)
    except KeyboardInterrupt as e:  # A run stopped between rounds (`hooks.StopOnInterrupt`).
      cleanup.exit_interrupted(str(e) or 'Interrupted.')
    except Exception as e:  # pylint: disable=broad-except
      status = report(e)
    mute_stderr_for_shutdown()
    return status

  app.run(main_with_statuses, flags_parser=_parse_flags)
