"""The authors' MNIST models on synthetic client data, for the benchmarks.

Images are random uint8 pixels, batched and scaled per batch as the tasks do, so a round
moves and computes what a run on real MNIST does.
"""

import collections

import numpy as np
import tensorflow_federated as tff

from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks

# name: (feature shape, Keras builder, the authors' client learning rate; momentum 0.99).
MODELS = {'cnn': ((28, 28, 1), models.mnist_cnn, 0.215),
          'fc': ((784,), lambda: models.mnist_fc(), 0.001)}


def model_fn(model: str):
  """The `tff.learning` model constructor of `model` ('cnn' or 'fc')."""
  feature_shape, keras_builder, _ = MODELS[model]
  return models.tff_model_fn(keras_builder, feature_shape)


def client_data(model: str, num_clients: int, num_examples: int, batch_size: int
                ) -> tff.simulation.datasets.ClientData:
  """`num_clients` clients `client_<i>` of `num_examples` random images for `model`."""
  shape = MODELS[model][0]
  rng = np.random.default_rng(0)
  data = {f'client_{i}': collections.OrderedDict(
      x=rng.integers(0, 256, size=(num_examples,) + shape, dtype=np.uint8),
      y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32))
          for i in range(num_clients)}
  return tff.simulation.datasets.TestClientData(data).preprocess(
      lambda d: d.batch(batch_size).map(tasks.scale_batch))
