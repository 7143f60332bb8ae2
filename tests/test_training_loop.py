"""Tests of `tff_flare.training_loop`: client sampling and the client-state store in rounds."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare import client_state
from tff_flare import ec
from tff_flare import tff_baselines
from tff_flare import training_loop


def _client_data(num_clients):
  data = {}
  for i in range(num_clients):
    rng = np.random.default_rng(i)
    data[f'c{i}'] = dict(x=rng.normal(size=(8, 4)).astype(np.float32),
                         y=rng.integers(0, 3, size=(8, 1)).astype(np.int32))
  return tff.simulation.datasets.TestClientData(data).preprocess(lambda d: d.batch(8))


class SideBySideTest(tf.test.TestCase):

  def test_unsampled_state_unchanged_sampled_state_matches_next(self):
    process = ec.build_ec(tiny_models.softmax_model_fn(), keep_percent=20.0,
                          client_optimizer=tff.learning.optimizers.build_sgdm(0.5))
    data = _client_data(4)
    run = training_loop.AlgorithmRun('ec', process)
    # A manual replica of the driver: same process, same sampler, explicit state list.
    state = process.initialize()
    states = {cid: process.initial_client_state() for cid in data.client_ids}
    sampler = training_loop.build_client_sampler(data.client_ids, 2, seed=7)
    snapshots = []

    def check(round_num, row):
      nonlocal state
      ids = row['clients']
      self.assertEqual(ids, sampler(round_num))
      before = snapshots[-1] if snapshots else {}
      for cid in data.client_ids:
        if cid not in ids and cid in before:
          for got, want in zip(run.store.get(cid)['accumulator'], before[cid]):
            self.assertAllEqual(got, want)
      output = process.next(state, [data.create_tf_dataset_for_client(c) for c in ids],
                            [states[c] for c in ids])
      state = output.state
      for cid, new in zip(ids, output.client_states):
        states[cid] = new
        for got, want in zip(run.store.get(cid)['accumulator'], new['accumulator']):
          self.assertAllEqual(got, want)
      snapshots.append({cid: [np.copy(t) for t in run.store.get(cid)['accumulator']]
                        for cid in data.client_ids})

    history = training_loop.run_side_by_side([run], data, num_rounds=4, clients_per_round=2,
                                             seed=7, on_round_end=check)
    self.assertLen(history, 4)
    self.assertLen(snapshots, 4)
    sampled = {cid for row in history for cid in row['clients']}
    self.assertGreater(len(sampled), 2)  # Different clients took part in different rounds.

  def test_mismatched_client_states_are_rejected(self):
    process = ec.build_ec(tiny_models.softmax_model_fn(), keep_percent=20.0,
                          client_optimizer=tff.learning.optimizers.build_sgdm(0.5))
    run = training_loop.AlgorithmRun('ec', process)
    with self.assertRaises(client_state.ClientStateMismatchError):
      run.store.update(['c0'], [{'accumulator': [np.zeros((4, 3), np.float32)]}])

  def test_runs_share_given_initial_weights(self):
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.5)
    ec_process = ec.build_ec(model_fn, keep_percent=20.0, client_optimizer=optimizer)
    theirs = tff_baselines.build_tff_fedavg(model_fn, client_optimizer=optimizer)
    weights = tff.learning.models.ModelWeights(
        trainable=[np.full((4, 3), 0.5, np.float32), np.arange(3, dtype=np.float32)],
        non_trainable=[])
    for process in (ec_process, theirs):
      run = training_loop.AlgorithmRun('x', process, initial_weights=weights)
      for got, want in zip(run.model_weights().trainable, weights.trainable):
        self.assertAllEqual(got, want)

  def test_sampler_validates_clients_per_round(self):
    with self.assertRaisesRegex(ValueError, 'clients_per_round must be in'):
      training_loop.build_client_sampler(['a', 'b'], 3, seed=0)
    with self.assertRaisesRegex(ValueError, 'clients_per_round must be in'):
      training_loop.build_client_sampler(['a', 'b'], 0, seed=0)
    sampler = training_loop.build_client_sampler([f'c{i}' for i in range(10)], 3, seed=1)
    self.assertEqual(sampler(5), sampler(5))
    self.assertLen(set(sampler(5)), 3)


if __name__ == '__main__':
  tf.test.main()
