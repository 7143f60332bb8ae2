"""Tiny models and client data shared by the tests (hand-checkable sizes)."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def linear_regression_spec(num_features: int):
  return collections.OrderedDict(
      x=tf.TensorSpec([None, num_features], tf.float32),
      y=tf.TensorSpec([None, 1], tf.float32))


def linear_regression_model_fn(num_features: int = 3, use_bias: bool = False):
  """`y_hat = x @ w (+ b)` with mean-squared-error loss; weights start at zero."""

  def model_fn():
    keras_model = tf.keras.Sequential([
        tf.keras.layers.Input((num_features,)),
        tf.keras.layers.Dense(1, use_bias=use_bias, kernel_initializer='zeros'),
    ])
    return tff.learning.models.from_keras_model(
        keras_model, loss=tf.keras.losses.MeanSquaredError(),
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
        keras_model, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=collections.OrderedDict(
            x=tf.TensorSpec([None, num_features], tf.float32),
            y=tf.TensorSpec([None, 1], tf.int32)),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  return model_fn


def regression_arrays(seed: int, num_examples: int, num_features: int = 3):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, num_features)).astype(np.float32)
  y = rng.normal(size=(num_examples, 1)).astype(np.float32)
  return x, y


def classification_dataset(seed: int, num_examples: int = 8, batch_size: int = 4,
                           num_features: int = 4, num_classes: int = 3) -> tf.data.Dataset:
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
