"""Tests of `experiments.get_data`: the files it writes are the ones the tasks read (the real
loaders stand in for small arrays here: tests never download)."""

import os
import pathlib
import socket
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf

from experiments import binary
from experiments import get_data
from tff_flare.tasks import data_sources
from tff_flare.tasks import registry as tasks


def _arrays(shape, n=40, classes=10):
  """Keras's layout: ((x_train, y_train), (x_test, y_test)), every class in both splits."""
  rng = np.random.default_rng(0)
  images = lambda count: rng.integers(0, 256, (count,) + shape, dtype=np.uint8)
  return ((images(n), np.arange(n) % classes), (images(20), np.arange(20) % classes))


class GetDataTest(tf.test.TestCase):

  def test_the_tasks_read_what_it_writes(self):
    data_dir = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    mnist, cifar = _arrays((28, 28)), _arrays((32, 32, 3))
    with mock.patch.object(tf.keras.datasets.mnist, 'load_data', return_value=mnist), \
         mock.patch.object(tf.keras.datasets.cifar10, 'load_data', return_value=cifar):
      get_data.fetch('mnist', data_dir, overwrite=False, log=lambda _: None)
      written = get_data.fetch('cifar10', data_dir, overwrite=False, log=lambda _: None)
    self.assertCountEqual([p.name for p in written], ['cifar10.npz', 'cifar10_imagefolder.tar.gz'])
    loaded = data_sources.load_images('mnist', 'npz', data_dir=str(data_dir))
    self.assertAllEqual(loaded.x_train[..., 0], mnist[0][0])
    for source in ('npz', 'imagefolder'):
      arrays = data_sources.load_images('cifar10', source, data_dir=str(data_dir))
      self.assertEqual(arrays.x_train.shape, (40, 32, 32, 3))
      self.assertEqual(sorted(arrays.y_train), sorted(cifar[0][1]))  # Lossless: same images.
    self.assertEqual(sorted(map(bytes, arrays.x_train)), sorted(map(bytes, cifar[0][0])))
    task = tasks.build_task('mnist_cnn', source='npz', data_dir=str(data_dir), total_clients=4)
    self.assertLen(task.train_data.client_ids, 4)
    # Kept unless asked: a second fetch does not load anything.
    lines = []
    with mock.patch.object(tf.keras.datasets.mnist, 'load_data') as loader:
      get_data.fetch('mnist', data_dir, overwrite=False, log=lines.append)
      loader.assert_not_called()
    self.assertIn('is there already, kept', lines[0])
    # A file cut short (a download stopped) is fetched again, not kept.
    path = data_dir / 'mnist.npz'
    path.write_bytes(path.read_bytes()[:1000])
    lines = []
    with mock.patch.object(tf.keras.datasets.mnist, 'load_data', return_value=mnist):
      get_data.fetch('mnist', data_dir, overwrite=False, log=lines.append)
    self.assertIn('is there but damaged', lines[0])
    self.assertAllEqual(
        data_sources.load_images('mnist', 'npz', str(path)).x_train[..., 0], mnist[0][0])

  def test_a_pipe_where_a_data_file_goes_is_damage_not_a_wait(self):
    folder = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    for name, source, file in (('shakespeare', 'text', 'tinyshakespeare.txt'),
                               ('mnist', 'npz', 'mnist.npz'), ('cifar10', 'imagefolder',
                                                               'cifar10_imagefolder.tar.gz')):
      os.mkfifo(folder / file)
      self.assertRegex(
          get_data._damage(name, source, folder / file),  # pylint: disable=protected-access
          'pipe',
          msg=file)

  def test_a_missing_file_names_the_command_that_fetches_it(self):
    with self.assertRaisesRegex(
        data_sources.DataSourceError, r'nowhere/mnist.npz does not exist \(`python -m '
        r'experiments.get_data'):
      data_sources.load_images('mnist', 'npz', data_dir='nowhere')

  def test_an_unreachable_download_host_is_one_line_at_once_and_leaves_nothing(self):
    # Offline, TFDS retried its download for 211 s and left tfds/ with temporary files.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    folder = pathlib.Path(tempfile.mkdtemp())
    self.addCleanup(os.rmdir, folder)
    unreachable = socket.gaierror(-2, 'Name or service not known')
    with mock.patch.dict(os.environ, {}, clear=False), \
         mock.patch.object(socket, 'create_connection', side_effect=unreachable), \
         mock.patch.object(tfds, 'load') as load:
      for proxy in ('https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY', 'all_proxy',
                    'ALL_PROXY'):
        os.environ.pop(proxy, None)
      with self.assertRaisesRegex(
          binary.BadInput, r"tfds.load\('tiny_shakespeare'\) needs the internet once, "
          r'and raw.githubusercontent.com cannot be reached'):
        get_data.write_play(folder / 'tinyshakespeare.txt')
      load.assert_not_called()
    self.assertEqual(list(folder.iterdir()), [])
    # Behind a proxy the loaders connect through it: no direct check.
    with mock.patch.dict(os.environ, {'https_proxy': 'http://proxy:3128'}), \
         mock.patch.object(socket, 'create_connection', side_effect=unreachable) as connect:
      get_data.check_reachable('loader', ['https://example.invalid/file'])
      connect.assert_not_called()


if __name__ == '__main__':
  tf.test.main()
