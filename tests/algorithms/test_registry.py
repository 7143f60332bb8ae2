"""Every algorithm builds and runs a round on every model family of the authors' tasks.

The families: the FC, the CNN, VGG, the GRU (its embedding has a sparse `tf.IndexedSlices`
gradient) and the masking study's CNN, each as the task builds it, smaller where the real
size would make a unit test slow (the same layers, fewer units). Each algorithm is built as
its TFF process (where a model can break the build) and runs one round of two clients
in-process; FLARE also on TFF's local runtime for the CNN and the GRU (TFF's runtime runs
the same serialized computations the build made). On every family one algorithm per part
that touches the model (`tiny_models.PER_PART`): the others differ from these only in code
that never sees the model's variables (a schedule, a mask mode, the state kept), so they
would add tracing time and no coverage; every algorithm runs on the tiny models
(`tests/execution/test_inprocess.py`, `tests/algorithms/test_composer.py`).
"""

import collections
import dataclasses
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import registry
from tff_flare.algorithms import sparsification
from tff_flare.execution import inprocess
from tff_flare.tasks import models


def _image_family(builder, feature_shape):
  rng = np.random.default_rng(0)
  x = rng.uniform(size=(4,) + feature_shape).astype(np.float32)
  y = rng.integers(0, 10, size=(4, 1)).astype(np.int32)
  data = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(2)
  return models.tff_model_fn(builder, feature_shape), data


def _gru_family():
  rng = np.random.default_rng(0)
  ids = rng.integers(0, models.SHAKESPEARE_VOCAB_SIZE, size=(8, 101)).astype(np.int64)
  data = tf.data.Dataset.from_tensors(collections.OrderedDict(x=ids[:, :-1], y=ids[:, 1:]))
  return models.shakespeare_model_fn(seed=0, units=8), data


FAMILIES = {
    'fc': lambda: _image_family(lambda: models.mnist_fc(width=6), (784,)),
    'cnn': lambda: _image_family(models.mnist_cnn, (28, 28, 1)),
    'vgg11': lambda: _image_family(lambda: models.vgg(11, seed=0, width_divisor=16), (32, 32, 3)),
    'gru': _gru_family,
    'masking_cnn': lambda: _image_family(models.masking_cnn, (32, 32, 3)),
}


class EveryAlgorithmOnEveryModelTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters((family, family) for family in FAMILIES)
  def test_builds_and_runs_a_round(self, family):
    # Every algorithm is built as its TFF process and runs a round in-process (the same
    # RoundFunctions); FLARE, the one with every part (a penalty, an accumulator, a schedule),
    # also on TFF's local runtime (module docstring). Every algorithm on TFF's runtime:
    # tests/execution/test_inprocess.py (against in-process, on the tiny model).
    model_fn, data = FAMILIES[family]()
    hparams = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(
        0.01, momentum=0.9),
                                       keep_percent=1.0,
                                       total_clients=2,
                                       reg_steps=1,
                                       num_mask_draws=1,
                                       is_regularized=lambda name: 'embedding' not in name)
    for name in tiny_models.PER_PART:
      process = registry.build(name, model_fn, hparams)
      runners = [process] if process.runs_only_on_tff else [
          inprocess.InProcessProcess(process, num_threads=1)
      ]
      if name == 'flare' and family in ('cnn', 'gru'):  # TFF's runtime: a dense and a sparse
        runners.append(process)  # (IndexedSlices) gradient.
      for runner in runners:
        state = runner.initialize()
        if process.uses_test_loss:
          state = runner.record_test_loss(state, 2.0)
        clients = [runner.initial_client_state()] * 2
        output = runner.next(state, [data, data], clients,
                             process.client_inputs(tiny_models.client_ids(2)))
        communication = output.metrics['aggregator']['communication']
        where = f'{family} {name} {type(runner).__name__}'
        self.assertEqual(communication['num_clients_total'], 2, msg=where)
        self.assertGreater(communication['bytes_sent_total'], 0, msg=where)
        self.assertEqual(communication.get('nonfinite_clients_total', 0), 0, msg=where)

  def test_unknown_name_lists_the_known_ones(self):
    with self.assertRaisesRegex(ValueError, 'Unknown algorithm .fedsgd.; known: flare, ec'):
      registry.build(
          'fedsgd', tiny_models.softmax_model_fn(),
          registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.1)))


class KnobsTest(tf.test.TestCase):
  """`registry.Knobs` (the configuration's knob fields) and the algorithms' Params agree."""

  def test_every_params_field_is_its_knobs_field(self):
    knobs = registry.knob_fields()
    for name, algorithm in registry.ALGORITHMS.items():
      for field in dataclasses.fields(algorithm.params):
        self.assertEqual((knobs[field.name].default, dict(knobs[field.name].metadata)),
                         (field.default, dict(field.metadata)),
                         msg=f'{name}: {field.name}')

  def _check_with(self, params):
    rows = dict(registry.ALGORITHMS, odd=registry.Algorithm(params, None, 'Odd', 'C9'))
    with mock.patch.object(registry, 'ALGORITHMS', rows):
      registry.check_knobs()

  def test_a_knob_declared_otherwise_is_refused(self):

    @dataclasses.dataclass(frozen=True)
    class OtherDefault(hyperparameters.Params):
      keep_percent: float = sparsification.KEEP_PERCENT.field(5.0)

    with self.assertRaisesRegex(ValueError, 'Knob keep_percent of odd differs'):
      self._check_with(OtherDefault)

  def test_a_knob_missing_from_knobs_is_refused(self):

    @dataclasses.dataclass(frozen=True)
    class NewKnob(hyperparameters.Params):
      strength: float = hyperparameters.Knob(1.0, 'A strength.').field()

    with self.assertRaisesRegex(ValueError, 'strength of odd is not a field of registry.Knobs'):
      self._check_with(NewKnob)

  def test_a_knob_no_algorithm_takes_is_refused(self):
    rows = {n: a for n, a in registry.ALGORITHMS.items() if n != 'qsgd_ef'}
    with mock.patch.object(registry, 'ALGORITHMS', rows):
      with self.assertRaisesRegex(ValueError, r"no algorithm takes: \['qsgd_levels'\]"):
        registry.check_knobs()

  def test_hyperparameters_hold_every_knob_and_give_each_algorithm_its_own(self):
    hparams = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.1),
                                       tau=0.25)
    self.assertEqual(hparams.knobs.tau, 0.25)
    self.assertEqual(hparams.knobs.keep_percent, sparsification.KEEP_PERCENT.default)
    self.assertEqual(hparams.params('ec_fedprox').tau, 0.25)
    self.assertFalse(hasattr(hparams.params('ec'), 'tau'))
    with self.assertRaisesRegex(ValueError, r"Unknown hyperparameters \['taux'\]"):
      registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.1), taux=1.0)


if __name__ == '__main__':
  tf.test.main()
