"""The benchmarks' models on synthetic client data, as tasks of the task registry's kind.

Images are random uint8 pixels, batched and scaled per batch as the tasks do, so a round
moves and computes what a run on the real data does:

  cnn          the authors' MNIST CNN (582,026 parameters), lr 0.215, momentum 0.99;
  fc           the authors' linear MNIST FC (36,356,525), lr 0.001, momentum 0.99;
  masking_cnn  the masking study's CIFAR-10 CNN (315,722), lr 0.05, no momentum.
"""

import collections
from collections.abc import Callable
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks


@dataclasses.dataclass(frozen=True)
class SyntheticModel:
  feature_shape: tuple[int, ...]
  keras_builder: Callable[[], tf.keras.Model]
  learning_rate: float
  momentum: float


MODELS = {
    'cnn': SyntheticModel((28, 28, 1), models.mnist_cnn, 0.215, 0.99),
    'fc': SyntheticModel((784,), lambda: models.mnist_fc(), 0.001, 0.99),
    'masking_cnn': SyntheticModel((32, 32, 3), lambda: models.masking_cnn(0), 0.05, 0.0),
}


def model_fn(model: str):
  """The `tff.learning` model constructor of `model` (a key of `MODELS`)."""
  spec = MODELS[model]
  return models.tff_model_fn(spec.keras_builder, spec.feature_shape)


def client_optimizer(model: str) -> tff.learning.optimizers.Optimizer:
  """SGD with the model's learning rate and momentum, as its task trains it."""
  spec = MODELS[model]
  return tff.learning.optimizers.build_sgdm(spec.learning_rate, momentum=spec.momentum or None)


def client_data(model: str, num_clients: int, num_examples: int, batch_size: int
                ) -> tff.simulation.datasets.ClientData:
  """`num_clients` clients `client_<i>` of `num_examples` random images for `model`."""
  shape = MODELS[model].feature_shape
  rng = np.random.default_rng(0)
  data = {f'client_{i}': collections.OrderedDict(
      x=rng.integers(0, 256, size=(num_examples,) + shape, dtype=np.uint8),
      y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32))
          for i in range(num_clients)}
  return tff.simulation.datasets.TestClientData(data).preprocess(
      lambda d: d.batch(batch_size).map(tasks.scale_batch))


def task(model: str, num_clients: int, num_examples: int, batch_size: int) -> tasks.Task:
  """A `tasks.Task` of synthetic clients (no test set): the loop's own client datasets."""
  spec = MODELS[model]
  data = client_data(model, num_clients, num_examples, batch_size)
  return tasks.Task(f'synthetic_{model}', model_fn(model), data, test_data=None, hparams=dict(
      learning_rate=spec.learning_rate, momentum=spec.momentum, batch_size=batch_size,
      total_clients=num_clients, num_clients=num_clients))
