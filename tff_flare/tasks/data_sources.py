"""Where the data of both studies comes from: the real public loaders first, local files second.

Image data sets (MNIST, CIFAR-10, CIFAR-100) come back as `ImageArrays` (uint8 pixels
[N, H, W, C], int64 labels [N]) from one of four sources:

* `'keras'` (default): `tf.keras.datasets.<name>.load_data()`, the authors' loaders: their
  example order, and so the authors' contiguous clients (`docs/faithfulness.md` R11). It
  downloads the data for a user with internet, or reads Keras's cache (`~/.keras/datasets`).
* `'tfds'`: `tfds.load(name)` (or a prepared `data_dir`). TFDS writes its records in another
  order than Keras, so contiguous clients are not the authors' clients.
* `'npz'`: a Keras-layout `.npz` file (`x_train`, `y_train`, `x_test`, `y_test`) in Keras
  order, such as `../shared/datasets/mnist.npz`: the same arrays as `'keras'`, offline;
* `'imagefolder'`: a directory, or a `.tar.gz` of one, laid out as `train/<class>/*` and
  `test/<class>/*` (label = position of the class in sorted order; CIFAR-10's class names sort
  into its label order), such as `../shared/datasets/cifar10_imagefolder.tar.gz`; each split
  is shuffled with a fixed seed (folders are class-sorted; the binary releases are not). Decoded
  arrays are cached as an `.npz` in the cache directory (`$TFF_FLARE_CACHE`, else
  `~/.cache/tff_flare`), keyed by the content (every image); a cache that cannot be written
  is skipped.

Shakespeare comes back as (train, test) `ClientData` of `snippets` strings, one client per
speaking role, from `'tff'` (`tff.simulation.datasets.shakespeare.load_data`, LEAF's data) or
`'text'` (a plain-text play file, `NAME:` lines followed by the speech, split per speaker; see
`split_play_by_speaker`).

A missing or malformed file raises `DataSourceError` naming it.
"""

import collections
import contextlib
from collections.abc import Iterable, Sequence
import dataclasses
import hashlib
import os
import pathlib
import re
import tarfile
import tempfile
import zipfile
import zlib

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tensorflow_federated as tff

from tff_flare.simulation import files
from tff_flare.tasks import partitions

IMAGE_DATASETS = {'mnist': (28, 28, 1), 'cifar10': (32, 32, 3), 'cifar100': (32, 32, 3)}
NUM_CLASSES = {'mnist': 10, 'cifar10': 10, 'cifar100': 100}
IMAGE_SOURCES = ('keras', 'tfds', 'npz', 'imagefolder')
TEXT_SOURCES = ('tff', 'text')
DEFAULT_CACHE_DIR = pathlib.Path.home() / '.cache' / 'tff_flare'
# The data directory a local source reads when no file is named: `data/` where the program
# runs (the repository's root); `python -m experiments.get_data` fills it with these files.
DEFAULT_DATA_DIR = 'data'
DATA_FILES = {
    ('mnist', 'npz'): 'mnist.npz',
    ('cifar10', 'npz'): 'cifar10.npz',
    ('cifar100', 'npz'): 'cifar100.npz',
    ('cifar10', 'imagefolder'): 'cifar10_imagefolder.tar.gz',
    ('shakespeare', 'text'): 'tinyshakespeare.txt'
}


def default_path(name: str, source: str, data_dir: str | None = None) -> str | None:
  """The file of data set `name` for a local `source` in the data directory (`data_dir`,
  default `DEFAULT_DATA_DIR`); None where there is none."""
  file = DATA_FILES.get((name, source))
  return None if file is None else str(pathlib.Path(data_dir or DEFAULT_DATA_DIR) / file)


# The sources that read a path of one's own (`--data_path`): a file or folder of the data
# set, or (tff) TFF's cache folder.
PATH_SOURCES = ('npz', 'imagefolder', 'text', 'tff')


def _reads(source: str, path: pathlib.Path) -> bool:
  """Whether `source` reads a path named as `path` is (by its name, or a folder)."""
  if source == 'npz':
    return path.name.lower().endswith('.npz')
  if source == 'imagefolder':
    return path.is_dir() or path.name.lower().endswith(('.tar.gz', '.tgz', '.tar'))
  if source == 'tff':
    return path.is_dir()
  return source == 'text' and not path.is_dir()


def check_paths_read(readers: Sequence[str], source: str | None, data_dir: str | None,
                     data_path: str | None) -> None:
  """Refuses a path given beside a source that would ignore it, from the settings alone (no
  file is looked at: a run's validation calls it before anything runs).

  Args:
    readers: the sources of the data set that read a `data_path` (npz, imagefolder; text, tff).

  Raises:
    DataSourceError: a `data_path` beside a source that reads none, or a `data_dir` beside
      keras (which downloads to its own cache).
  """
  if data_path is not None and source is not None and source not in PATH_SOURCES:
    raise DataSourceError(f'data_path={data_path} is read by {" or ".join(readers)}, not by '
                          f'source={source}, which would ignore it.')
  if data_dir is not None and source == 'keras':
    raise DataSourceError(f'data_dir={data_dir} is not read by source=keras, which '
                          "downloads to Keras's own cache: name a source that reads it "
                          f'({" or ".join([*readers, "tfds"])}), or leave it out.')


def choose_source(name: str,
                  source: str | None,
                  data_dir: str | None,
                  default: str,
                  data_path: str | None = None) -> str:
  """The source to read data set `name` from: `source` when given; else the source that
  reads `data_path` (a `.npz`: npz; a folder or a `.tar.gz`: imagefolder; Shakespeare: a file
  text, a folder TFF's cache); else, when a data directory is named, the local source whose
  file of `name` it holds (`DATA_FILES`; a user who names a file or the data directory
  expects it read, not a download: an image data set's directory without one is refused);
  else `default`.

  Raises:
    DataSourceError: a `data_path` that no source of `name` reads, or a `data_path` or
      `data_dir` given beside a source that does not read it (it would be ignored).
  """
  readers = [
      s for s in PATH_SOURCES if s in (TEXT_SOURCES if name == 'shakespeare' else IMAGE_SOURCES)
  ]
  if data_path is not None and source is None:
    for candidate in readers:
      if _reads(candidate, pathlib.Path(data_path)):
        return candidate
    raise DataSourceError(f'Which source reads data_path={data_path}? Name its '
                          f'source ({" or ".join(readers)}).')
  check_paths_read(readers, source, data_dir, data_path)
  if source is not None:
    return source
  if data_dir is not None:
    named = {s: file for (data_set, s), file in DATA_FILES.items() if data_set == name}
    for local_source, file in named.items():
      if (pathlib.Path(data_dir) / file).is_file():
        return local_source
    if default == 'keras':  # The download would not read the directory named.
      raise DataSourceError(
          f'data_dir={data_dir} holds no file of {name} '
          f'({", ".join(named.values()) or "none is fetched for it"}): python -m '
          f'experiments.get_data --data_dir={data_dir} fetches them; or name a source.')
  return default


class DataSourceError(ValueError):
  """A data file is missing or malformed, or a source name is unknown."""


@dataclasses.dataclass
class ImageArrays:
  """A centralized image data set.

  Attributes:
    x_train: uint8 [N, H, W, C] pixels.
    y_train: int64 [N] labels.
    x_test: uint8 [M, H, W, C].
    y_test: int64 [M].
  """

  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray

  @property
  def fingerprint(self) -> str:
    """What identifies the data by content (`fingerprint` of the four arrays)."""
    return fingerprint(self.x_train, self.y_train, self.x_test, self.y_test)


# A fingerprint of datasets that differ from one pass to the next (a shuffle, a random map).
VARYING = 'varies'


def fingerprint_datasets(named: Iterable[tuple[str, tf.data.Dataset]]) -> str:
  """A content hash (16 hex digits) of named datasets: each name, then every element's leaves
  (dtype, shape and bytes), in order; `VARYING` when the first nonempty one gives other
  elements on a second pass (it is shuffled or randomly mapped: no resume can check it).

  Every element is read once, so this is also where data a model cannot train on is found:

  Raises:
    DataSourceError: a floating-point value that is NaN or infinite (naming the dataset).
  """

  def update(digest, name: str, dataset: tf.data.Dataset) -> bool:
    seen = False
    for element in dataset.as_numpy_iterator():
      seen = True
      for leaf in tf.nest.flatten(element):
        leaf = np.asarray(leaf)
        if leaf.dtype == object:  # Strings.
          digest.update(repr(leaf.tolist()).encode())
          continue
        if np.issubdtype(leaf.dtype, np.inexact) and not np.all(np.isfinite(leaf)):
          raise DataSourceError(
              f'The data of {name!r} hold NaN or infinite values ({leaf.dtype} of shape '
              f'{leaf.shape}): a model trained or evaluated on them is not a number.')
        digest.update(f'{leaf.dtype.str}{leaf.shape}'.encode())
        digest.update(np.ascontiguousarray(leaf).data)
    return seen

  digest = hashlib.blake2b(digest_size=8)
  checked = varying = False
  for name, dataset in named:
    digest.update(name.encode() + b'\0')
    if checked:
      update(digest, name, dataset)
      continue
    first, again = hashlib.blake2b(digest_size=8), hashlib.blake2b(digest_size=8)
    if update(first, name, dataset):
      update(again, name, dataset)
      varying = first.digest() != again.digest()
      checked = True
    digest.update(first.digest())
  return VARYING if varying else digest.hexdigest()


def fingerprint(*parts: np.ndarray | bytes) -> str:
  """A content hash (16 hex digits) of arrays (their dtype, shape and bytes) or bytes.

  A run records its data's fingerprint and a resume on other data is refused
  (`experiment/runner.py`): a file replaced at the same path changes it, a file moved does not.
  """
  digest = hashlib.blake2b(digest_size=8)
  for part in parts:
    if isinstance(part, np.ndarray):
      digest.update(f'{part.dtype.str}{part.shape}'.encode())
      digest.update(np.ascontiguousarray(part).data)
    else:
      digest.update(part)
  return digest.hexdigest()


def load_images(name: str,
                source: str = 'keras',
                path: str | None = None,
                data_dir: str | None = None) -> ImageArrays:
  """Loads an image data set from `source` (see the module docstring).

  Args:
    name: 'mnist', 'cifar10' or 'cifar100'.
    source: one of `IMAGE_SOURCES`.
    path: the file or directory, for 'npz' and 'imagefolder' (default: its file in the data
      directory, `default_path`).
    data_dir: the data directory: TFDS's, for 'tfds' (None: TFDS's default); where a local
      source's file is when no `path` is given (None: `DEFAULT_DATA_DIR`).

  Raises:
    DataSourceError: unknown name or source, missing or malformed file.
  """
  if name not in IMAGE_DATASETS:
    raise DataSourceError(f'Unknown image data set {name!r}; known: {sorted(IMAGE_DATASETS)}.')
  if source == 'keras':
    arrays = _load_keras(name)
  elif source == 'tfds':
    arrays = _load_tfds(name, data_dir)
  elif source == 'npz':
    arrays = _load_npz(_existing(path or default_path(name, source, data_dir), source))
  elif source == 'imagefolder':
    arrays = _load_imagefolder(_existing(path or default_path(name, source, data_dir), source))
  else:
    raise DataSourceError(f'Unknown image source {source!r}; known: {list(IMAGE_SOURCES)}.')
  _check_images(arrays, IMAGE_DATASETS[name], NUM_CLASSES[name],
                f'{name} from {source} {path or ""}'.strip())
  return arrays


def _existing(path: str | None, source: str) -> pathlib.Path:
  if not path:
    raise DataSourceError(f"The '{source}' source needs a path (data_path).")
  return _checked(pathlib.Path(path))


def _checked(path: pathlib.Path) -> pathlib.Path:
  if not path.exists():
    raise DataSourceError(f'Data file {path} does not exist (`python -m experiments.get_data '
                          '--data_dir=<dir>` fetches the data sets; or give data_path).')
  if not (path.is_file() or path.is_dir()):  # A FIFO, socket or device would block a read.
    raise DataSourceError(f'{path} is neither a file nor a folder (a pipe or a device?): give '
                          'a data file.')
  return path


def _load_keras(name: str) -> ImageArrays:
  loader = getattr(tf.keras.datasets, name).load_data
  try:
    (x_train, y_train), (x_test, y_test) = loader()
  except Exception as e:  # pylint: disable=broad-except
    raise DataSourceError(
        f'tf.keras.datasets.{name}.load_data() failed ({type(e).__name__}: {str(e)[:200]}). '
        "Without internet, use source=npz with data_path=<a Keras-layout .npz file> (for "
        "MNIST) or source=imagefolder.") from e
  if x_train.ndim == 3:  # MNIST: [N, 28, 28] without the channel axis.
    x_train, x_test = x_train[..., None], x_test[..., None]
  return ImageArrays(x_train, y_train, x_test, y_test)


def _load_tfds(name: str, data_dir: str | None) -> ImageArrays:
  try:
    splits = tfds.load(name, split=['train', 'test'], as_supervised=True, data_dir=data_dir)
    (x_train, y_train), (x_test, y_test) = [_to_arrays(split) for split in splits]
  except Exception as e:  # pylint: disable=broad-except
    raise DataSourceError(
        f'tfds.load({name!r}) failed ({type(e).__name__}: {str(e)[:200]}). Without internet, '
        'give a prepared data_dir, or another source.') from e
  return ImageArrays(x_train, y_train, x_test, y_test)


def _to_arrays(dataset: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
  """All (image, label) pairs of a split as numpy arrays (read in chunks of 10,000)."""
  images, labels = [], []
  for x, y in tfds.as_numpy(dataset.batch(10_000)):
    images.append(x)
    labels.append(y)
  return np.concatenate(images), np.concatenate(labels).astype(np.int64)


def _load_npz(path: pathlib.Path) -> ImageArrays:
  try:
    data = np.load(path)
    if not isinstance(data, np.lib.npyio.NpzFile):
      raise DataSourceError(f'{path} holds one numpy array, not an .npz archive of the '
                            'Keras-layout arrays x_train, y_train, x_test, y_test.')
    with data:
      missing = {'x_train', 'y_train', 'x_test', 'y_test'} - set(data.files)
      if missing:
        raise DataSourceError(f'{path} lacks the Keras-layout arrays {sorted(missing)} '
                              f'(it has {data.files}).')
      _check_declared_sizes(data, path)
      x_train, x_test = data['x_train'], data['x_test']
      y_train, y_test = data['y_train'], data['y_test']
  except DataSourceError:
    raise
  except ValueError as e:
    if 'pickled' in str(e):  # What np.load says of a file that is no numpy format at all.
      raise DataSourceError(f'{path} is not an .npz archive (not numpy\'s format at all: a '
                            'text or other file?).') from e
    raise DataSourceError(f'{path} is not a readable .npz file: {_one_line(e)}') from e
  except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as e:
    raise DataSourceError(f'{path} is not a readable .npz file (truncated or damaged? '
                          f'{type(e).__name__}: {_one_line(e)})') from e
  if x_train.ndim == 3:  # Keras MNIST: [N, 28, 28] without the channel axis.
    x_train, x_test = x_train[..., None], x_test[..., None]
  return ImageArrays(x_train, y_train, x_test, y_test)


def _check_declared_sizes(data: np.lib.npyio.NpzFile, path: pathlib.Path) -> None:
  """Refuses an array whose header declares more bytes than its member holds (a damaged or
  hostile file would otherwise make numpy allocate what the header says, petabytes even)."""
  for info in data.zip.infolist():
    with data.zip.open(info) as member:
      version = np.lib.format.read_magic(member)
      shape, _, dtype = np.lib.format._read_array_header(  # type: ignore[attr-defined]
          member, version)  # pylint: disable=protected-access
      declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
      if declared > info.file_size:
        raise DataSourceError(f'{path}: {info.filename} declares an array of shape {shape} '
                              f'({declared:,} bytes) but holds {info.file_size:,} bytes '
                              '(damaged?).')


def _one_line(error: BaseException) -> str:
  """The message on one line, without TF's `{{function_node ...}}` and `[[node ...]]` text."""
  text = re.sub(r'\{\{[^}]*\}\}|\[\[[^\]]*\]\]|\[Op:[^\]]*\]', '', str(error))
  return ' '.join(text.split())[:300]


IMAGEFOLDER_SHUFFLE_SEED = 0


def _load_imagefolder(path: pathlib.Path) -> ImageArrays:
  cache = _imagefolder_cache_path(path)
  if _exists(cache):
    try:
      files.check_file(cache)
      return _load_npz(cache)
    except (DataSourceError, files.NotAFileError):  # Damaged (a disk filled while it was
      with contextlib.suppress(OSError):  # written?), or not a file: built again.
        cache.unlink(missing_ok=True)
  if path.is_dir():
    arrays = _read_imagefolder(path)
  else:
    try:
      with tempfile.TemporaryDirectory() as tmp, tarfile.open(path) as archive:
        archive.extractall(tmp, filter='data')
        roots = [p for p in pathlib.Path(tmp).rglob('train') if p.is_dir()]
        if not roots:
          raise DataSourceError(f'{path} has no train/ folder.')
        arrays = _read_imagefolder(roots[0].parent)
    except (tarfile.TarError, EOFError, OSError) as e:
      raise DataSourceError(f'{path} is not a readable .tar.gz of an image folder: {e}') from e
  tmp_cache = cache.with_suffix('.tmp.npz')
  try:
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(tmp_cache,
             x_train=arrays.x_train,
             y_train=arrays.y_train,
             x_test=arrays.x_test,
             y_test=arrays.y_test)
    os.replace(tmp_cache, cache)
  except OSError:  # A cache that cannot be written (read-only, full, not a folder): the
    with contextlib.suppress(OSError):  # run goes on with the decoded arrays, and decodes
      tmp_cache.unlink(missing_ok=True)  # them again next time.
  return arrays


def _exists(path: pathlib.Path) -> bool:
  """Whether `path` exists; False where it cannot be looked at (a folder not readable)."""
  try:
    return path.exists()
  except OSError:
    return False


def _imagefolder_cache_path(path: pathlib.Path) -> pathlib.Path:
  """Where the decoded arrays of `path` are cached: keyed by its content (every file's name
  and bytes, for a folder), so an image added, removed or changed makes a new entry."""
  digest = hashlib.blake2b(digest_size=8)
  digest.update(f'shuffled{IMAGEFOLDER_SHUFFLE_SEED}'.encode())
  members = sorted(p for p in path.rglob('*') if p.is_file()) if path.is_dir() else [path]
  for file in members:
    digest.update(str(file.relative_to(path) if path.is_dir() else '').encode() + b'\0')
    with open(file, 'rb') as f:
      while chunk := f.read(1 << 20):
        digest.update(chunk)
  # An empty value is unset (pathlib would read it as the working directory).
  cache_dir = pathlib.Path(os.environ.get('TFF_FLARE_CACHE') or DEFAULT_CACHE_DIR)
  return cache_dir / f'{path.name}.{digest.hexdigest()}.npz'


def _read_imagefolder(root: pathlib.Path) -> ImageArrays:
  """Reads `root/train/<class>/*` and `root/test/<class>/*` (sorted class names)."""
  splits = {}
  classes = None
  for split in ('train', 'test'):
    directory = root / split
    if not directory.is_dir():
      raise DataSourceError(f'Image folder {root} has no {split}/ directory.')
    split_classes = sorted(p.name for p in directory.iterdir() if p.is_dir())
    if classes is None:
      classes = split_classes
    elif split_classes != classes:
      raise DataSourceError(f'{root}: train and test have different classes.')
    paths, labels = [], []
    for label, name in enumerate(classes):
      names = sorted((directory / name).iterdir())
      for image in names:  # TensorFlow's read of a pipe waits forever, deaf to signals.
        try:
          files.check_file(image)
        except files.NotAFileError as e:
          raise DataSourceError(f'{e} Image folders hold image files only.') from e
      paths += [str(f) for f in names]
      labels += [label] * len(names)
    splits[split] = (_decode_images(paths, directory), np.asarray(labels, np.int64))
  # Folders list the images class by class; a fixed shuffle gives the mixed order of the
  # binary releases / TFDS, so that contiguous client slices do not hold one or two classes.
  shuffled = []
  for split in ('train', 'test'):
    x, y = splits[split]
    order = np.random.default_rng(IMAGEFOLDER_SHUFFLE_SEED).permutation(len(y))
    shuffled += [x[order], y[order]]
  return ImageArrays(*shuffled)


def _decode_images(files: list[str], directory: pathlib.Path) -> np.ndarray:
  if not files:
    raise DataSourceError(f'{directory} holds no images (expected {directory}/<class>/<image '
                          'file>, e.g. PNG or JPEG).')
  dataset = tf.data.Dataset.from_tensor_slices(files).map(
      lambda f: tf.io.decode_image(tf.io.read_file(f), expand_animations=False),
      num_parallel_calls=tf.data.AUTOTUNE)
  try:
    return np.stack(list(dataset.as_numpy_iterator()))
  except (tf.errors.OpError, ValueError) as e:
    raise DataSourceError(
        _first_bad_image(files) or f'Could not decode the images under '
        f'{directory}: {_one_line(e)}') from e


def _first_bad_image(files: list[str]) -> str | None:
  """The message for the first file that does not decode to an image of the others' shape."""
  shape = None
  for file in files:
    try:
      image = tf.io.decode_image(tf.io.read_file(file), expand_animations=False)
    except (tf.errors.OpError, ValueError) as e:
      return f'{file} is not a decodable image ({_one_line(e)}).'
    if shape is None:
      shape = image.shape
    elif image.shape != shape:
      return f'{file} is a {image.shape} image; the images before it are {shape}.'
  return None


def _check_images(arrays: ImageArrays, shape: tuple[int, ...], num_classes: int, what: str) -> None:
  """Shapes, dtypes, finite pixels in [0, 255] (not all in (0, 1]: scaled already) and labels in
  [0, num_classes), per split."""
  for split in ('train', 'test'):
    x, y = getattr(arrays, f'x_{split}'), getattr(arrays, f'y_{split}')
    if y.ndim == 2 and y.shape[1] == 1:  # Keras's CIFAR layout, [N, 1].
      y = partitions.label_vector(y)
      setattr(arrays, f'y_{split}', y)
    if tuple(x.shape[1:]) != shape or len(x) != len(y) or y.ndim != 1:
      one_hot = y.ndim == 2 and y.shape[1] == num_classes
      raise DataSourceError(
          f'{what}: {split} images have shape {x.shape} and labels '
          f'{y.shape}; expected [N, {", ".join(map(str, shape))}] and [N]' +
          (' (one-hot labels? give class indices: their argmax).' if one_hot else '.'))
    if not len(y):
      raise DataSourceError(f'{what}: the {split} split is empty.')
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
      raise DataSourceError(f'{what}: {split} pixels are {x.dtype}, not numbers.')
    if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
      raise DataSourceError(f'{what}: {split} pixels hold NaN or Inf.')
    if x.min() < 0 or x.max() > 255:
      raise DataSourceError(f'{what}: {split} pixels range over [{x.min()}, {x.max()}]; '
                            'expected 0..255 (uint8 images; the tasks scale them to [0, 1]).')
    if 0 < x.max() <= 1:  # Already scaled: the tasks' division by 255 would flatten them.
      raise DataSourceError(f'{what}: {split} pixels range over [{x.min()}, {x.max()}], as if '
                            'already scaled to [0, 1]; expected 0..255 (uint8 images; the '
                            'tasks divide by 255). Multiply them by 255.')
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
      raise DataSourceError(f'{what}: {split} labels are {y.dtype}, not whole numbers.')
    if not np.issubdtype(y.dtype, np.integer):
      if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
        raise DataSourceError(f'{what}: {split} labels are not whole numbers.')
    if y.min() < 0 or y.max() >= num_classes:
      raise DataSourceError(f'{what}: {split} labels range over [{int(y.min())}, '
                            f'{int(y.max())}]; the model has {num_classes} classes '
                            f'(0..{num_classes - 1}).')
  arrays.y_train = arrays.y_train.astype(np.int64)
  arrays.y_test = arrays.y_test.astype(np.int64)


# --- Shakespeare --------------------------------------------------------------------------

_SPEAKER_LINE = re.compile(r"^([A-Z][A-Za-z' ,.&-]*[A-Za-z.]):\s*$")


def split_play_by_speaker(text: str,
                          test_fraction: float = 0.2
                         ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
  """Splits a play into speech turns grouped by speaker, then into train and test turns.

  A turn starts with a line `NAME:` and runs to the next blank line; its text is the speech
  lines joined with newlines. As in LEAF's Shakespeare, each speaker's turns are split in
  order (the last `test_fraction`, at least one, go to test) and speakers with fewer than two
  turns are left out, so every client has data in both splits.

  Returns:
    `(train, test)`, each `{speaker: [speech, ...]}` with the same speakers.
  """
  turns: dict[str, list[str]] = collections.defaultdict(list)
  speaker: str | None = None
  lines: list[str] = []
  for line in text.splitlines() + ['']:
    if speaker is None:
      match = _SPEAKER_LINE.match(line)
      if match:
        speaker, lines = match.group(1), []
    elif line.strip():
      lines.append(line)
    else:
      if lines:
        turns[speaker].append('\n'.join(lines))
      speaker = None
  train, test = {}, {}
  for name, speeches in turns.items():
    if len(speeches) < 2:
      continue
    num_test = max(1, int(round(test_fraction * len(speeches))))
    train[name], test[name] = speeches[:-num_test], speeches[-num_test:]
  return train, test


def load_shakespeare(
    source: str = 'tff',
    path: str | None = None,
    data_dir: str | None = None
) -> tuple[tff.simulation.datasets.ClientData, tff.simulation.datasets.ClientData]:
  """(train, test) `ClientData` of `OrderedDict(snippets=tf.string)`, one client per role.

  Args:
    source: 'tff' (TFF's LEAF Shakespeare; `path` is its cache dir, default `data_dir`, None
      for TFF's default) or 'text' (`path` is a plain-text play file, default the data
      directory's `tinyshakespeare.txt`).
    path: see `source`.
    data_dir: the data directory (`load_images`).
  """
  if source == 'text':
    path = path or default_path('shakespeare', 'text', data_dir)
  if source == 'tff':
    path = path or data_dir
    try:
      return tff.simulation.datasets.shakespeare.load_data(cache_dir=path)
    except Exception as e:  # pylint: disable=broad-except
      raise DataSourceError(
          f'tff.simulation.datasets.shakespeare.load_data() failed ({type(e).__name__}: '
          f'{str(e)[:200]}). Without internet, use source=text with data_path=<a play as plain '
          'text>.') from e
  if source != 'text':
    raise DataSourceError(f'Unknown text source {source!r}; known: {list(TEXT_SOURCES)}.')
  train, test = split_play_by_speaker(_read_play(path))
  if not train:
    raise DataSourceError(f'{path} has no speaker with two or more "NAME:" turns.')

  def client_data(turns):
    return tff.simulation.datasets.TestClientData({
        name: collections.OrderedDict(snippets=[s.encode() for s in speeches])
        for name, speeches in sorted(turns.items())
    })

  return client_data(train), client_data(test)


def _read_play(path: str | None) -> str:
  file = _existing(path, 'text')
  try:
    return file.read_text()
  except (OSError, UnicodeDecodeError) as e:
    raise DataSourceError(f'{file} is not a readable text file: {e}') from e


def shakespeare_fingerprint(source: str,
                            path: str | None = None,
                            data_dir: str | None = None) -> str | None:
  """The `fingerprint` of the play `load_shakespeare` reads from the 'text' source; None for
  'tff' (TFF's loader and its cache are TFF's)."""
  if source != 'text':
    return None
  return fingerprint(_read_play(path or default_path('shakespeare', 'text', data_dir)).encode())
