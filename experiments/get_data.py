r"""Fetches every data set of the tasks and the papers' figures into one data directory.

  python -m experiments.get_data                       # into data/ (the binaries' default)
  python -m experiments.get_data --data_dir=/big/disk/tff_flare_data --datasets=mnist

Through the real loaders (they download on first use, into their own caches), written as the
files the local sources read (`tff_flare/tasks/data_sources.py`, `DATA_FILES`):

  mnist        tf.keras.datasets.mnist.load_data()     -> mnist.npz (Keras layout and order)
  cifar10      tf.keras.datasets.cifar10.load_data()   -> cifar10.npz, and
                                                          cifar10_imagefolder.tar.gz (PNG)
  cifar100     tf.keras.datasets.cifar100.load_data()  -> cifar100.npz
  shakespeare  tfds.load('tiny_shakespeare')           -> tinyshakespeare.txt (the play, whole)
               and TFF's LEAF Shakespeare into the directory's cache (source `tff`)

Every binary and `reproduce` read this directory (`--data_dir`, default `data/`). A file that
is there already is kept (`--overwrite` fetches it again). The committed runs used offline
copies (MNIST's pixels exactly; CIFAR-10 re-encoded as JPEG, so its figures come out a
little different from runs on these lossless PNG images).

Exit status: 0 done; 2 bad flags or a loader that failed (no internet, say: the message
names the loader).
"""

import io
import os
import pathlib
import shutil
import socket
import tarfile
import urllib.parse

from absl import flags
import numpy as np

from experiments import binary
from tff_flare.simulation import files
from tff_flare.tasks import data_sources

DATASETS = ('mnist', 'cifar10', 'cifar100', 'shakespeare')
CIFAR10_CLASSES = ('airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship',
                   'truck')

_DATA_DIR = binary.path_flag(
    flags.DEFINE_string('data_dir', data_sources.DEFAULT_DATA_DIR, 'Where the data sets go.'))
_DATASETS = flags.DEFINE_list('datasets', list(DATASETS), 'Which: ' + ', '.join(DATASETS) + '.')
_OVERWRITE = flags.DEFINE_bool('overwrite', False, 'Fetch the files that are there again.')


def _keras_arrays(name: str):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    return getattr(tf.keras.datasets, name).load_data()
  except Exception as e:  # pylint: disable=broad-except
    raise binary.BadInput(f'tf.keras.datasets.{name}.load_data() failed ({type(e).__name__}: '
                          f'{binary.one_line(e)[:200]}); it needs the internet once.') from e


def write_npz(path: pathlib.Path, arrays) -> None:
  (x_train, y_train), (x_test, y_test) = arrays
  buffer = io.BytesIO()
  np.savez(buffer, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
  files.write_file(path, buffer.getvalue())


def write_imagefolder(path: pathlib.Path, arrays, classes) -> None:
  """A `.tar.gz` of `train/<class>/<n>.png` and `test/<class>/<n>.png` (lossless)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode='w:gz') as archive:
    for split, (x, y) in zip(('train', 'test'), arrays):
      for index, (image, label) in enumerate(zip(x, np.asarray(y).reshape(-1))):
        data = tf.io.encode_png(image).numpy()
        info = tarfile.TarInfo(f'{split}/{classes[int(label)]}/{index:05d}.png')
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
  files.write_file(path, buffer.getvalue())


def check_reachable(loader: str, urls, timeout_s: float = 10.0) -> None:
  """Refuses, within `timeout_s`, to start a loader whose download hosts cannot be reached.

  TFDS retries a download it cannot make for minutes (211 s offline, as issue 42 reports) before it
  fails; a connection to each host first says the same in seconds. Skipped behind a proxy
  (`https_proxy` and the like), which the loaders use and a plain connection does not.

  Raises:
    binary.BadInput: a host that does not resolve or answer.
  """
  if any(
      os.environ.get(v) for v in ('https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY',
                                  'all_proxy', 'ALL_PROXY')):
    return
  for host in sorted({urllib.parse.urlparse(url).hostname for url in urls} - {None}):
    try:
      socket.create_connection((host, 443), timeout=timeout_s).close()
    except OSError as e:
      raise binary.BadInput(f'{loader} needs the internet once, and {host} cannot be reached '
                            f'({binary.one_line(e)[:120]}).') from e


def write_play(path: pathlib.Path) -> None:
  """The whole of TFDS's `tiny_shakespeare` (its three splits are one text cut in three)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  tfds_dir = path.parent / 'tfds'
  made = not tfds_dir.exists()
  loader = "tfds.load('tiny_shakespeare')"
  try:
    builder = tfds.builder('tiny_shakespeare', data_dir=str(tfds_dir))
    if not builder.is_prepared():
      check_reachable(loader, builder.url_infos or ())
    splits = tfds.load('tiny_shakespeare',
                       split=['train', 'validation', 'test'],
                       data_dir=str(tfds_dir))
    text = ''.join(example['text'].decode() for split in splits for example in tfds.as_numpy(split))
  except Exception as e:  # pylint: disable=broad-except
    if made:  # What a failed download leaves (its temporary and incomplete folders).
      shutil.rmtree(tfds_dir, ignore_errors=True)
    if isinstance(e, binary.BadInput):
      raise
    raise binary.BadInput(f'{loader} failed ({type(e).__name__}: '
                          f'{binary.one_line(e)[:200]}); it needs the internet once.') from e
  files.write_file(path, text)


def _damage(name: str, source: str, path: pathlib.Path) -> str | None:
  """Why a file that is there cannot be read as the tasks read it (a download cut short,
  say), or None."""
  try:
    if source == 'text':
      if not files.read_text(path):
        return 'empty'
    else:
      data_sources.load_images(name, source, str(path))
  except (data_sources.DataSourceError, OSError, UnicodeDecodeError) as e:
    return binary.one_line(e)[:200]
  return None


def fetch(name: str, data_dir: pathlib.Path, overwrite: bool, log=print) -> list[pathlib.Path]:
  """Writes data set `name`'s files into `data_dir`; returns them."""
  targets = {
      source: data_dir / file
      for (dataset, source), file in data_sources.DATA_FILES.items()
      if dataset == name
  }
  wanted = {s: p for s, p in targets.items() if overwrite or not p.exists()}
  for source, path in targets.items():
    if source in wanted:
      continue
    damage = _damage(name, source, path)
    if damage:
      log(f'{name}: {path} is there but damaged ({damage}); fetched again')
      wanted[source] = path
    else:
      log(f'{name}: {path} is there already, kept')
  if name in ('mnist', 'cifar10', 'cifar100') and wanted:
    arrays = _keras_arrays(name)
    if 'npz' in wanted:
      write_npz(wanted['npz'], arrays)
    if 'imagefolder' in wanted:
      write_imagefolder(wanted['imagefolder'], arrays, CIFAR10_CLASSES)
  elif name == 'shakespeare':
    if 'text' in wanted:
      write_play(wanted['text'])
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    try:
      tff.simulation.datasets.shakespeare.load_data(cache_dir=str(data_dir))
    except Exception as e:  # pylint: disable=broad-except
      raise binary.BadInput(f'tff.simulation.datasets.shakespeare.load_data() failed '
                            f'({type(e).__name__}: {binary.one_line(e)[:200]}).') from e
  for path in wanted.values():
    log(f'{name}: wrote {path} ({os.path.getsize(path):,} bytes)')
  return list(targets.values())


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  unknown = [d for d in _DATASETS.value if d not in DATASETS]
  if unknown:
    raise binary.BadInput(f'Unknown data sets {unknown}; known: {", ".join(DATASETS)}.')
  data_dir = pathlib.Path(_DATA_DIR.value)
  try:
    data_dir.mkdir(parents=True, exist_ok=True)
  except OSError as e:
    raise binary.BadInput(f'--data_dir={data_dir} cannot be made: {e.strerror or e}.') from e
  for name in _DATASETS.value:
    fetch(name, data_dir, _OVERWRITE.value)
  return 0


if __name__ == '__main__':
  binary.run(main)
