"""Tests of `tff_flare.algorithms.ec_ffl`: R' and E' from the test loss, the cap of R' at the
tensor, `epochs_of`, and whole rounds against the spec written out in numpy."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import ec_ffl

# L_ref = 2 (the first loss); then a loss 8x higher (R' = R / 2, E' = rne(2 * 2) = 4) and one
# 100x lower (R' = 20 * 100**(1/3) = 92.8 %: the kernel's cut rank 13 > 12 entries is capped
# at the tensor, E' = max(1, rne(2 / 4.64)) = 1).
_LOSSES = [2.0, 16.0, 0.02, 2.0]


class AdaptiveScheduleTest(tf.test.TestCase):

  def test_keep_percent_and_epochs_follow_the_formula(self):
    schedule = ec_ffl.adaptive_schedule(keep_percent=20.0, local_epochs=2)
    state = schedule.initial_state()
    params = schedule.round_params(state)  # Before any loss: R and E.
    self.assertAllClose(params['keep_percent'], 20.0)
    self.assertEqual(int(params['local_epochs']), 2)
    for loss, keep, epochs in ((2.0, 20.0, 2), (16.0, 10.0, 4), (0.02, 20.0 * 100**(1 / 3), 1),
                               (0.5, 20.0 * 4**(1 / 3), 1), (3.0, 20.0 * (2 / 3)**(1 / 3), 2)):
      state = schedule.record_test_loss(state, tf.constant(loss, tf.float32))
      params = schedule.round_params(state)
      cube_root = (2.0 / loss)**(1 / 3)
      self.assertAllClose(params['keep_percent'], keep, rtol=1e-6, msg=loss)
      self.assertEqual(int(params['local_epochs']), max(1, round(2 / cube_root)), msg=loss)
      self.assertEqual(int(params['local_epochs']), epochs, msg=loss)
      self.assertAllClose(state['reference_loss'], 2.0)  # The first loss recorded stays.


class EpochsOfTest(tf.test.TestCase):

  def test_one_pass_repeated_the_adapted_number_of_times(self):
    batches = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=np.arange(6, dtype=np.float32)[:, None])).batch(
            2)  # 3 batches a pass.
    stored = batches.repeat(2)  # What a task with E = 2 gives the client.
    for epochs in (1, 3):
      got = [
          b['x'][:, 0].numpy().tolist() for b in ec_ffl.epochs_of(stored, 2, tf.constant(epochs))
      ]
      self.assertEqual(got, [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]] * epochs)
    # With E = 1 the dataset is one pass already.
    got = list(ec_ffl.epochs_of(batches, 1, tf.constant(2)))
    self.assertLen(got, 6)


class HandComputationTest(tf.test.TestCase):

  def test_matches_hand_computation(self):
    process = ec_ffl.build_ec_ffl(tiny_models.softmax_model_fn(),
                                  keep_percent=20.0,
                                  local_epochs=2,
                                  client_optimizer=tff.learning.optimizers.build_sgdm(0.5,
                                                                                      momentum=0.9))
    (weights, states, metrics), (expected, expected_states,
                                 notes) = (tiny_models.hand_computation(process,
                                                                        'ec_ffl',
                                                                        epochs=2,
                                                                        test_losses=_LOSSES,
                                                                        learning_rate=0.5,
                                                                        momentum=0.9,
                                                                        keep_percent=20.0))
    for ours, theirs in zip(weights, expected):
      self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for i in range(3):
      self.assertAllClose(states[i], expected_states[i], rtol=1e-5, atol=1e-6)
    for round_num, (round_metrics, note) in enumerate(zip(metrics, notes)):
      self.assertAllClose(round_metrics['client_work']['keep_percent'],
                          note['keep_percent'],
                          rtol=1e-6)
      self.assertEqual(round_metrics['client_work']['local_epochs'], note['local_epochs'])
      self.assertEqual(round_metrics['aggregator']['communication']['entries_sent_total'],
                       sum(note['sent'].values()),
                       msg=round_num)
    self.assertEqual([n['local_epochs'] for n in notes], [2, 4, 1, 2])
    # Round 2 (R' = 92.8 %): capped, each client sends all but the smallest entry of each
    # tensor: 11 of the kernel's 12 and 2 of the bias's 3.
    self.assertEqual(set(notes[2]['sent'].values()), {13})
    self.assertEqual(set(notes[0]['sent'].values()), {5})  # R = 20 %: 3 + 2.


if __name__ == '__main__':
  tf.test.main()
