"""Tests of `tff_flare.simulation.client_state`: the in-memory and the on-disk stores."""

import collections
import os
import pathlib
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.simulation import client_state


def _initial():
  return collections.OrderedDict(
      accumulator=[np.zeros((
          2, 3), np.float32), np.zeros((3,), np.float32)])


def _state(value):
  return collections.OrderedDict(
      accumulator=[np.full((2, 3), value, np.float32),
                   np.full((3,), value, np.float32)])


class ClientStateStoreTest(tf.test.TestCase, parameterized.TestCase):
  """The behaviour the stores share (each test runs on each)."""

  def _store(self, kind):
    if kind == 'memory':
      return client_state.ClientStateStore(_initial)
    store = dict(disk=client_state.DiskClientStateStore,
                 files=client_state.TensorFileClientStateStore)[kind]
    return store(_initial, tempfile.mkdtemp(dir=self.get_temp_dir()))

  @parameterized.parameters('memory', 'disk', 'files')
  def test_new_client_gets_initial_state(self, kind):
    store = self._store(kind)
    self.assertNotIn('a', store)
    self.assertAllEqual(store.get('a')['accumulator'][0], np.zeros((2, 3)))
    self.assertEmpty(store)

  @parameterized.parameters('memory', 'disk', 'files')
  def test_update_only_touches_given_clients(self, kind):
    store = self._store(kind)
    new = collections.OrderedDict(
        accumulator=[np.ones((
            2, 3), np.float32), np.ones((3,), np.float32)])
    store.update(['a'], [new])
    self.assertAllEqual(store.get('a')['accumulator'][1], np.ones(3))
    self.assertAllEqual(store.get('b')['accumulator'][1], np.zeros(3))
    self.assertEqual(store.client_ids(), ['a'])

  @parameterized.parameters('memory', 'disk', 'files')
  def test_mismatched_structure_shape_dtype(self, kind):
    store = self._store(kind)
    bad_structure = collections.OrderedDict(accumulator=[np.zeros((2, 3), np.float32)])
    bad_shape = collections.OrderedDict(
        accumulator=[np.zeros((
            3, 2), np.float32), np.zeros((3,), np.float32)])
    bad_dtype = collections.OrderedDict(
        accumulator=[np.zeros((
            2, 3), np.float64), np.zeros((3,), np.float32)])
    for bad in (bad_structure, bad_shape, bad_dtype):
      with self.assertRaisesRegex(client_state.ClientStateMismatchError, "'a'"):
        store.update(['a'], [bad])
    self.assertNotIn('a', store)
    with self.assertRaisesRegex(client_state.ClientStateMismatchError, '2 client ids but 1'):
      store.update(['a', 'b'], [_initial()])

  @parameterized.parameters('memory', 'disk', 'files')
  def test_dict_round_trip(self, kind):
    store = self._store(kind)
    store.update(['x'], [_state(2.0)])
    other = self._store(kind)
    other.load_dict(store.as_dict())
    self.assertEqual(other.client_ids(), ['x'])
    self.assertAllEqual(other.get('x')['accumulator'][0], np.full((2, 3), 2.0))

  @parameterized.parameters('memory', 'disk', 'files')
  def test_checkpoint_restores_states_of_that_time(self, kind):
    store = self._store(kind)
    ids = ['a', 'b', 'c']
    store.update(['a', 'b'], [_state(1.0), _state(2.0)])
    saved = [np.copy(a) for a in store.checkpoint_arrays(ids)]
    store.commit(1, [1])
    store.update(['a', 'c'], [_state(5.0), _state(6.0)])  # Rounds after the checkpoint.
    store.restore_checkpoint_arrays(ids, saved)
    self.assertAllEqual(store.get('a')['accumulator'][1], np.full(3, 1.0))
    self.assertAllEqual(store.get('b')['accumulator'][1], np.full(3, 2.0))
    self.assertAllEqual(store.get('c')['accumulator'][1], np.zeros(3))
    store.update(['a'], [_state(7.0)])  # The next round writes over the lost rounds' files.
    self.assertAllEqual(store.get('a')['accumulator'][0], np.full((2, 3), 7.0))


class DiskClientStateStoreTest(tf.test.TestCase):

  def test_states_are_memory_mapped_files(self):
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    store = client_state.DiskClientStateStore(_initial, directory)
    store.update(['role with spaces/and slash'], [_state(3.0)])
    leaf = store.get('role with spaces/and slash')['accumulator'][0]
    self.assertIsInstance(leaf, np.memmap)
    self.assertAllEqual(leaf, np.full((2, 3), 3.0))
    self.assertLen(os.listdir(directory), 1)

  def test_every_string_id_has_a_folder_of_its_own(self):
    # An empty id used to be the store's own folder; 300 characters ENAMETOOLONG after a
    # round; '..' a path component.
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    store = client_state.DiskClientStateStore(_initial, directory)
    ids = ['', '..', '../../x', 'é' * 300, 'é' * 299 + 'e', '0']
    store.update(ids, [_state(float(i)) for i in range(len(ids))])
    for i, cid in enumerate(ids):
      self.assertAllEqual(store.get(cid)['accumulator'][0], np.full((2, 3), float(i)))
    names = os.listdir(directory)
    self.assertLen(names, len(ids))
    self.assertTrue(all(len(name) <= 255 for name in names))
    store.commit(1, [1])  # Every client folder is recognized as the store's: none removed.
    self.assertLen([n for n in os.listdir(directory) if not n.startswith('index_')], len(ids))
    with self.assertRaisesRegex(TypeError, r"Client ids are strings, got 0 \(int\)"):
      store.update([0], [_state(9.0)])

  def test_commit_keeps_only_current_generation(self):
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    store = client_state.DiskClientStateStore(_initial, directory)
    for value in (1.0, 2.0, 3.0):
      store.update(['a'], [_state(value)])
    (client_dir,) = [os.path.join(directory, d) for d in os.listdir(directory)]
    self.assertLen(os.listdir(client_dir), 6)  # 3 generations x 2 leaves.
    store.commit(3, [3])
    self.assertLen(os.listdir(client_dir), 2)
    self.assertAllEqual(store.get('a')['accumulator'][1], np.full(3, 3.0))

  def test_a_damaged_index_of_a_kept_checkpoint_deletes_nothing(self):
    for damaged in (None, '{"a": ', '[1, 2]', '{"61": "one"}'):
      directory = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
      store = client_state.DiskClientStateStore(_initial, directory)
      store.update(['a'], [_state(1.0)])
      store.commit(1, [1])
      if damaged is not None:
        (directory / 'index_1.json').write_text(damaged)
      for value in (2.0, 3.0):
        store.update(['a'], [_state(value)])
      store.commit(3, [1, 3])
      (client_dir,) = [p for p in directory.iterdir() if p.is_dir()]
      # Generation 2 is no kept checkpoint's; generation 1 is checkpoint 1's, which a
      # damaged index cannot tell: then nothing is deleted.
      self.assertLen(list(client_dir.iterdir()), 4 if damaged is None else 6, msg=damaged)
      store.commit(3, [3])  # Collected once no damaged index is kept.
      self.assertLen(list(client_dir.iterdir()), 2, msg=damaged)

  def test_files_left_in_the_store_by_someone_else_are_left_alone(self):
    directory = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    store = client_state.DiskClientStateStore(_initial, directory)
    store.update(['a'], [_state(1.0)])
    store.commit(1, [1])
    strays = ('index_6 (copy).json', 'notes.txt', 'backup/g000000001_0.npy',
              f'{"a".encode().hex()}/g_copy.npy')
    for name in strays:
      (directory / name).parent.mkdir(exist_ok=True)
      (directory / name).write_text('x')
    store.update(['a'], [_state(2.0)])
    store.commit(2, [1, 2])
    store.restore_checkpoint_arrays(['a'], [np.array([1], np.int64), np.array([2], np.int64)])
    self.assertAllEqual(store.get('a')['accumulator'][1], np.full(3, 1.0))
    self.assertTrue((directory / 'index_6 (copy).json').exists())
    self.assertTrue((directory / 'backup' / 'g000000001_0.npy').exists())

  def test_both_kept_checkpoints_can_be_restored(self):
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    store = client_state.DiskClientStateStore(_initial, directory)
    saved = {}
    for version, value in ((1, 1.0), (2, 2.0), (3, 3.0)):
      store.update(['a'], [_state(value)])
      saved[version] = [np.copy(x) for x in store.checkpoint_arrays(['a'])]
      store.commit(version, [v for v in (version - 1, version) if v >= 1])
    store.update(['a'], [_state(4.0)])  # A round after the last checkpoint.
    for version in (2, 3):  # Kept: checkpoints 2 and 3.
      store.restore_checkpoint_arrays(['a'], saved[version])
      self.assertAllEqual(store.get('a')['accumulator'][1], np.full(3, float(version)))
    with self.assertRaisesRegex(client_state.ClientStateMismatchError, 'cannot be read'):
      store.restore_checkpoint_arrays(['a'], saved[1])  # Deleted with checkpoint 1.
    # Restored to checkpoint 2, the run goes on without overwriting checkpoint 3's files.
    store.restore_checkpoint_arrays(['a'], saved[2])
    store.update(['a'], [_state(5.0)])
    store.restore_checkpoint_arrays(['a'], saved[3])
    self.assertAllEqual(store.get('a')['accumulator'][1], np.full(3, 3.0))

  def test_missing_file_and_wrong_checkpoint_are_clear_errors(self):
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    store = client_state.DiskClientStateStore(_initial, directory)
    store.update(['a'], [_state(1.0)])
    saved = store.checkpoint_arrays(['a'])
    memory = client_state.ClientStateStore(_initial)
    with self.assertRaisesRegex(client_state.ClientStateMismatchError,
                                "a disk store's index, not the states"):
      memory.restore_checkpoint_arrays(['a'], saved)
    # The other way works: a checkpoint of states in memory is written out as files.
    memory.update(['a'], [_state(5.0)])
    moved = client_state.DiskClientStateStore(_initial, tempfile.mkdtemp(dir=self.get_temp_dir()))
    moved.restore_checkpoint_arrays(['a'], memory.checkpoint_arrays(['a']))
    self.assertAllEqual(moved.get('a')['accumulator'][1], np.full((3,), 5.0))
    for root, _, files in os.walk(directory):
      for name in files:
        os.remove(os.path.join(root, name))
    with self.assertRaisesRegex(client_state.ClientStateMismatchError, "client 'a'"):
      store.restore_checkpoint_arrays(['a'], saved)


class TensorFileClientStateStoreTest(tf.test.TestCase):

  def test_prefixes_name_each_clients_generations_and_a_new_client_reads_none(self):
    directory = pathlib.Path(self.get_temp_dir()) / 'files'
    store = client_state.TensorFileClientStateStore(_initial, directory)
    read, write = store.prefixes(['a', 'b'])
    self.assertEqual(read, ['', ''])
    folder_a = client_state.client_folder(directory, 'a')
    self.assertEqual(write[0], str(folder_a / 'g000000001_'))
    self.assertTrue(folder_a.is_dir())
    store.written(['a', 'b'])
    read, write = store.prefixes(['b', 'c'])
    self.assertEqual(read, [str(client_state.client_folder(directory, 'b') / 'g000000001_'), ''])
    self.assertTrue(write[0].endswith('g000000002_'))
    # A round that failed (no `written`) leaves every client where it was.
    read_again, _ = store.prefixes(['b'])
    self.assertEqual(read_again, read[:1])
    with self.assertRaisesRegex(TypeError, 'Client ids are strings'):
      store.prefixes([0])

  def test_the_store_reads_what_a_client_computation_wrote_and_checkpoints_it(self):
    directory = pathlib.Path(self.get_temp_dir()) / 'files'
    store = client_state.TensorFileClientStateStore(_initial, directory)
    _, write = store.prefixes(['a'])
    for i, leaf in enumerate(tf.nest.flatten(_state(2.0))):  # As `write_state_files` does.
      tf.io.write_file(f'{write[0]}{i}.tensor', tf.io.serialize_tensor(leaf))
    store.written(['a'])
    self.assertAllEqual(store.get('a')['accumulator'][1], np.full((3,), 2.0))
    arrays = store.checkpoint_arrays(['a'])
    store.commit(1, [1])
    store.update(['a'], [_state(5.0)])  # In this process: the next generation, here.
    self.assertAllEqual(store.get('a')['accumulator'][0], np.full((2, 3), 5.0))
    again = client_state.TensorFileClientStateStore(_initial, directory)
    again.restore_checkpoint_arrays(['a'], arrays)
    self.assertAllEqual(again.get('a')['accumulator'][1], np.full((3,), 2.0))
    _, write = again.prefixes(['a'])
    self.assertTrue(write[0].endswith('g000000003_'))  # Past every generation on disk.
    (client_state.client_folder(directory, 'a') / 'g000000001_0.tensor').write_bytes(b'cut')
    with self.assertRaisesRegex(client_state.ClientStateMismatchError, 'cannot be read'):
      again.get('a')


if __name__ == '__main__':
  tf.test.main()
