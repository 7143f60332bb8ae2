"""Tests of `tff_flare.simulation.checkpoints`: saving and restoring a run's program state."""

import asyncio
import collections
import dataclasses
import gc
import os
import pathlib
import tempfile
from typing import Any
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.simulation import checkpoints as checkpoints_lib
from tff_flare.simulation import client_state
from tff_flare.simulation import loop

_IDS = ['a', 'b', 'c']


def _state(value: float):
  """A client state of two arrays (2x3 and 3) filled with `value`."""
  return collections.OrderedDict(
      accumulator=[np.full(shape, value, np.float32) for shape in ((2, 3), (3,))])


def _initial():
  return _state(0.0)


@dataclasses.dataclass
class _Run:
  """What `Checkpoints` uses of a `loop.AlgorithmRun`: its name and its snapshot interface
  (the run's own methods, over a plain state and a store)."""
  name: str
  state: Any
  store: client_state.ClientStateStore
  has_client_state = loop.AlgorithmRun.has_client_state
  snapshot = loop.AlgorithmRun.snapshot
  restore = loop.AlgorithmRun.restore
  checkpointed = loop.AlgorithmRun.checkpointed


class CheckpointsTest(tf.test.TestCase, parameterized.TestCase):

  def _runs(self, kind):
    if kind == 'memory':
      store = client_state.ClientStateStore(_initial)
    else:
      store = client_state.DiskClientStateStore(_initial, tempfile.mkdtemp(dir=self.get_temp_dir()))
    stateless = client_state.ClientStateStore(lambda: ())  # FedAvg: no client state.
    return [
        _Run('ec', [np.float32(0.0), np.zeros(4, np.float32)], store),
        _Run('fedavg', [np.float32(0.0)], stateless)
    ]

  def _directory(self):
    return os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), 'checkpoints')

  @parameterized.parameters('memory', 'disk')
  def test_restores_the_state_of_the_round_saved(self, kind):
    runs, directory = self._runs(kind), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    self.assertEqual(checkpoints.restore(), 0)  # Nothing saved yet.
    runs[0].store.update(['a', 'c'], [_state(1.0), _state(3.0)])
    runs[0].state = [np.float32(7.0), np.arange(4, dtype=np.float32)]
    checkpoints.save(5)
    runs[0].store.update(['a', 'b'], [_state(8.0), _state(9.0)])  # After the checkpoint.
    runs[0].state = [np.float32(-1.0), np.zeros(4, np.float32)]
    self.assertEqual(checkpoints.restore(), 5)
    self.assertAllEqual(runs[0].state[1], np.arange(4))
    self.assertEqual(runs[0].state[0], 7.0)
    for cid, value in (('a', 1.0), ('b', 0.0), ('c', 3.0)):
      self.assertAllEqual(runs[0].store.get(cid)['accumulator'][1], np.full(3, value))

  def test_client_arrays_are_files_beside_the_program_state_and_go_with_it(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    for round_num in (1, 2, 3):
      runs[0].store.update(['b'], [_state(float(round_num))])
      checkpoints.save(round_num)
    self.assertEqual(sorted(os.listdir(directory)),
                     ['client_states_2', 'client_states_3', 'program_state_2', 'program_state_3'])
    # Two leaves for each of the three clients, in client order: b's second leaf is 5.
    arrays = pathlib.Path(directory, 'client_states_3', 'ec')
    self.assertLen(list(arrays.glob('*.npy')), 6)
    self.assertAllEqual(np.load(arrays / '3.npy'), np.full(3, 3.0))
    self.assertEqual(os.listdir(arrays.parent), ['ec'])  # FedAvg has no client state.
    # The program state itself holds only the round and the server states.
    # (A load checks the structure: with a `clients` entry in it this would raise.)
    template = collections.OrderedDict(
        round=np.int64(0),
        ec=collections.OrderedDict(server=[np.float32(0), np.zeros(4)]),
        fedavg=collections.OrderedDict(server=[np.float32(0)]))
    saved = asyncio.run(tff.program.FileProgramStateManager(directory).load(3, template))
    self.assertEqual(saved['round'], 3)
    # The older kept checkpoint restores too.
    self.assertEqual(checkpoints.restore(2), 2)
    self.assertAllEqual(runs[0].store.get('b')['accumulator'][0], np.full((2, 3), 2.0))

  def test_a_save_that_did_not_finish_is_replaced(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    checkpoints.save(1)
    stale = pathlib.Path(directory, 'client_states_2', 'ec')  # Crashed before its program
    stale.mkdir(parents=True)  # state was written.
    np.save(stale / '0.npy', np.full((2, 3), 99.0, np.float32))
    self.assertEqual(checkpoints.restore(), 1)  # Only complete checkpoints count.
    runs[0].store.update(['a'], [_state(4.0)])
    checkpoints.save(2)
    self.assertEqual(checkpoints.restore(), 2)
    self.assertAllEqual(runs[0].store.get('a')['accumulator'][0], np.full((2, 3), 4.0))

  def test_missing_client_states_are_a_clear_error(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    checkpoints.save(1)
    checkpoints.save(2)
    for path in pathlib.Path(directory, 'client_states_2', 'ec').iterdir():
      path.unlink()
    with self.assertRaisesRegex(
        checkpoints_lib.CheckpointError,
        r'The checkpoint after round 1 cannot be restored .*no client '
        r'states.* resume from the checkpoint after round 0\.'):
      checkpoints.restore()

  def test_a_save_that_cannot_write_leaves_nothing_and_says_so(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    checkpoints.save(1)

    def full_disk(*args, **kwargs):  # What np.save raises under `ulimit -f`.
      raise OSError('8192 requested and 7648 written')

    with mock.patch.object(np, 'save', full_disk):
      with self.assertRaisesRegex(
          checkpoints_lib.SaveError, r'The checkpoint after round 1 could not be written .*8192 '
          r'requested.* resume from the checkpoint after round 0\.'):
        checkpoints.save(2)
    self.assertEqual(sorted(p.name for p in pathlib.Path(directory).iterdir()),
                     ['client_states_1', 'program_state_1'])
    self.assertEqual(checkpoints.restore(), 1)

  def test_what_unfinished_saves_left_is_removed_at_restore(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    checkpoints.save(1)
    for name in ('program_state_2_temp4711', 'client_states_2.tmp'):
      (pathlib.Path(directory) / name / 'x').mkdir(parents=True)
    self.assertEqual(checkpoints.restore(), 1)
    self.assertEqual(sorted(p.name for p in pathlib.Path(directory).iterdir()),
                     ['client_states_1', 'program_state_1'])

  def test_a_checkpoint_with_the_clients_inside_the_program_state_restores(self):
    runs, directory = self._runs('memory'), self._directory()
    # The layout written before the client arrays moved out of the program state.
    old = collections.OrderedDict(round=np.int64(4))
    old['ec'] = collections.OrderedDict(
        server=[np.float32(2.0), np.ones(4, np.float32)],
        clients=[a for value in (5.0, 0.0, 6.0) for a in _state(value)['accumulator']])
    old['fedavg'] = collections.OrderedDict(server=[np.float32(3.0)],
                                            clients=[np.zeros([0], np.float32)])
    asyncio.run(tff.program.FileProgramStateManager(directory).save(old, 4))
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    self.assertEqual(checkpoints.restore(), 4)
    self.assertAllEqual(runs[0].state[1], np.ones(4))
    self.assertEqual(runs[1].state[0], 3.0)
    self.assertAllEqual(runs[0].store.get('c')['accumulator'][1], np.full(3, 6.0))
    self.assertAllEqual(runs[0].store.get('b')['accumulator'][1], np.zeros(3))

  def test_a_save_leaves_no_saved_model_graphs_in_reference_cycles(self):
    runs, directory = self._runs('memory'), self._directory()
    checkpoints = checkpoints_lib.Checkpoints(directory, runs, _IDS)
    checkpoints.save(1)  # Its collection also frees what earlier code left in cycles.
    enabled = gc.isenabled()
    gc.disable()  # Only the save collects.
    try:
      checkpoints.save(2)
      gc.set_debug(gc.DEBUG_SAVEALL)  # What this collection finds stays in gc.garbage.
      gc.collect()
      left = [o.name for o in gc.garbage if type(o).__name__ == 'FuncGraph']
    finally:
      gc.set_debug(0)
      del gc.garbage[:]
      if enabled:
        gc.enable()
    self.assertEqual(left, [])


if __name__ == '__main__':
  tf.test.main()
