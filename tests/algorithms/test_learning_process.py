"""Tests of `tff_flare.algorithms.learning_process`: a process driven by TFF's own training
loop trains as the project's loop does."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

import tff_flare
from tests import tiny_models
from tff_flare.algorithms import learning_process


def _optimizer():
  return tff.learning.optimizers.build_sgdm(0.1, momentum=0.9)


class AsLearningProcessTest(tf.test.TestCase):

  def test_tff_training_loop_equals_simulate(self):
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    fedavg = tff_flare.build_fedavg(tiny_models.SOFTMAX_MODEL_FN, client_optimizer=_optimizer())
    learning = learning_process.as_learning_process(fedavg)
    self.assertIsInstance(learning, tff.learning.templates.LearningProcess)
    releases = tff.program.MemoryReleaseManager()
    state = tff.simulation.run_training_process(learning,
                                                lambda round_num: list(data.values()),
                                                total_rounds=3,
                                                metrics_managers=[releases])
    ours = tff_flare.simulate({'fedavg': fedavg},
                              data,
                              rounds=3,
                              client_threads=1,
                              log=lambda _: None)
    theirs = learning.get_model_weights(state)
    initial = learning.get_model_weights(learning.initialize())
    self.assertNotAllClose(initial.trainable, theirs.trainable)  # It trained.
    self.assertAllClose(ours.model_weights['fedavg'].trainable,
                        theirs.trainable,
                        rtol=1e-5,
                        atol=1e-6)
    # TFF's loop releases rounds 1-3 with the process's metrics.
    released = releases.values()
    self.assertEqual(sorted(released), [1, 2, 3])
    losses = [released[r]['client_work']['train']['loss'] for r in (1, 2, 3)]
    self.assertTrue(all(np.isfinite(losses)), losses)
    self.assertLess(losses[-1], losses[0])

  def test_what_has_no_place_in_tffs_next_is_refused(self):
    model_fn = tiny_models.SOFTMAX_MODEL_FN
    for process, message in ((
        tff_flare.build_flare(model_fn, client_optimizer=_optimizer()),
        r"This process's clients keep a state \(<accumulator=.*\), which TFF's "
        r'next\(state, client_data\) has no place for: run it with tff_flare.simulate\.'),
                             (tff_flare.build_masked_fedavg(model_fn,
                                                            client_optimizer=_optimizer(),
                                                            keep_probability=0.5,
                                                            mask_mode='independent'),
                              r"clients take an input drawn from their ids \(int64\)")):
      with self.assertRaisesRegex(ValueError, message):
        learning_process.as_learning_process(process)
    with self.assertRaisesRegex(TypeError, 'takes a process of this project .*got dict'):
      learning_process.as_learning_process({})
    theirs = tff.learning.algorithms.build_unweighted_fed_avg(model_fn, _optimizer())
    self.assertIs(learning_process.as_learning_process(theirs), theirs)
    # TFF's FedAvg as this project wraps it (its metrics beside the project's) fits too.
    wrapped = tff_flare.build_tff_fedavg(model_fn, client_optimizer=_optimizer())
    self.assertIsInstance(learning_process.as_learning_process(wrapped),
                          tff.learning.templates.LearningProcess)


if __name__ == '__main__':
  tf.test.main()
