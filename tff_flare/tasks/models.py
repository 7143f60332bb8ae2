"""Keras models of the FLARE paper and of the embedded demo, and their `tff.learning` form.

Qn and Rn refer to `docs/faithfulness.md`.

* `mnist_cnn` (R12): Conv 32 5x5 ReLU, MaxPool, Conv 64 5x5 ReLU, MaxPool, Dense 512 ReLU,
  Dense 10 softmax, and a second Softmax layer (582,026 parameters). Keras takes the input
  of the final Softmax as logits, so the loss is CE(softmax(p1)) with p1 the first
  softmax's output (the authors' double softmax, Q4: a loss floor of log(1 + 9/e) = 1.4612).
  Kernels use `GlorotNormal(seed=0)`; `kernel_seeds='shared'` (default) reuses one seeded
  instance as the authors' code does under TF 2.14, `'per_layer'` seeds kernel i with i as
  Keras 2.8 effectively did (neither recovers the authors' exact TF 2.8 weights). Another
  `seed` gives another initial model of the same kind.
* `mnist_fc` (R12): 784 -> 4069 -> 4069 -> 4069 -> 10, no activations (a linear model,
  Q5), Glorot-normal kernels (unseeded as the authors', or seeded per layer), then a Softmax
  layer (36,356,525 parameters).
* `mnist_logreg` (ours, not the authors'): multinomial logistic regression (784 -> 10,
  softmax), a convex model for the sparsity-scaling study; zero initial model by default.
* `vgg` (R12): VGG11/16/19 for 32x32x3 images, 3x3 'same' convolutions, 2x2 max-pool
  after each block, no batch norm, Flatten -> Dense 4096 ReLU -> Dropout 0.5 -> Dense 4096
  ReLU -> Dropout 0.5 -> Dense classes softmax. VGG11 follows the authors: no activation
  between the paired convolutions of a block (one ReLU per block). Glorot-uniform kernels
  (unseeded as the authors, or seeded per layer), zero biases. CIFAR-100 gets 100 outputs:
  the authors' 10-output head with 0-99 labels (Q17) is a bug that cannot train, fixed here.
* `shakespeare_gru` (R12): Embedding(86, 256) -> GRU(1024, stateful, reset_after=False,
  Glorot-uniform recurrent kernel) -> Dense(86) logits, for a fixed batch of 8 sequences of
  100 characters (4,045,398 parameters). The GRU layer is `gru.GRU`: Keras's layer with the
  same variables and function, computed a sequence at a time (~10x faster on a CPU;
  `layer=tf.keras.layers.GRU` builds Keras's own).
* `masking_cnn` (masking study): Conv 32 3x3 ReLU, MaxPool, Conv 64 3x3 ReLU, MaxPool,
  Dense 128 ReLU, Dense 10, seeded.
* `digits_mlp`: the demo's 64 -> 128 ReLU -> 10 network for scikit-learn's 8x8 digits.

Every classifier here is trained with `SparseCategoricalCrossentropy()` on its softmax
output, which Keras evaluates from the logits it caches on the final Softmax.
"""

import collections
from collections.abc import Callable

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.tasks import gru

KerasBuilder = Callable[[], tf.keras.Model]


def mnist_cnn(kernel_seeds: str = 'shared',
              double_softmax: bool = True,
              seed: int = 0) -> tf.keras.Model:
  """The authors' MNIST CNN; input [B, 28, 28, 1] in [0, 1].

  Args:
    kernel_seeds: 'shared' or 'per_layer' (see the module docstring).
    double_softmax: keep the authors' second Softmax layer (Q4); False gives the plain
      softmax classifier (which needs a re-tuned learning rate).
    seed: the GlorotNormal seed (the authors': 0); 'per_layer' seeds kernel i with seed + i.
  """
  if kernel_seeds == 'shared':
    shared = tf.keras.initializers.GlorotNormal(seed=seed)
    initializers = [shared] * 4
  elif kernel_seeds == 'per_layer':
    initializers = [tf.keras.initializers.GlorotNormal(seed=seed + i) for i in range(4)]
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
  ] + ([layers.Softmax()] if double_softmax else []))


def mnist_fc(width: int = 4069, seed=None) -> tf.keras.Model:
  """The authors' linear FC network; input [B, 784] in [0, 1].

  Args:
    width: the hidden widths (the authors' 4069).
    seed: None for unseeded Glorot-normal kernels (the authors', Q6), else layer i is seeded
      with seed + i.
  """
  layers = tf.keras.layers
  return tf.keras.Sequential([layers.Input(shape=(784,))] + [
      layers.Dense(width, kernel_initializer=_kernel_initializer('GlorotNormal', seed, i))
      for i in range(3)
  ] + [
      layers.Dense(10, kernel_initializer=_kernel_initializer('GlorotNormal', seed, 3)),
      layers.Softmax()
  ])


VGG_BLOCKS = {
    # (filters of each convolution, ReLU after every convolution or only the block's last)
    11: ([[64], [128], [256, 256], [512, 512], [512, 512]], False),
    16: ([[64, 64], [128, 128], [256] * 3, [512] * 3, [512] * 3], True),
    19: ([[64, 64], [128, 128], [256] * 4, [512] * 4, [512] * 4], True),
}


def _kernel_initializer(kind: str, seed, index: int):
  """`kind` initializer, unseeded when `seed` is None, else seeded with `seed + index`."""
  return tf.keras.initializers.get({
      'class_name': kind,
      'config': {
          'seed': None if seed is None else seed + index
      }
  })


def mnist_logreg(seed=None) -> tf.keras.Model:
  """Multinomial logistic regression on MNIST; input [B, 784] in [0, 1] (7,850 parameters).

  A convex model (the sparsity-scaling study): one Dense(10) layer and a softmax.

  Args:
    seed: None for a zero initial model (the convex analyses' starting point), else a
      Glorot-normal kernel seeded with `seed`.
  """
  layers = tf.keras.layers
  kernel = 'zeros' if seed is None else tf.keras.initializers.GlorotNormal(seed=seed)
  return tf.keras.Sequential([
      layers.Input(shape=(784,)),
      layers.Dense(10, kernel_initializer=kernel),
      layers.Softmax(),
  ])


def vgg(depth: int, num_classes: int = 10, seed=None, width_divisor: int = 1) -> tf.keras.Model:
  """VGG11/16/19 of the authors; input [B, 32, 32, 3] in [0, 1].

  Args:
    depth: 11, 16 or 19.
    num_classes: outputs of the last layer.
    seed: None for unseeded initializers (the authors'), else layer i is seeded with seed+i.
    width_divisor: divides every layer's width (1: the authors' model; larger values give
      the same architecture, small enough for tests).
  """
  if depth not in VGG_BLOCKS:
    raise ValueError(f'VGG depth must be one of {sorted(VGG_BLOCKS)}, got {depth}.')
  blocks, relu_every_conv = VGG_BLOCKS[depth]
  layers = tf.keras.layers
  stack = [layers.Input(shape=(32, 32, 3))]
  index = 0
  for block in blocks:
    for i, filters in enumerate(block):
      last = i == len(block) - 1
      stack.append(
          layers.Conv2D(filters // width_divisor,
                        3,
                        padding='same',
                        activation='relu' if relu_every_conv or last else None,
                        kernel_initializer=_kernel_initializer('GlorotUniform', seed, index)))
      index += 1
    stack.append(layers.MaxPool2D(2))
  stack.append(layers.Flatten())
  for _ in range(2):
    stack += [
        layers.Dense(4096 // width_divisor,
                     activation='relu',
                     kernel_initializer=_kernel_initializer('GlorotUniform', seed, index)),
        layers.Dropout(0.5)
    ]
    index += 1
  stack.append(
      layers.Dense(num_classes,
                   activation='softmax',
                   kernel_initializer=_kernel_initializer('GlorotUniform', seed, index)))
  return tf.keras.Sequential(stack)


SHAKESPEARE_VOCAB_SIZE = 86
SHAKESPEARE_BATCH = 8
SHAKESPEARE_SEQUENCE = 100


def shakespeare_gru(seed=None,
                    units: int = 1024,
                    layer: type[tf.keras.layers.GRU] = gru.GRU) -> tf.keras.Model:
  """The authors' char-GRU; input int64 [8, 100] character ids, output [8, 100, 86] logits.

  Args:
    seed: None for unseeded initializers (the authors'), else layer i is seeded with seed+i.
    units: 1024 in the authors' model; fewer give a smaller GRU of the same kind for tests.
    layer: the GRU layer class: `gru.GRU` (default) or Keras's `tf.keras.layers.GRU`; the
      same variables, initial values and function.
  """
  layers = tf.keras.layers
  embedding_init = tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed)
  return tf.keras.Sequential([
      layers.Input(batch_shape=(SHAKESPEARE_BATCH, SHAKESPEARE_SEQUENCE), dtype=tf.int64),
      layers.Embedding(SHAKESPEARE_VOCAB_SIZE, 256, embeddings_initializer=embedding_init),
      layer(units,
            return_sequences=True,
            stateful=True,
            reset_after=False,
            implementation=1,
            kernel_initializer=_kernel_initializer('GlorotUniform', seed, 1),
            recurrent_initializer=_kernel_initializer('GlorotUniform', seed, 2)),
      layers.Dense(SHAKESPEARE_VOCAB_SIZE,
                   kernel_initializer=_kernel_initializer('GlorotUniform', seed, 3)),
  ])


def masking_cnn(seed: int = 0, num_classes: int = 10) -> tf.keras.Model:
  """The masking study's small CNN; input [B, 32, 32, 3] in [0, 1]."""
  layers = tf.keras.layers
  init = lambda i: _kernel_initializer('GlorotUniform', seed, i)
  return tf.keras.Sequential([
      layers.Input(shape=(32, 32, 3)),
      layers.Conv2D(32, 3, activation='relu', kernel_initializer=init(0)),
      layers.MaxPool2D(2),
      layers.Conv2D(64, 3, activation='relu', kernel_initializer=init(1)),
      layers.MaxPool2D(2),
      layers.Flatten(),
      layers.Dense(128, activation='relu', kernel_initializer=init(2)),
      layers.Dense(num_classes, kernel_initializer=init(3)),
      layers.Softmax(),
  ])


def digits_mlp(seed: int = 0) -> tf.keras.Model:
  """A small ReLU network for 8x8 digits; input [B, 64] in [0, 1]."""
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Input(shape=(64,)),
      layers.Dense(128,
                   activation='relu',
                   kernel_initializer=tf.keras.initializers.GlorotNormal(seed=seed)),
      layers.Dense(10, kernel_initializer=tf.keras.initializers.GlorotNormal(seed=seed + 1)),
      layers.Softmax(),
  ])


def input_spec(feature_shape: tuple[int, ...]) -> collections.OrderedDict:
  """Batches of `OrderedDict(x=float32[B, *feature_shape], y=int32[B, 1])`."""
  return collections.OrderedDict(x=tf.TensorSpec([None, *feature_shape], tf.float32),
                                 y=tf.TensorSpec([None, 1], tf.int32))


def shakespeare_model_fn(seed=None, units: int = 1024, layer: type[tf.keras.layers.GRU] = gru.GRU):
  """A `model_fn` for the GRU: cross-entropy from logits and per-character accuracy."""

  def model_fn() -> tff.learning.models.VariableModel:
    spec = tf.TensorSpec([SHAKESPEARE_BATCH, SHAKESPEARE_SEQUENCE], tf.int64)
    return tff.learning.models.from_keras_model(
        shakespeare_gru(seed, units, layer),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=collections.OrderedDict(x=spec, y=spec),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  return model_fn


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
