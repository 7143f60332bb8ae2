"""Keras models of the FLARE paper's MNIST experiments and of the embedded demo, and their
conversion to `tff.learning` models.

* `mnist_cnn` (spec §6.2): Conv 32 5x5 ReLU, MaxPool, Conv 64 5x5 ReLU, MaxPool, Dense 512
  ReLU, Dense 10 softmax, and a second Softmax layer (582,026 parameters). Keras takes the
  input of the final Softmax as logits, so the loss is CE(softmax(p1)) with p1 the first
  softmax's output (the authors' double softmax, Q4: a loss floor of log(1 + 9/e) = 1.4612).
  Kernels use `GlorotNormal(seed=0)`; `kernel_seeds='shared'` (default) reuses one seeded
  instance as the authors' code does under TF 2.14, `'per_layer'` seeds kernel i with i as
  Keras 2.8 effectively did (neither recovers the authors' exact TF 2.8 weights).
* `mnist_fc` (spec §6.1): 784 -> 4069 -> 4069 -> 4069 -> 10, no activations (a linear model,
  Q5), unseeded Glorot-normal kernels, then a Softmax layer (36,356,525 parameters).
* `digits_mlp`: the demo's 64 -> 128 ReLU -> 10 network for scikit-learn's 8x8 digits.

Every classifier here is trained with `SparseCategoricalCrossentropy()` on its softmax
output, which Keras evaluates from the logits it caches on the final Softmax.
"""

import collections
from collections.abc import Callable

import tensorflow as tf
import tensorflow_federated as tff

KerasBuilder = Callable[[], tf.keras.Model]


def mnist_cnn(kernel_seeds: str = 'shared') -> tf.keras.Model:
  """The authors' MNIST CNN; input [B, 28, 28, 1] in [0, 1]."""
  if kernel_seeds == 'shared':
    shared = tf.keras.initializers.GlorotNormal(seed=0)
    initializers = [shared] * 4
  elif kernel_seeds == 'per_layer':
    initializers = [tf.keras.initializers.GlorotNormal(seed=i) for i in range(4)]
  else:
    raise ValueError(f"kernel_seeds must be 'shared' or 'per_layer', got {kernel_seeds!r}.")
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Input(shape=(28, 28, 1)),
      layers.Conv2D(32, 5, activation='relu', kernel_initializer=initializers[0]),
      layers.MaxPool2D(2),
      layers.Conv2D(64, 5, activation='relu', kernel_initializer=initializers[1]),
      layers.MaxPool2D(2),
      layers.Flatten(),
      layers.Dense(512, activation='relu', kernel_initializer=initializers[2]),
      layers.Dense(10, activation='softmax', kernel_initializer=initializers[3]),
      layers.Softmax(),
  ])


def mnist_fc(width: int = 4069) -> tf.keras.Model:
  """The authors' linear FC network; input [B, 784] in [0, 1]."""
  layers = tf.keras.layers
  return tf.keras.Sequential(
      [layers.Input(shape=(784,))] +
      [layers.Dense(width, kernel_initializer='glorot_normal') for _ in range(3)] +
      [layers.Dense(10, kernel_initializer='glorot_normal'), layers.Softmax()])


def digits_mlp(seed: int = 0) -> tf.keras.Model:
  """A small ReLU network for 8x8 digits; input [B, 64] in [0, 1]."""
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Input(shape=(64,)),
      layers.Dense(128, activation='relu',
                   kernel_initializer=tf.keras.initializers.GlorotNormal(seed=seed)),
      layers.Dense(10, kernel_initializer=tf.keras.initializers.GlorotNormal(seed=seed + 1)),
      layers.Softmax(),
  ])


def input_spec(feature_shape: tuple[int, ...]) -> collections.OrderedDict:
  """Batches of `OrderedDict(x=float32[B, *feature_shape], y=int32[B, 1])`."""
  return collections.OrderedDict(
      x=tf.TensorSpec([None, *feature_shape], tf.float32),
      y=tf.TensorSpec([None, 1], tf.int32))


def tff_model_fn(keras_builder: KerasBuilder, feature_shape: tuple[int, ...]):
  """A `model_fn` for the processes: the Keras model as a `tff.learning` model.

  Loss: sparse categorical cross-entropy on the softmax output (see the module docstring);
  metric: sparse categorical accuracy.
  """

  def model_fn() -> tff.learning.models.VariableModel:
    return tff.learning.models.from_keras_model(
        keras_builder(),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=input_spec(feature_shape),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  return model_fn
