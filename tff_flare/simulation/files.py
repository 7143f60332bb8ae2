"""The one way this project writes a file it owns: never through a link, never half-written;
and the one way it reads one: never from a pipe or a device, where a read would wait forever.

    files.write_file(output / 'summary.json', text, within=output)
    files.read_text(output / 'summary.json')

The file is written to a new temporary name beside it (created exclusively, not following a
link) and renamed over the target, so a reader sees the old file or the new one, never part
of one, and a crash leaves the old file. A link at the target, or a folder between `within`
and the target that is a link, is refused: the writer would write where it was not told to.
Runs, checkpoints' indexes, the results page, figures and plots all write through here.
"""

import io
import os
import pathlib
import stat


class LinkedPathError(ValueError):
  """A file to write that is, or lies under, a symbolic link."""


def check_no_link(path: os.PathLike | str, within: os.PathLike | str | None = None) -> None:
  """Refuses `path` if it, or a folder between `within` (default: its own folder) and it, is
  a symbolic link.

  Raises:
    LinkedPathError: naming the link.
  """
  path = pathlib.Path(path)
  top = pathlib.Path(within) if within is not None else path.parent
  entries = [path] + [p for p in path.parents if p != top and top in p.parents]
  for entry in entries:
    if entry.is_symlink():
      raise LinkedPathError(f'{entry} is a symbolic link: this project writes only files it '
                            f'makes, where it was told to. Remove the link.')


class NotAFileError(OSError):
  """A path to read that is a pipe, a socket, a device or a folder, not a regular file."""


def _refuse_if_not_a_file(mode: int, path: os.PathLike | str) -> None:
  if stat.S_ISDIR(mode):
    raise NotAFileError(f'{path} is a folder, not a file.')
  if not stat.S_ISREG(mode):
    raise NotAFileError(f'{path} is a pipe, a socket or a device, not a file (a read of it '
                        'may never end).')


def check_file(path: os.PathLike | str) -> None:
  """Refuses a `path` that exists and is not a regular file (before a library reads it by
  name, e.g. `np.load`).

  Raises:
    NotAFileError: naming it.
  """
  try:
    mode = os.stat(path).st_mode
  except FileNotFoundError:
    return
  _refuse_if_not_a_file(mode, path)


def read_bytes(path: os.PathLike | str) -> bytes:
  """The content of the regular file `path`; opening does not wait on a pipe.

  Raises:
    NotAFileError: a pipe, socket, device or folder.
    OSError: it cannot be read (FileNotFoundError where it does not exist).
  """
  descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
  try:
    _refuse_if_not_a_file(os.fstat(descriptor).st_mode, path)
    os.set_blocking(descriptor, True)
    stream = os.fdopen(descriptor, 'rb')
  except BaseException:
    os.close(descriptor)
    raise
  with stream:
    return stream.read()


def read_text(path: os.PathLike | str) -> str:
  """`read_bytes` decoded as UTF-8 (`UnicodeDecodeError` where it is not)."""
  return read_bytes(path).decode()


def write_file(path: os.PathLike | str,
               content: str | bytes,
               within: os.PathLike | str | None = None) -> None:
  """Writes `content` (text as UTF-8) to `path` whole (see the module docstring).

  Raises:
    LinkedPathError: `check_no_link` refuses the path.
    OSError: the file cannot be written (nothing of it is left).
  """
  path = pathlib.Path(path)
  check_no_link(path, within)
  data = content.encode() if isinstance(content, str) else content
  temporary = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
  descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
  try:
    with os.fdopen(descriptor, 'wb') as stream:
      stream.write(data)
    os.replace(temporary, path)
  except BaseException:
    temporary.unlink(missing_ok=True)
    raise


def write_figure(figure,
                 path: os.PathLike | str,
                 dpi: int,
                 within: os.PathLike | str | None = None) -> None:
  """Writes a matplotlib figure as PNG through `write_file`."""
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png', dpi=dpi)
  write_file(path, buffer.getvalue(), within)
