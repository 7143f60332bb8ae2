"""What a task is (`Task`), the options it is built from (`TaskOptions`), client batching.

A task is one row of the task table (`tasks.registry.TASKS`); its builder takes the checked
`TaskOptions` and returns a `Task`.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


@dataclasses.dataclass
class Task:
  """Everything a run needs about its task.

  Attributes:
    name: the registry name.
    model_fn: no-arg callable returning a `tff.learning` model (the processes' `model_fn`).
    train_data: `ClientData` of the clients in use, already batched (epochs repeated).
    test_data: batched `tf.data.Dataset` of the test set.
    hparams: the authors' defaults: `learning_rate`, `momentum`, `reg_steps`, `batch_size`,
      `total_clients`, `num_clients`, plus `is_regularized` where not every tensor is.
    round_train_data: `round_num -> ClientData` for a task whose client datasets change from
      round to round (a shuffle seeded per round); None when `train_data` serves every round.
    data_fingerprint: what identifies the data read by content
      (`data_sources.fingerprint`); a run records it, and a resume on other data is refused.
      None where unknown.
  """

  name: str
  model_fn: Callable[[], Any]
  train_data: tff.simulation.datasets.ClientData
  test_data: tf.data.Dataset
  hparams: dict
  round_train_data: Callable[[int], tff.simulation.datasets.ClientData] | None = None
  data_fingerprint: str | None = None
  _datasets: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

  def client_datasets(self, client_ids, round_num: int) -> list[tf.data.Dataset]:
    """The datasets of these clients in round `round_num`.

    Data that is the same every round is built into a dataset once per client and the
    dataset reused (building one costs ~10 ms of Python, a tenth of a CNN client's step; a
    dataset without a shuffle gives the same batches at every iteration).
    """
    if self.round_train_data is not None:
      data = self.round_train_data(round_num)
      return [data.create_tf_dataset_for_client(cid) for cid in client_ids]
    for cid in client_ids:
      if cid not in self._datasets:
        self._datasets[cid] = self.train_data.create_tf_dataset_for_client(cid)
    return [self._datasets[cid] for cid in client_ids]


@dataclasses.dataclass(frozen=True)
class TaskOptions:
  """`registry.build_task`'s options; a task's builder reads the ones it takes.

  Attributes:
    source: data source ('keras', 'tfds', 'npz', 'imagefolder'; 'tff', 'text'); task default
      if None.
    data_path: file or directory for the local sources (default: its file in `data_dir`).
    data_dir: the data directory (`data_sources.default_path`), and TFDS's.
    total_clients: clients the training set is split into (task default if None).
    num_clients: how many of them (the first ones) form the population in use.
    partition: one of `partitions.PARTITIONS` (task default if None).
    alpha, ratio, dominant_fraction: parameters of the dirichlet, quantity_skew and
      class_imbalance partitions.
    batch_size: local batch size; <= 0 for the whole client as one batch (full batch).
    epochs: local epochs (the client dataset is repeated).
    local_steps: a cap on a client's local steps a round: None for every batch of `epochs`
      passes; else exactly this many batches, drawn from the client's examples reshuffled
      every round (`capped_client`), so a large client costs the same as a small one and
      sees other examples each round. Takes `epochs` = 1.
    seed: seed of the partition and shuffles.
    model_seed: seed of the model's initializers (None: the authors' seeding: the CNN's
      GlorotNormal(seed=0), the FC, VGG and GRU unseeded, the demo's MLP from `seed`).
    double_softmax: for `DOUBLE_SOFTMAX_TASKS`, False builds the fixed model (one softmax)
      with `FIXED_CNN_LEARNING_RATE`; None or True: the authors' model.
    eval_data: what the image tasks evaluate on: 'test' (the test set) or 'train' (every
      training example of the clients in use: the objective the clients minimise, e.g. for
      a convex task's suboptimality).
    text_evaluation: Shakespeare's test set: 'authors' (2 batches of 8 x 100 characters,
      newly shuffled at every evaluation, as the authors' `evaluate(steps=2)`) or 'full'
      (every test client's batches, up to 200 each, the same at every evaluation).
  """

  source: str | None = None
  data_path: str | None = None
  data_dir: str | None = None
  total_clients: int | None = None
  num_clients: int | None = None
  partition: str | None = None
  alpha: float = 1.0
  ratio: float = 100.0
  dominant_fraction: float = 0.8
  batch_size: int | None = None
  epochs: int = 1
  local_steps: int | None = None
  seed: int = 0
  model_seed: int | None = None
  double_softmax: bool | None = None
  eval_data: str = 'test'
  text_evaluation: str = 'authors'

  def partition_options(self) -> dict:
    return dict(alpha=self.alpha, ratio=self.ratio, dominant_fraction=self.dominant_fraction)


def batch_client(dataset: tf.data.Dataset, batch_size: int, epochs: int) -> tf.data.Dataset:
  """Repeats `epochs` times, then batches (`batch_size <= 0`: one batch per epoch)."""
  if batch_size <= 0:
    count = dataset.cardinality()
    return dataset.batch(tf.maximum(count, 1)).repeat(epochs)
  return dataset.batch(batch_size).repeat(epochs)


# The most steps a round `local_steps` takes: a client's batches of a round are held at once
# (`algorithms.batches`, which refuses a dataset of unknown length this long); the rounds of
# both papers take at most a few thousand.
MAX_LOCAL_STEPS = 1 << 16


def round_seed(seed: int, round_num: int) -> int:
  """The shuffle seed of a round's client datasets (a new permutation every round)."""
  return int(np.random.SeedSequence([seed, round_num]).generate_state(1)[0])


def capped_client(examples: tf.data.Dataset, batch_size: int, steps: int,
                  seed: int) -> tf.data.Dataset:
  """`steps` batches from a client's examples, as a stream reshuffled at every pass.

  The examples are shuffled whole (a buffer of all of them; a new permutation at each pass
  over them), repeated without end and batched across pass boundaries, and the first `steps`
  batches taken: with 12,500 examples, 25 steps of 8 read 200 of them, others each round
  (`seed` is the round's, `round_seed`). `batch_size <= 0` (full batch): `steps` batches of
  every example (no shuffle: the batch is the same).

  Args:
    examples: the client's examples, unbatched, of known length (`from_tensor_slices`).
    batch_size: examples a step, or <= 0 for all of them.
    steps: batches to take (>= 1).
    seed: the shuffle seed.

  Returns:
    A dataset of exactly `steps` batches (known cardinality).
  """
  count = tf.maximum(examples.cardinality(), 1)
  if batch_size <= 0:
    return examples.batch(count).repeat().take(steps)
  shuffled = examples.shuffle(count, seed=seed, reshuffle_each_iteration=True)
  return shuffled.repeat().batch(batch_size).take(steps)
