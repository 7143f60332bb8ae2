"""Tiny models and client data shared by the tests (hand-checkable sizes).

`tiny_process(name)` builds every registered algorithm once per test process on the one
softmax model with `TINY_HPARAMS` (a TFF process is immutable, so tests share it).
"""

import collections
import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# One algorithm per part that touches a model's variables, for the tests that run on real
# models (every algorithm runs on the tiny ones): FLARE the L1 pull and top-k with error
# feedback, EC+FedProx the proximal pull, EF21 its compressor, the synchronized mask masking
# and the broadcast seed, QSGD its quantizer, TFF's FedProx a TFF builder. The others differ
# from these only where no model variable is seen (a schedule, a mask mode, the state kept).
PER_PART = ('flare', 'ec_fedprox', 'ef21', 'mask_synchronized', 'qsgd_ef', 'tff_fedprox')


def linear_regression_spec(num_features: int):
  return collections.OrderedDict(x=tf.TensorSpec([None, num_features], tf.float32),
                                 y=tf.TensorSpec([None, 1], tf.float32))


def linear_regression_model_fn(num_features: int = 3, use_bias: bool = False):
  """`y_hat = x @ w (+ b)` with mean-squared-error loss; weights start at zero."""

  def model_fn():
    keras_model = tf.keras.Sequential([
        tf.keras.layers.Input((num_features,)),
        tf.keras.layers.Dense(1, use_bias=use_bias, kernel_initializer='zeros'),
    ])
    return tff.learning.models.from_keras_model(keras_model,
                                                loss=tf.keras.losses.MeanSquaredError(),
                                                input_spec=linear_regression_spec(num_features))

  return model_fn


def softmax_model_fn(num_features: int = 4, num_classes: int = 3, seed: int = 1):
  """A one-layer softmax classifier with a seeded kernel and a bias."""

  def model_fn():
    keras_model = tf.keras.Sequential([
        tf.keras.layers.Input((num_features,)),
        tf.keras.layers.Dense(num_classes,
                              kernel_initializer=tf.keras.initializers.GlorotNormal(seed)),
    ])
    return tff.learning.models.from_keras_model(
        keras_model,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=collections.OrderedDict(x=tf.TensorSpec([None, num_features], tf.float32),
                                           y=tf.TensorSpec([None, 1], tf.int32)),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  return model_fn


# The shared tiny setting: R = 20 % (kernel 4x3 keeps 3 entries, bias 3 keeps 2), momentum,
# p = 2, 2 empirical mask draws, q = 0.5.
TINY_HPARAMS = None  # Built on first use (the registry imports every algorithm).
SOFTMAX_MODEL_FN = softmax_model_fn()


def tiny_hparams():
  global TINY_HPARAMS  # pylint: disable=global-statement
  if TINY_HPARAMS is None:
    from tff_flare.algorithms import registry  # pylint: disable=g-import-not-at-top
    TINY_HPARAMS = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(
        0.5, momentum=0.9),
                                            keep_percent=20.0,
                                            total_clients=4,
                                            tau=0.5,
                                            tau_decay=1.5,
                                            reg_steps=2,
                                            num_mask_draws=2,
                                            keep_probability=0.5)
  return TINY_HPARAMS


@functools.lru_cache(maxsize=None)
def tiny_process(name: str):
  """The registered algorithm `name` on `SOFTMAX_MODEL_FN` with `tiny_hparams()`, built once."""
  from tff_flare.algorithms import registry  # pylint: disable=g-import-not-at-top
  return registry.build(name, SOFTMAX_MODEL_FN, tiny_hparams())


def regression_arrays(seed: int, num_examples: int, num_features: int = 3):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, num_features)).astype(np.float32)
  y = rng.normal(size=(num_examples, 1)).astype(np.float32)
  return x, y


def classification_dataset(seed: int,
                           num_examples: int = 8,
                           batch_size: int = 4,
                           num_features: int = 4,
                           num_classes: int = 3) -> tf.data.Dataset:
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, num_features)).astype(np.float32)
  y = rng.integers(0, num_classes, size=(num_examples, 1)).astype(np.int32)
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(batch_size)


def dataset_from_arrays(x, y, batch_size: int) -> tf.data.Dataset:
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(batch_size)


def trainable_arrays(process, state) -> list[np.ndarray]:
  return [np.asarray(t) for t in process.get_model_weights(state).trainable]


def client_ids(num_clients: int) -> list[str]:
  return [f'client_{i}' for i in range(num_clients)]


def next_round(process, state, datasets, client_states=None, ids=None):
  """`process.next` on these datasets (initial client states and ids `client_<i>` by default)."""
  ids = ids or client_ids(len(datasets))
  if client_states is None:
    client_states = [process.initial_client_state()] * len(datasets)
  return process.next(state, list(datasets), list(client_states), process.client_inputs(ids))


def train(process, datasets, num_rounds: int, state=None):
  """`num_rounds` rounds on the same clients: (final trainable weights, client states, outputs).
  """
  state = process.initialize() if state is None else state
  client_states = [process.initial_client_state()] * len(datasets)
  outputs = []
  for _ in range(num_rounds):
    output = next_round(process, state, datasets, client_states)
    state, client_states = output.state, output.client_states
    outputs.append(output)
  return trainable_arrays(process, state), client_states, outputs


def client_batches(seed: int, num_examples: int = 8, batch_size: int = 4):
  """One client's batches as numpy `(x, y)` pairs, those of `classification_dataset`."""
  return [(np.asarray(b['x'], np.float64), np.asarray(b['y']))
          for b in classification_dataset(seed, num_examples, batch_size)]


def run_participation(process,
                      num_clients: int,
                      participation,
                      *,
                      epochs: int = 1,
                      test_losses=None,
                      num_examples: int = 8,
                      batch_size: int = 4):
  """Rounds of `process` (in-process) where round r trains the clients `participation[r]`.

  Client i holds `classification_dataset(i)`, repeated `epochs` times; the others keep
  their states. Returns `(server trainable weights, {client index: state}, outputs)`.
  """
  from tff_flare.execution import inprocess  # pylint: disable=g-import-not-at-top
  bound = inprocess.InProcessProcess(process, num_threads=1)
  state = bound.initialize()
  states = {i: bound.initial_client_state() for i in range(num_clients)}
  outputs = []
  for round_num, present in enumerate(participation):
    if test_losses is not None:
      state = bound.record_test_loss(state, test_losses[round_num])
    datasets = [classification_dataset(i, num_examples, batch_size).repeat(epochs) for i in present]
    output = bound.next(state, datasets, [states[i] for i in present],
                        process.client_inputs([f'client_{i}' for i in present]))
    state = output.state
    for i, new_state in zip(present, output.client_states):
      states[i] = new_state
    outputs.append(output)
  bound.close()
  weights = [np.asarray(t) for t in bound.get_model_weights(state).trainable]
  return weights, states, outputs


def initial_trainable(process) -> list[np.ndarray]:
  return trainable_arrays(process, process.initialize())


# Three clients of two batches; each sits out one of the first three rounds.
PARTICIPATION = [[0, 1], [1, 2], [0, 2], [0, 1, 2]]


def hand_computation(process,
                     algorithm: str,
                     *,
                     epochs: int = 1,
                     test_losses=None,
                     participation=PARTICIPATION,
                     **hyperparameters):
  """`(ours, theirs)`: the process's rounds and `reference_numpy.simulate`'s, each
  `(server weights, {client: state arrays}, per round: (metrics, note))`."""
  from tests import reference_numpy  # pylint: disable=g-import-not-at-top
  weights, states, outputs = run_participation(process,
                                               3,
                                               participation,
                                               epochs=epochs,
                                               test_losses=test_losses)
  expected, expected_states, notes = reference_numpy.simulate(
      algorithm,
      initial_trainable(process), {i: client_batches(i) for i in range(3)},
      participation,
      epochs=epochs,
      test_losses=test_losses,
      **hyperparameters)
  ours_states = {i: [np.asarray(t) for t in tf.nest.flatten(states[i])] for i in states}
  return ((weights, ours_states, [o.metrics for o in outputs]), (expected, expected_states, notes))
