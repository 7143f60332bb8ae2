"""Tests of `tff_flare.algorithms.local_training`: penalized steps, optimizer restart, counters."""

import collections
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import local_training
from tff_flare.algorithms import registry
from tff_flare.execution import inprocess
from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks
from tff_flare.tasks import text


def _train(penalty_gradient_fn, penalized_steps, restart, momentum=0.9, num_batches=3):
  model = tiny_models.linear_regression_model_fn(3)()
  x, y = tiny_models.regression_arrays(0, 4 * num_batches)
  dataset = tiny_models.dataset_from_arrays(x, y, 4)
  optimizer = tff.learning.optimizers.build_sgdm(0.1, momentum=momentum)
  initial = tff.learning.models.ModelWeights(trainable=[tf.constant([[0.5], [-0.5], [1.0]])],
                                             non_trainable=[])

  @tf.function
  def run():
    penalty = None
    if penalty_gradient_fn is not None:
      penalty = local_training.Penalty(penalty_gradient_fn, penalized_steps, restart)
    return local_training.train_locally(model, optimizer, initial, dataset, penalty)

  result = run()
  return result, x, y


def _numpy(x, y, penalty, penalized_steps, restart, momentum=0.9):
  w = np.array([[0.5], [-0.5], [1.0]], np.float32)
  velocity = np.zeros_like(w)
  for k in range(len(y) // 4):
    xb, yb = x[4 * k:4 * k + 4], y[4 * k:4 * k + 4]
    g = (2.0 / 4) * xb.T @ (xb @ w - yb)
    if k < penalized_steps:
      g = g + penalty
    if restart and k == penalized_steps:
      velocity = np.zeros_like(w)
    velocity = momentum * velocity + g
    w = w - 0.1 * velocity
  return w


class LocalTrainingTest(tf.test.TestCase):

  def test_counts_steps_and_examples(self):
    result, _, _ = _train(None, local_training.ALL_STEPS, False)
    self.assertEqual(int(result.num_steps), 3)
    self.assertEqual(int(result.num_examples), 12)

  def test_constant_penalty_on_leading_steps_with_and_without_restart(self):
    penalty = np.array([[1.0], [0.0], [-2.0]], np.float32)
    penalty_fn = lambda w: [tf.constant(penalty)]
    for penalized_steps in (0, 1, 2, 3):
      for restart in (False, True):
        result, x, y = _train(penalty_fn, penalized_steps, restart)
        self.assertAllClose(result.trainable_weights[0],
                            _numpy(x, y, penalty, penalized_steps, restart),
                            rtol=1e-5,
                            atol=1e-6,
                            msg=f'p={penalized_steps} {restart}')

  def test_restart_changes_the_result_only_with_momentum(self):
    penalty_fn = lambda w: [tf.zeros([3, 1])]
    with_restart, _, _ = _train(penalty_fn, 1, True)
    without, _, _ = _train(penalty_fn, 1, False)
    self.assertNotAllClose(with_restart.trainable_weights[0], without.trainable_weights[0])
    with_restart, _, _ = _train(penalty_fn, 1, True, momentum=None)
    without, _, _ = _train(penalty_fn, 1, False, momentum=None)
    self.assertAllEqual(with_restart.trainable_weights[0], without.trainable_weights[0])


def _train_in_reduce(model, optimizer, initial_weights, dataset, penalty_gradient_fn,
                     penalized_steps, restart):
  """Local training as it was before `batches`: every step inside `dataset.reduce`.

  The reference for the tensor loop: the same arithmetic, one step per batch in the
  dataset's order, the step counter across epochs.
  """
  model_weights = tff.learning.models.ModelWeights.from_model(model)
  tf.nest.map_structure(lambda v, t: v.assign(t), model_weights, initial_weights)
  trainable = list(model_weights.trainable)
  specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)

  def step_fn(state, batch):
    num_examples, step, optimizer_state = state
    with tf.GradientTape() as tape:
      output = model.forward_pass(batch, training=True)
    gradients = [tf.convert_to_tensor(g) for g in tape.gradient(output.loss, trainable)]
    weights = [tf.convert_to_tensor(v) for v in trainable]
    gradients = tf.cond(tf.less(step, penalized_steps),
                        lambda: [g + p for g, p in zip(gradients, penalty_gradient_fn(weights))],
                        lambda: list(gradients))
    if restart:
      optimizer_state = tf.cond(tf.equal(step, penalized_steps),
                                lambda: optimizer.initialize(specs), lambda: optimizer_state)
    optimizer_state, new_weights = optimizer.next(optimizer_state, tuple(weights), tuple(gradients))
    for variable, value in zip(trainable, new_weights):
      variable.assign(value)
    return num_examples + tf.cast(output.num_examples, tf.int64), step + 1, optimizer_state

  num_examples, num_steps, _ = dataset.reduce(
      (tf.constant(0, tf.int64), tf.constant(0, tf.int32), optimizer.initialize(specs)), step_fn)
  return [tf.convert_to_tensor(v) for v in trainable], num_examples, num_steps


def _image_dataset(shape, num_examples, batch_size, epochs, seed=0):
  rng = np.random.default_rng(seed)
  data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=rng.integers(0, 256, size=(num_examples,) + shape, dtype=np.uint8),
                              y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32)))
  return tasks.batch_client(data, batch_size, epochs).map(tasks.scale_batch)


def _text_dataset(epochs):
  snippets = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(
          snippets=[('Now is the winter of our discontent, made glorious summer. ' * 60)[i:i + 400]
                    for i in range(0, 3200, 400)]))
  return text.character_batches(snippets, seed=3).repeat(epochs)


# name: (model_fn, a new client dataset); multi-batch, multi-epoch, a smaller last batch.
_FAMILIES = {
    'fc': (lambda: models.tff_model_fn(lambda: models.mnist_fc(width=16),
                                       (784,)), lambda: _image_dataset((784,), 50, 16, 2)),
    'cnn': (lambda: models.tff_model_fn(models.mnist_cnn, (28, 28, 1)), lambda: _image_dataset(
        (28, 28, 1), 20, 8, 2)),
    'vgg': (lambda: models.tff_model_fn(lambda: models.vgg(11, seed=0, width_divisor=32),
                                        (32, 32, 3)), lambda: _image_dataset(
                                            (32, 32, 3), 10, 4, 1)),
    'masking_cnn': (lambda: models.tff_model_fn(lambda: models.masking_cnn(0),
                                                (32, 32, 3)), lambda: _image_dataset(
                                                    (32, 32, 3), 80, 32, 1)),
    'gru': (lambda: models.shakespeare_model_fn(seed=0, units=16), lambda: _text_dataset(2)),
}


class SameAsTheLoopInsideTfDataTest(tf.test.TestCase, parameterized.TestCase):
  """The tensor loop trains as the old `dataset.reduce` loop did, on every model family."""

  @parameterized.named_parameters(*[(name, name) for name in _FAMILIES])
  def test_matches_the_reduce_loop(self, family):
    model_fn, make_dataset = _FAMILIES[family]
    model_fn = model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.05, momentum=0.9)
    results, initial = [], None
    for train in ('tensors', 'reduce'):
      model = model_fn()
      if initial is None:  # Both start from the first model's weights (FC is unseeded).
        initial = tf.nest.map_structure(tf.convert_to_tensor,
                                        tff.learning.models.ModelWeights.from_model(model))
      pull = lambda w: [0.01 * tf.sign(v) for v in w]

      @tf.function
      def run(dataset):
        if train == 'tensors':
          result = local_training.train_locally(
              model, optimizer, initial, dataset,
              local_training.Penalty(pull, steps=2, restart_optimizer=True))
          return result.trainable_weights, result.num_examples, result.num_steps
        return _train_in_reduce(model, optimizer, initial, dataset, pull, 2, True)

      results.append(run(make_dataset()))
    (weights, examples, steps), (expected_weights, expected_examples, expected_steps) = results
    self.assertEqual(int(steps), int(expected_steps))
    self.assertEqual(int(examples), int(expected_examples))
    self.assertGreater(int(steps), 2)  # The pull, the restart and plain steps all ran.
    for w, e in zip(weights, expected_weights):
      self.assertAllClose(w, e, rtol=1e-6, atol=1e-7)


def _train_locally_in_reduce(model, optimizer, initial_weights, dataset, penalty=None):
  """`train_locally`'s interface over `_train_in_reduce` (the loop before `batches`)."""
  if penalty is None:
    penalty = local_training.Penalty(lambda w: [tf.zeros_like(v) for v in w])
  steps = np.iinfo(np.int32).max if penalty.steps == local_training.ALL_STEPS else penalty.steps
  weights, num_examples, num_steps = _train_in_reduce(model, optimizer, initial_weights, dataset,
                                                      penalty.gradient_fn, steps,
                                                      penalty.restart_optimizer)
  return local_training.LocalTrainingResult(weights, num_examples, num_steps)


class EveryAlgorithmAsBeforeTest(tf.test.TestCase):
  """Every registered algorithm, three rounds in-process: the same states as with the loop
  inside tf.data (patched in as `train_locally`)."""

  def test_every_algorithm_matches_the_reduce_loop(self):
    ids = tiny_models.client_ids(3)
    checked = []
    for name in registry.NAMES:
      outcomes = []
      for patched in (False, True):
        process = tiny_models.tiny_process(name)
        if process.runs_only_on_tff:
          break
        bound = inprocess.InProcessProcess(process, num_threads=1)
        with mock.patch.object(
            local_training, 'train_locally',
            _train_locally_in_reduce if patched else local_training.train_locally):
          state = bound.initialize()
          clients = [bound.initial_client_state()] * 3
          for round_num in range(3):
            if process.uses_test_loss:
              state = bound.record_test_loss(state, 2.0 / (round_num + 1))
            datasets = [
                tiny_models.classification_dataset(s, num_examples=10, batch_size=4).repeat(2)
                for s in range(3)
            ]
            output = bound.next(state, datasets, clients, process.client_inputs(ids))
            state, clients = output.state, output.client_states
        bound.close()
        outcomes.append([np.asarray(t) for t in tf.nest.flatten((state, clients))])
      if len(outcomes) < 2:
        continue
      checked.append(name)
      for ours, before in zip(*outcomes):
        self.assertAllClose(ours, before, rtol=1e-6, atol=1e-7, msg=name)
    self.assertContainsSubset(
        {
            'flare', 'ec', 'ec_fedprox', 'ec_ffl', 'ef21', 'ef21_dense', 'fedavg',
            'mask_synchronized'
        }, checked)


if __name__ == '__main__':
  tf.test.main()
