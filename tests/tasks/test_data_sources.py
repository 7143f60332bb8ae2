"""Tests of `tff_flare.tasks.data_sources`: every source through its real code path."""

import io
import os
import pathlib
import tarfile
import zipfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.datasets import sql_client_data_utils

from tff_flare.tasks import data_sources

PLAY = """First Citizen:
Before we proceed any further, hear me speak.

All:
Speak, speak.

First Citizen:
You are all resolved rather to die than to famish?

All:
Resolved. resolved.

MENENIUS:
Only once.

First Citizen:
First, you know Caius Marcius is chief enemy
to the people.
"""


class TfdsSourceTest(tf.test.TestCase):

  def test_mock_data_through_tfds_load(self):
    for name, shape in data_sources.IMAGE_DATASETS.items():
      with tfds.testing.mock_data(num_examples=12):
        arrays = data_sources.load_images(name, 'tfds')
      self.assertEqual(arrays.x_train.shape, (12,) + shape)
      self.assertEqual(arrays.x_train.dtype, np.uint8)
      self.assertEqual(arrays.y_test.shape, (12,))
      self.assertEqual(arrays.y_train.dtype, np.int64)

  def test_keras_loader_is_the_default_and_its_failure_one_line(self):
    rng = np.random.default_rng(0)
    arrays = ((rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), np.arange(6, dtype=np.uint8)),
              (rng.integers(0, 256, (2, 28, 28), dtype=np.uint8), np.arange(2, dtype=np.uint8)))
    with mock.patch.object(tf.keras.datasets.mnist, 'load_data', return_value=arrays):
      loaded = data_sources.load_images('mnist')
    self.assertEqual(loaded.x_train.shape, (6, 28, 28, 1))
    self.assertAllEqual(loaded.x_train[..., 0], arrays[0][0])  # Keras order, untouched.
    self.assertEqual(loaded.y_train.dtype, np.int64)
    with mock.patch.object(tf.keras.datasets.cifar10,
                           'load_data',
                           side_effect=OSError('no network')):
      with self.assertRaisesRegex(
          data_sources.DataSourceError, r'cifar10.load_data\(\) failed \(OSError: no network\). '
          'Without internet, use source=npz with data_path='):
        data_sources.load_images('cifar10')

  def test_shared_mnist_npz_is_in_keras_order(self):
    shared = pathlib.Path(__file__).resolve().parents[3] / 'shared' / 'datasets' / 'mnist.npz'
    if not shared.exists():
      if os.environ.get('TFF_FLARE_REQUIRE_SHARED') == '1':
        self.fail(f'{shared} is missing.')
      self.skipTest(f'{shared} is not here.')
    arrays = data_sources.load_images('mnist', 'npz', str(shared))
    # Keras's MNIST begins 5 0 4 1 9 2 1 3 1 4 (TFDS's records begin otherwise), and its
    # test set 7 2 1 0 4 1 4 9 5 9: the authors' contiguous clients are these slices.
    self.assertEqual(list(arrays.y_train[:10]), [5, 0, 4, 1, 9, 2, 1, 3, 1, 4])
    self.assertEqual(list(arrays.y_test[:10]), [7, 2, 1, 0, 4, 1, 4, 9, 5, 9])
    self.assertEqual(arrays.x_train.shape, (60000, 28, 28, 1))

  def test_unknown_name_and_source(self):
    with self.assertRaisesRegex(data_sources.DataSourceError, 'Unknown image data set'):
      data_sources.load_images('svhn')
    with self.assertRaisesRegex(data_sources.DataSourceError, 'Unknown image source'):
      data_sources.load_images('mnist', 'csv', '/tmp/x')


class ChooseSourceTest(tf.test.TestCase):

  def test_a_named_data_directory_is_read_before_a_download(self):
    folder = pathlib.Path(self.get_temp_dir()) / 'named'
    folder.mkdir()
    choose = data_sources.choose_source
    with self.assertRaisesRegex(
        data_sources.DataSourceError, r'named holds no file of mnist '
        r'\(mnist.npz\): python -m experiments.get_data'):
      choose('mnist', None, str(folder), 'keras')  # No file there: not a download instead.
    (folder / 'mnist.npz').write_bytes(b'')
    (folder / 'tinyshakespeare.txt').write_text(PLAY)
    self.assertEqual(choose('mnist', None, str(folder), 'keras'), 'npz')
    self.assertEqual(choose('shakespeare', None, str(folder), 'tff'), 'text')
    self.assertEqual(choose('mnist', 'tfds', str(folder), 'keras'), 'tfds')  # Given: kept.
    self.assertEqual(choose('mnist', None, None, 'keras'), 'keras')
    os.mkfifo(folder / 'cifar10.npz')  # A pipe is not a data file: neither chosen nor read.
    with self.assertRaisesRegex(data_sources.DataSourceError, 'holds no file of cifar10'):
      choose('cifar10', None, str(folder), 'keras')
    with self.assertRaisesRegex(data_sources.DataSourceError, 'neither a file nor a folder'):
      data_sources.load_images('cifar10', 'npz', str(folder / 'cifar10.npz'))
    with self.assertRaisesRegex(data_sources.DataSourceError, 'neither a file nor a folder'):
      data_sources.load_shakespeare('text', str(folder / 'cifar10.npz'))

  def test_a_named_file_is_read_by_the_source_that_reads_it(self):
    # Was: --data_path without --source was ignored and the default source downloaded.
    folder = pathlib.Path(self.get_temp_dir()) / 'files'
    folder.mkdir()
    choose = data_sources.choose_source
    for name, path, source in (('mnist', 'm.npz', 'npz'), ('cifar10', 'c.NPZ', 'npz'),
                               ('cifar10', 'c.tar.gz', 'imagefolder'),
                               ('cifar100', 'c.tgz', 'imagefolder'), ('cifar10', str(folder),
                                                                      'imagefolder'),
                               ('shakespeare', 'play.txt', 'text'), ('shakespeare', str(folder),
                                                                     'tff')):  # TFF's cache folder.
      self.assertEqual(choose(name, None, None, 'keras', path), source, path)
      self.assertEqual(choose(name, source, None, 'keras', path), source, path)
    with self.assertRaisesRegex(
        data_sources.DataSourceError, r'^Which source reads '
        r'data_path=m.csv\? Name its source \(npz or '
        r'imagefolder\)\.$'):
      choose('mnist', None, None, 'keras', 'm.csv')
    for name, source in (('mnist', 'keras'), ('cifar10', 'tfds')):
      with self.assertRaisesRegex(
          data_sources.DataSourceError, f'^data_path=x is read by npz or imagefolder, not by '
          f'source={source}, which would ignore it\\.$'):
        choose(name, source, None, 'keras', 'x')
    with self.assertRaisesRegex(
        data_sources.DataSourceError, r'^data_dir=d is not read by '
        r'source=keras, .*\(npz or imagefolder or tfds\)'):
      choose('mnist', 'keras', 'd', 'keras')
    self.assertEqual(choose('mnist', 'tfds', 'd', 'keras'), 'tfds')  # TFDS's data directory.


class NpzSourceTest(tf.test.TestCase):

  def test_keras_layout(self):
    path = os.path.join(self.get_temp_dir(), 'mnist.npz')
    rng = np.random.default_rng(0)
    np.savez(path,
             x_train=rng.integers(0, 255, (6, 28, 28), dtype=np.uint8),
             y_train=np.arange(6, dtype=np.uint8),
             x_test=np.zeros((2, 28, 28), np.uint8),
             y_test=np.ones(2, np.uint8))
    arrays = data_sources.load_images('mnist', 'npz', path)
    self.assertEqual(arrays.x_train.shape, (6, 28, 28, 1))
    self.assertAllEqual(arrays.y_train, np.arange(6))

  def test_missing_malformed_and_wrong_shape(self):
    directory = self.get_temp_dir()
    with self.assertRaisesRegex(data_sources.DataSourceError, 'nothere.npz does not exist'):
      data_sources.load_images('mnist', 'npz', os.path.join(directory, 'nothere.npz'))
    corrupt = os.path.join(directory, 'corrupt.npz')
    pathlib.Path(corrupt).write_bytes(b'not a zip file at all')
    with self.assertRaisesRegex(data_sources.DataSourceError, 'corrupt.npz'):
      data_sources.load_images('mnist', 'npz', corrupt)
    partial = os.path.join(directory, 'partial.npz')
    np.savez(partial, x_train=np.zeros((2, 28, 28), np.uint8))
    with self.assertRaisesRegex(data_sources.DataSourceError, r"partial.npz lacks.*x_test"):
      data_sources.load_images('mnist', 'npz', partial)
    wrong = os.path.join(directory, 'wrong.npz')
    np.savez(wrong,
             x_train=np.zeros((2, 32, 32, 3), np.uint8),
             y_train=np.zeros(2),
             x_test=np.zeros((2, 32, 32, 3), np.uint8),
             y_test=np.zeros(2))
    with self.assertRaisesRegex(data_sources.DataSourceError, 'expected'):
      data_sources.load_images('mnist', 'npz', wrong)
    with self.assertRaisesRegex(data_sources.DataSourceError, 'needs a path'):
      data_sources.load_images('cifar100', 'imagefolder')  # No default file in data/.
    with self.assertRaisesRegex(data_sources.DataSourceError,
                                f'{directory}/mnist.npz does not exist'):
      data_sources.load_images('mnist', 'npz', data_dir=directory)  # The data directory's.

  def _mnist_like(self, name, **overrides):
    path = os.path.join(self.get_temp_dir(), name)
    arrays = dict(x_train=np.zeros((4, 28, 28), np.uint8),
                  y_train=np.arange(4),
                  x_test=np.zeros((2, 28, 28), np.uint8),
                  y_test=np.ones(2, np.int64))
    arrays.update(overrides)
    np.savez(path, **arrays)
    return path

  def test_truncated_and_foreign_files_are_one_line(self):
    whole = self._mnist_like('whole.npz',
                             x_train=np.random.default_rng(0).integers(0,
                                                                       255, (600, 28, 28),
                                                                       dtype=np.uint8))
    truncated = os.path.join(self.get_temp_dir(), 'truncated.npz')
    pathlib.Path(truncated).write_bytes(pathlib.Path(whole).read_bytes()[:200_000])
    with self.assertRaisesRegex(data_sources.DataSourceError,
                                r'truncated.npz is not a readable .npz file \(truncated'):
      data_sources.load_images('mnist', 'npz', truncated)
    text = os.path.join(self.get_temp_dir(), 'notes.npz')
    pathlib.Path(text).write_text('x_train,y_train\n1,2\n')
    with self.assertRaisesRegex(data_sources.DataSourceError,
                                r"notes.npz is not an .npz archive \(not numpy's format"):
      data_sources.load_images('mnist', 'npz', text)
    one_array = os.path.join(self.get_temp_dir(), 'one.npy')
    np.save(one_array, np.zeros(3))
    with self.assertRaisesRegex(data_sources.DataSourceError, 'holds one numpy array'):
      data_sources.load_images('mnist', 'npz', one_array)

  def test_pixels_and_labels_are_checked(self):
    nan_pixels = np.zeros((4, 28, 28), np.float32)
    nan_pixels[1, 2, 3] = np.nan
    for name, overrides, message in (
        ('nan.npz', dict(x_train=nan_pixels), 'train pixels hold NaN or Inf'),
        ('range.npz', dict(x_test=np.full((2, 28, 28), 300.0)), r'range over \[300.0, 300.0\]'),
        ('labels.npz', dict(y_train=np.array([0, 1, 2, 10])),
         r'labels range over \[0, 10\]; the model has 10 classes'),
        ('fractional.npz', dict(y_test=np.array([0.5, 1.0])), 'not whole numbers'),
        ('strings.npz', dict(y_test=np.array(['cat', 'dog'])), 'test labels are <U3, not whole'),
        # Labels in another layout: one-hot labels were flattened into 10 N labels.
        ('one_hot.npz', dict(y_train=np.eye(10)[[0, 1, 2, 3]]),
         r'train .* labels \(4, 10\); expected .* \[N\] \(one-hot labels\? give class indices'),
        ('empty.npz', dict(x_test=np.zeros((0, 28, 28), np.uint8),
                           y_test=np.zeros(0, np.int64)), 'test split is empty'),
        # Data in another scale: pixels already divided by 255 would be divided again (the
        # CNN's loss stayed at 2.3026).
        ('scaled.npz', dict(x_train=np.random.default_rng(0).random((4, 28, 28))),
         r'train pixels range over \[0.0\d*, 0.9\d*\], as if already scaled to \[0, 1\]'),
        ('binary.npz', dict(x_test=np.ones((2, 28, 28), np.uint8)),
         'test pixels range over .* as if already scaled')):
      with self.assertRaisesRegex(data_sources.DataSourceError, message, msg=name):
        data_sources.load_images('mnist', 'npz', self._mnist_like(name, **overrides))
    # 0..255 pixels pass, whatever their dtype.
    data_sources.load_images('mnist', 'npz',
                             self._mnist_like('float.npz', x_train=np.full((4, 28, 28), 255.0)))

  def test_a_header_declaring_more_than_the_file_holds_is_refused(self):
    # Without the check numpy allocates what the header declares: a MemoryError, or worse.
    path = pathlib.Path(self.get_temp_dir()) / 'huge.npz'
    with zipfile.ZipFile(path, 'w') as archive:
      for name, shape in (('x_train', (2**40, 28, 28)), ('y_train', (4,)), ('x_test', (2, 28, 28)),
                          ('y_test', (2,))):
        member = io.BytesIO()
        np.lib.format.write_array_header_1_0(member,
                                             dict(descr='|u1', fortran_order=False, shape=shape))
        member.write(bytes(16))
        archive.writestr(f'{name}.npy', member.getvalue())
    with self.assertRaisesRegex(
        data_sources.DataSourceError, r'huge.npz: x_train.npy declares an array of shape '
        r'\(1099511627776, 28, 28\) .* but holds'):
      data_sources.load_images('mnist', 'npz', str(path))


def _write_imagefolder(root: pathlib.Path):
  """train: 2 cats (label 0 by sort order... 'bird' < 'cat'), 1 bird; test: one of each."""
  rng = np.random.default_rng(1)
  images = {}
  for split, counts in (('train', {'cat': 2, 'bird': 1}), ('test', {'cat': 1, 'bird': 1})):
    for name, count in counts.items():
      (root / split / name).mkdir(parents=True)
      for i in range(count):
        image = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
        (root / split / name / f'{i:04d}.png').write_bytes(tf.io.encode_png(image).numpy())
        images[(split, name, i)] = image
  return images


class ImageFolderSourceTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # Restored after each test: a later test of this worker must not write here.
    environ = mock.patch.dict(os.environ,
                              {'TFF_FLARE_CACHE': os.path.join(self.get_temp_dir(), 'cache')})
    environ.start()
    self.addCleanup(environ.stop)

  def test_the_cache_follows_the_images_not_the_folder(self):
    root = pathlib.Path(self.get_temp_dir()) / 'changing'
    _write_imagefolder(root)
    before = data_sources.load_images('cifar10', 'imagefolder', str(root))
    (root / 'train' / 'cat' / '0001.png').unlink()  # The folder's own size and time may stay.
    after = data_sources.load_images('cifar10', 'imagefolder', str(root))
    self.assertLen(before.y_train, 3)
    self.assertLen(after.y_train, 2)
    self.assertNotEqual(after.fingerprint, before.fingerprint)
    # A damaged cache entry is built again, not a refusal for good.
    cache = data_sources._imagefolder_cache_path(root)  # pylint: disable=protected-access
    cache.write_bytes(cache.read_bytes()[:100])
    again = data_sources.load_images('cifar10', 'imagefolder', str(root))
    self.assertEqual(again.fingerprint, after.fingerprint)
    self.assertGreater(cache.stat().st_size, 100)
    cache.unlink()
    os.mkfifo(cache)  # Was: the load waited on it forever.
    again = data_sources.load_images('cifar10', 'imagefolder', str(root))
    self.assertEqual(again.fingerprint, after.fingerprint)
    self.assertTrue(cache.is_file())

  def test_a_cache_that_cannot_be_written_is_skipped(self):
    root = pathlib.Path(self.get_temp_dir()) / 'uncached'
    _write_imagefolder(root)
    blocker = pathlib.Path(self.get_temp_dir()) / 'a_file'
    blocker.write_text('not a folder')
    for cache_dir in (blocker, blocker / 'below'):  # Not a folder; under a file.
      os.environ['TFF_FLARE_CACHE'] = str(cache_dir)
      arrays = data_sources.load_images('cifar10', 'imagefolder', str(root))
      self.assertLen(arrays.y_train, 3)
    self.assertEqual(blocker.read_text(), 'not a folder')
    os.environ['TFF_FLARE_CACHE'] = ''  # Unset, not the working directory.
    self.assertEqual(
        data_sources._imagefolder_cache_path(root).parent,  # pylint: disable=protected-access
        data_sources.DEFAULT_CACHE_DIR)
    self.assertEqual(sorted(p.name for p in blocker.parent.iterdir() if p.name != 'uncached'),
                     ['a_file'])

  def test_a_pipe_among_the_images_is_refused_not_read(self):
    root = pathlib.Path(self.get_temp_dir()) / 'with_pipe'
    _write_imagefolder(root)
    os.mkfifo(root / 'test' / 'bird' / '0009.png')  # Was: TensorFlow's read waited forever.
    with self.assertRaisesRegex(data_sources.DataSourceError,
                                r'0009.png is a pipe, a socket or a device.*image files only'):
      data_sources.load_images('cifar10', 'imagefolder', str(root))

  def test_directory_and_tar_gz(self):
    root = pathlib.Path(self.get_temp_dir()) / 'images'
    images = _write_imagefolder(root)
    arrays = data_sources.load_images('cifar10', 'imagefolder', str(root))
    # Folder order bird 0, cat 0, cat 1 (labels by sorted class name), then the fixed shuffle.
    folder_order = [('bird', 0, 0), ('cat', 0, 1), ('cat', 1, 1)]
    order = np.random.default_rng(data_sources.IMAGEFOLDER_SHUFFLE_SEED).permutation(3)
    self.assertAllEqual(arrays.y_train, [folder_order[i][2] for i in order])
    for position, i in enumerate(order):
      name, index, _ = folder_order[i]
      self.assertAllEqual(arrays.x_train[position], images[('train', name, index)])
    archive = pathlib.Path(self.get_temp_dir()) / 'images.tar.gz'
    with tarfile.open(archive, 'w:gz') as tar:
      tar.add(root, arcname='cifar')
    from_tar = data_sources.load_images('cifar10', 'imagefolder', str(archive))
    self.assertAllEqual(from_tar.x_test, arrays.x_test)
    # The second load reads the decoded cache.
    self.assertNotEmpty(os.listdir(os.environ['TFF_FLARE_CACHE']))
    again = data_sources.load_images('cifar10', 'imagefolder', str(archive))
    self.assertAllEqual(again.x_train, arrays.x_train)

  def test_malformed(self):
    bad = pathlib.Path(self.get_temp_dir()) / 'bad.tar.gz'
    bad.write_bytes(b'\x1f\x8b not really gzip')
    with self.assertRaisesRegex(data_sources.DataSourceError, 'bad.tar.gz'):
      data_sources.load_images('cifar10', 'imagefolder', str(bad))
    empty = pathlib.Path(self.get_temp_dir()) / 'empty_folder'
    empty.mkdir()
    with self.assertRaisesRegex(data_sources.DataSourceError, 'no train/ directory'):
      data_sources.load_images('cifar10', 'imagefolder', str(empty))

  def test_empty_splits_and_an_undecodable_image_are_one_line(self):
    root = pathlib.Path(self.get_temp_dir()) / 'no_images'
    (root / 'train').mkdir(parents=True)
    (root / 'test').mkdir()
    with self.assertRaisesRegex(data_sources.DataSourceError, r'train holds no images'):
      data_sources.load_images('cifar10', 'imagefolder', str(root))
    root = pathlib.Path(self.get_temp_dir()) / 'broken'
    _write_imagefolder(root)
    broken = root / 'train' / 'cat' / '0001.png'
    broken.write_bytes(b'this is not a png')
    with self.assertRaises(data_sources.DataSourceError) as raised:
      data_sources.load_images('cifar10', 'imagefolder', str(root))
    message = str(raised.exception)
    self.assertStartsWith(message, f'{broken} is not a decodable image')
    self.assertNotIn('\n', message)
    self.assertNotIn('node', message)


class ShakespeareSourceTest(tf.test.TestCase):

  def test_play_split_one_client_per_speaker(self):
    train, test = data_sources.split_play_by_speaker(PLAY, test_fraction=0.2)
    self.assertEqual(sorted(train), ['All', 'First Citizen'])  # MENENIUS has one turn.
    self.assertEqual(train['First Citizen'], [
        'Before we proceed any further, hear me speak.',
        'You are all resolved rather to die than to famish?'
    ])
    self.assertEqual(test['First Citizen'],
                     ['First, you know Caius Marcius is chief enemy\nto the people.'])
    self.assertEqual(train['All'], ['Speak, speak.'])
    self.assertEqual(test['All'], ['Resolved. resolved.'])

  def test_text_source(self):
    path = os.path.join(self.get_temp_dir(), 'play.txt')
    pathlib.Path(path).write_text(PLAY)
    train, test = data_sources.load_shakespeare('text', path)
    self.assertEqual(train.client_ids, ['All', 'First Citizen'])
    snippets = [e['snippets'].numpy() for e in train.create_tf_dataset_for_client('All')]
    self.assertEqual(snippets, [b'Speak, speak.'])
    self.assertEqual(test.client_ids, train.client_ids)
    empty = os.path.join(self.get_temp_dir(), 'empty.txt')
    pathlib.Path(empty).write_text('no speakers here\n')
    with self.assertRaisesRegex(data_sources.DataSourceError, 'empty.txt has no speaker'):
      data_sources.load_shakespeare('text', empty)
    with self.assertRaisesRegex(data_sources.DataSourceError, 'does not exist'):
      data_sources.load_shakespeare('text', path + '.missing')

  def test_tff_loader_reads_a_cached_database(self):
    # TFF's real loader, pointed at a cache dir that already holds a (tiny) database.
    cache_dir = self.get_temp_dir()
    synthetic = tff.simulation.datasets.shakespeare.get_synthetic()
    ids = synthetic.client_ids
    sql_client_data_utils.save_to_sql_client_data(
        ids + [f'{c}_test' for c in ids],
        lambda cid: synthetic.create_tf_dataset_for_client(cid.replace('_test', '')),
        os.path.join(cache_dir, 'shakespeare.sqlite'),
        split_names_by_client_id={
            **{c: 'train' for c in ids},
            **{f'{c}_test': 'test' for c in ids}
        })
    train, test = data_sources.load_shakespeare('tff', cache_dir)
    self.assertEqual(train.client_ids, sorted(ids))
    first = next(iter(train.create_tf_dataset_for_client(ids[0])))
    self.assertEqual(first['snippets'].dtype, tf.string)
    self.assertLen(test.client_ids, len(ids))


if __name__ == '__main__':
  tf.test.main()
