"""The benchmarks' models on synthetic client data, as tasks of the task registry's kind.

Images are random uint8 pixels, batched and scaled per batch as the tasks do; text is random
character ids in the GRU's fixed batches; so a round moves and computes what a run on the
real data does:

  cnn          the authors' MNIST CNN (582,026 parameters), lr 0.215, momentum 0.99;
  fc           the authors' linear MNIST FC (36,356,525), lr 0.001, momentum 0.99;
  masking_cnn  the masking study's CIFAR-10 CNN (315,722), lr 0.05, no momentum;
  vgg11, vgg16 the authors' VGG on CIFAR-10 (28,144,010 / 33,638,218), lr 0.002, momentum
               0.99, p = 5;
  gru          the authors' Shakespeare GRU (4,045,398) with the project's GRU layer, lr 0.005,
               every step regularized, batches of 8 x 100 characters (a client's examples
               are its sequences); `gru_keras` the same model with Keras's own GRU layer.
"""

import collections
from collections.abc import Callable
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.tasks import gru
from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks


@dataclasses.dataclass(frozen=True)
class SyntheticModel:
  """A benchmark model: its input, Keras builder, optimizer and FLARE's p.

  Attributes:
    feature_shape: one example's input shape (images: uint8 pixels; text: [sequence]).
    keras_builder: builds the Keras model.
    learning_rate, momentum: the client optimizer's, as its task trains it.
    reg_steps: FLARE's p for this model (the task's).
    text: character batches of `models.SHAKESPEARE_BATCH` sequences, logits out.
  """

  feature_shape: tuple[int, ...]
  keras_builder: Callable[[], tf.keras.Model]
  learning_rate: float
  momentum: float
  reg_steps: int | str = 1
  text: bool = False


_GRU_SHAPE = (models.SHAKESPEARE_SEQUENCE,)
MODELS = {
    'cnn':
        SyntheticModel((28, 28, 1), models.mnist_cnn, 0.215, 0.99),
    'fc':
        SyntheticModel((784,), lambda: models.mnist_fc(), 0.001, 0.99),
    'masking_cnn':
        SyntheticModel((32, 32, 3), lambda: models.masking_cnn(0), 0.05, 0.0),
    'vgg11':
        SyntheticModel((32, 32, 3), lambda: models.vgg(11), 0.002, 0.99, 5),
    'vgg16':
        SyntheticModel((32, 32, 3), lambda: models.vgg(16), 0.002, 0.99, 5),
    'gru':
        SyntheticModel(_GRU_SHAPE, models.shakespeare_gru, 0.005, 0.0, 'all', text=True),
    'gru_keras':
        SyntheticModel(_GRU_SHAPE,
                       lambda: models.shakespeare_gru(layer=tf.keras.layers.GRU),
                       0.005,
                       0.0,
                       'all',
                       text=True),
}


def loss_fn(model: str) -> tf.keras.losses.Loss:
  """The task's loss: from the softmax output, or from the GRU's logits."""
  return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=MODELS[model].text)


def model_fn(model: str):
  """The `tff.learning` model constructor of `model` (a key of `MODELS`)."""
  spec = MODELS[model]
  if spec.text:
    layer = tf.keras.layers.GRU if model == 'gru_keras' else gru.GRU
    return models.shakespeare_model_fn(layer=layer)
  return models.tff_model_fn(spec.keras_builder, spec.feature_shape)


def client_optimizer(model: str) -> tff.learning.optimizers.Optimizer:
  """SGD with the model's learning rate and momentum, as its task trains it."""
  spec = MODELS[model]
  return tff.learning.optimizers.build_sgdm(spec.learning_rate, momentum=spec.momentum or None)


def client_data(model: str, num_clients: int, num_examples: int,
                batch_size: int) -> tff.simulation.datasets.ClientData:
  """`num_clients` clients `client_<i>` of `num_examples` random examples for `model`.

  Text clients hold `num_examples` sequences in batches of `models.SHAKESPEARE_BATCH`
  (`batch_size` is not used: the GRU's batch is fixed).
  """
  spec = MODELS[model]
  rng = np.random.default_rng(0)
  if spec.text:
    vocab, batch = models.SHAKESPEARE_VOCAB_SIZE, models.SHAKESPEARE_BATCH
    count = max(batch, num_examples - num_examples % batch)
    data: dict[str, collections.OrderedDict[str, np.ndarray]] = {
        f'client_{i}': collections.OrderedDict(x=rng.integers(0,
                                                              vocab,
                                                              size=(count,) + spec.feature_shape,
                                                              dtype=np.int64),
                                               y=rng.integers(0,
                                                              vocab,
                                                              size=(count,) + spec.feature_shape,
                                                              dtype=np.int64))
        for i in range(num_clients)
    }
    return tff.simulation.datasets.TestClientData(data).preprocess(
        lambda d: d.batch(batch, drop_remainder=True))
  data = {
      f'client_{i}':
      collections.OrderedDict(x=rng.integers(0,
                                             256,
                                             size=(num_examples,) + spec.feature_shape,
                                             dtype=np.uint8),
                              y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32))
      for i in range(num_clients)
  }
  return tff.simulation.datasets.TestClientData(data).preprocess(
      lambda d: d.batch(batch_size).map(tasks.scale_batch))


def task(model: str, num_clients: int, num_examples: int, batch_size: int) -> tasks.Task:
  """A `tasks.Task` of synthetic clients (no test set): the loop's own client datasets."""
  spec = MODELS[model]
  data = client_data(model, num_clients, num_examples, batch_size)
  return tasks.Task(f'synthetic_{model}',
                    model_fn(model),
                    data,
                    test_data=None,
                    hparams=dict(learning_rate=spec.learning_rate,
                                 momentum=spec.momentum,
                                 batch_size=batch_size,
                                 total_clients=num_clients,
                                 num_clients=num_clients,
                                 reg_steps=spec.reg_steps))
