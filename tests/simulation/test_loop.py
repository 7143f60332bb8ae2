"""Tests of `tff_flare.simulation.loop` and its hooks: client states across rounds, hooks."""

import threading

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import ec
from tff_flare.algorithms import ec_ffl
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import tff_baselines
from tff_flare.execution import modes
from tff_flare.simulation import client_state
from tff_flare.simulation import hooks
from tff_flare.simulation import loop
from tff_flare.simulation import sampling

_OPTIMIZER = tff.learning.optimizers.build_sgdm(0.5)


def _client_data(num_clients):
  data = {}
  for i in range(num_clients):
    rng = np.random.default_rng(i)
    data[f'c{i}'] = dict(x=rng.normal(size=(8, 4)).astype(np.float32),
                         y=rng.integers(0, 3, size=(8, 1)).astype(np.int32))
  return tff.simulation.datasets.TestClientData(data).preprocess(lambda d: d.batch(8))


class _Check(loop.Hook):

  def __init__(self, fn):
    self._fn = fn

  def after_round(self, round_num, runs, row):
    self._fn(round_num, row)


class RoundRowTest(tf.test.TestCase):

  def test_released_holds_what_was_measured_in_order_and_a_hooks_extra(self):
    row = loop.RoundRow.empty(3, ['c1'], ['flare', 'ec'])
    row['flare'].eval = {'loss': 1.5, 'accuracy': 0.25}
    row['flare'].round_seconds = 2.0
    row['flare'].bytes_uploaded = 40
    row['flare'].train = {'client_work': {'train': {'loss': 1.0}}}
    row['flare'].extra['my_metric'] = 7.0
    released = row.released()
    self.assertEqual(list(released), ['flare', 'ec'])
    self.assertEqual(list(released['flare']),
                     ['eval', 'round_seconds', 'bytes_uploaded', 'train', 'my_metric'])
    self.assertEqual(released['ec'], {})  # Nothing measured: nothing released (no None).
    manager = tff.program.MemoryReleaseManager()
    hooks.ReleaseRows([manager]).after_round(3, [], row)
    self.assertEqual(dict(manager.values())[3]['flare']['my_metric'], 7.0)


class StopOnInterruptTest(tf.test.TestCase):

  def _hook(self, checkpoints: list[int]):
    event = threading.Event()
    hook = hooks.StopOnInterrupt(event,
                                 lambda: checkpoints[-1] if checkpoints else None,
                                 checkpoints.append,
                                 end_round=10)
    return event, hook

  def test_a_stop_after_a_round_checkpoints_it_first(self):
    checkpoints = [5]
    event, hook = self._hook(checkpoints)
    hook.after_round(6, [], None)  # Not interrupted: nothing.
    self.assertEqual(checkpoints, [5])
    event.set()
    with self.assertRaisesRegex(
        KeyboardInterrupt, 'Interrupted at round 8; called again, the '
        'run resumes from its checkpoint after round 7'):
      hook.after_round(7, [], None)
    self.assertEqual(checkpoints, [5, 8])
    checkpoints = [8]  # Checkpointed by its own hook already: not twice.
    event, hook = self._hook(checkpoints)
    event.set()
    with self.assertRaises(KeyboardInterrupt):
      hook.after_round(7, [], None)
    self.assertEqual(checkpoints, [8])

  def test_the_last_round_finishes_and_a_stop_before_a_round_checkpoints_too(self):
    checkpoints = [5]
    event, hook = self._hook(checkpoints)
    event.set()
    hook.after_round(9, [], None)  # The last round: the run finishes as usual.
    with self.assertRaisesRegex(KeyboardInterrupt, 'Interrupted at round 6; .* after round 5'):
      hook.before_round(6, [], None)  # Between rounds 5 and 6 (no training yet): 6 done.
    self.assertEqual(checkpoints, [5, 6])


class RunRoundsTest(tf.test.TestCase):

  def test_unsampled_state_unchanged_sampled_state_matches_next(self):
    process = ec.build_ec(tiny_models.softmax_model_fn(),
                          keep_percent=20.0,
                          client_optimizer=_OPTIMIZER)
    data = _client_data(4)
    sampler = sampling.build_client_sampler(data.client_ids, 2, seed=7)
    with modes.build_execution('local') as execution:
      run = loop.AlgorithmRun('ec', process, execution)
      # A manual replica of the loop: same process, same sampler, explicit state list.
      state = process.initialize()
      states = {cid: process.initial_client_state() for cid in data.client_ids}
      snapshots = []

      def check(round_num, row):
        nonlocal state
        ids = row.client_ids
        self.assertEqual(ids, sampler(round_num))
        before = snapshots[-1] if snapshots else {}
        for cid in data.client_ids:
          if cid not in ids and cid in before:
            for got, want in zip(run.store.get(cid)['accumulator'], before[cid]):
              self.assertAllEqual(got, want)
        output = tiny_models.next_round(process, state,
                                        [data.create_tf_dataset_for_client(c) for c in ids],
                                        [states[c] for c in ids], ids)
        state = output.state
        for cid, new in zip(ids, output.client_states):
          states[cid] = new
          for got, want in zip(run.store.get(cid)['accumulator'], new['accumulator']):
            self.assertAllEqual(got, want)
        snapshots.append({
            cid: [np.copy(t) for t in run.store.get(cid)['accumulator']] for cid in data.client_ids
        })
        self.assertEqual(row['ec'].bytes_uploaded, 2 * 5 * 8)  # 5 (value, index) pairs.
        self.assertGreater(row['ec'].bytes_driver_workers, 0)

      rows = hooks.CollectRows()
      loop.run_rounds([run],
                      loop.datasets_of(data),
                      sampler,
                      start_round=0,
                      end_round=4,
                      hooks=[_Check(check), rows],
                      execution_stats=execution.stats)
    self.assertLen(rows.rows, 5)  # 4 rounds and the end.
    self.assertLen(snapshots, 4)
    sampled = {cid for row in rows.rows for cid in row.client_ids}
    self.assertGreater(len(sampled), 2)  # Different clients took part in different rounds.

  def test_mismatched_client_states_are_rejected(self):
    process = ec.build_ec(tiny_models.softmax_model_fn(),
                          keep_percent=20.0,
                          client_optimizer=_OPTIMIZER)
    with modes.build_execution('inprocess') as execution:
      run = loop.AlgorithmRun('ec', process, execution)
      with self.assertRaises(client_state.ClientStateMismatchError):
        run.store.update(['c0'], [{'accumulator': [np.zeros((4, 3), np.float32)]}])

  def test_runs_share_given_initial_weights_in_every_mode(self):
    model_fn = tiny_models.softmax_model_fn()
    weights = tff.learning.models.ModelWeights(
        trainable=[np.full((4, 3), 0.5, np.float32),
                   np.arange(3, dtype=np.float32)],
        non_trainable=[])
    for mode in ('local', 'inprocess'):
      with modes.build_execution(mode) as execution:
        for process in (ec.build_ec(model_fn, keep_percent=20.0, client_optimizer=_OPTIMIZER),
                        tff_baselines.build_tff_fedavg(model_fn, client_optimizer=_OPTIMIZER)):
          run = loop.AlgorithmRun('x', process, execution, initial_weights=weights)
          for got, want in zip(run.model_weights().trainable, weights.trainable):
            self.assertAllEqual(got, want)

  def test_test_loss_is_recorded_before_each_round(self):
    process = ec_ffl.build_ec_ffl(tiny_models.softmax_model_fn(),
                                  keep_percent=20.0,
                                  local_epochs=1,
                                  client_optimizer=_OPTIMIZER)
    losses = iter([2.0, 1.0, 0.25])
    evaluated = []

    def evaluate(weights):
      evaluated.append(weights)
      return {'loss': next(losses)}

    data = _client_data(2)
    sampler = sampling.build_client_sampler(data.client_ids, 2, 0)
    with modes.build_execution('inprocess') as execution:
      run = loop.AlgorithmRun('ec_ffl', process, execution)
      rows = hooks.CollectRows()
      loop.run_rounds([run],
                      loop.datasets_of(data),
                      sampler,
                      start_round=0,
                      end_round=3,
                      hooks=[hooks.TestLossFeedback(evaluate), rows])
    self.assertLen(evaluated, 3)
    # R' = R (L_ref / L)^(1/3): 20, 20 * 2^(1/3), 20 * 8^(1/3).
    self.assertAllClose([r['ec_ffl'].train['client_work']['keep_percent'] for r in rows.rows[:3]],
                        [20.0, 20.0 * 2**(1 / 3), 40.0],
                        rtol=1e-6)
    # With the round's evaluation (every round here) the feedback reuses it: one a round.
    losses, evaluated[:] = iter([2.0, 1.0, 0.25, 0.25]), []
    with modes.build_execution('inprocess') as execution:
      run = loop.AlgorithmRun('ec_ffl', process, execution)
      rows = hooks.CollectRows()
      loop.run_rounds([run],
                      loop.datasets_of(data),
                      sampler,
                      start_round=0,
                      end_round=3,
                      hooks=[hooks.Evaluation(evaluate, 1),
                             hooks.TestLossFeedback(evaluate), rows])
    self.assertLen(evaluated, 4)  # Rounds 0, 1, 2 and the end: none twice.
    self.assertAllClose([r['ec_ffl'].train['client_work']['keep_percent'] for r in rows.rows[:3]],
                        [20.0, 20.0 * 2**(1 / 3), 40.0],
                        rtol=1e-6)
    with self.assertRaisesRegex(ValueError, 'ec_ffl adapt to the test loss: add a '
                                'hooks.TestLossFeedback'):
      with modes.build_execution('inprocess') as execution:
        loop.run_rounds([loop.AlgorithmRun('ec_ffl', process, execution)],
                        loop.datasets_of(data),
                        sampler,
                        start_round=0,
                        end_round=1)

  def test_a_round_of_only_nonfinite_clients_stops_the_run(self):
    process = fedavg.build_fedavg(tiny_models.softmax_model_fn(),
                                  client_optimizer=tff.learning.optimizers.build_sgdm(np.inf))
    data = _client_data(3)
    with modes.build_execution('inprocess') as execution:
      run = loop.AlgorithmRun('fedavg', process, execution)
      with self.assertRaisesRegex(hooks.NonFiniteRoundError,
                                  r'Round 0: every client of fedavg \(3\) returned non-finite'):
        loop.run_rounds([run],
                        loop.datasets_of(data),
                        sampling.build_client_sampler(data.client_ids, 3, 0),
                        start_round=0,
                        end_round=2,
                        hooks=[hooks.StopOnNonFiniteRound()])


if __name__ == '__main__':
  tf.test.main()
