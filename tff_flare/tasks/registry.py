"""The task registry: a name resolves to a model, federated training data and a test set.

Known tasks (defaults from the authors' configs, `docs/faithfulness.md` R9, R11, R12; the
masking study's from `docs/masking.md`):

| task | model | data, split | clients (total / used) | batch | lr, momentum | p |
|---|---|---|---|---|---|---|
| mnist_fc | linear FC | MNIST, contiguous slices of 600 | 100 / 10 | 600 | 0.001, 0.99 | 1 |
| mnist_cnn | CNN, double softmax | MNIST, contiguous 600 | 100 / 10 | 600 | 0.215, 0.99 | 1 |
| cifar10_vgg{11,16,19} | VGG | CIFAR-10, contiguous 12,500 | 4 / 4 | 500 | 0.002, 0.99 | 5 |
| cifar100_vgg{11,16,19} | VGG, 100 outputs | CIFAR-100, contiguous | 4 / 4 | 500 | 0.01, 0.99 | 5 |
| shakespeare_gru | GRU | one client per role; first 10 with > 30 batches | 10 | 8 x 100 chars | 0.005, 0 | all steps |
| cifar10_masking_cnn | small CNN | CIFAR-10, IID (or any partition) | 100 / 100 | 32 | 0.05, 0 | - |
| mnist_logreg | logistic regression (ours) | MNIST, IID | 10 / 10 | 600 | 0.1, 0 | 1 |
| digits_demo | 64-128-10 MLP | sklearn digits, contiguous | 10 / 10 | full | 0.5, 0 | 1 |

Each task is one row of `TASKS` (a `TaskSpec`: its sources, default population, the options
it takes and its builder: `images.build_image_task` for the image tasks, `_shakespeare_task`,
`_digits_task`), so a new task is a builder and a row (`docs/extending.md`).
`build_task(name, ...)` checks the options against the row (one it would ignore is refused),
then the builder loads the data (source per task: 'keras' by default for the images, the
authors' `tf.keras.datasets` loaders and so their example order; 'tff' for Shakespeare;
'tfds' is the TFDS loader; 'npz'/'imagefolder'/'text' read local files), partitions it
(`partitions`), and returns a `Task`.
"""

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.tasks import data_sources
from tff_flare.tasks import digits
from tff_flare.tasks import gru
from tff_flare.tasks import images
from tff_flare.tasks import models
from tff_flare.tasks import partitions
from tff_flare.tasks import task as task_lib
from tff_flare.tasks import text

# What callers use of the task's parts, by the registry's name.
Task = task_lib.Task
TaskOptions = task_lib.TaskOptions
batch_client = task_lib.batch_client
scale_pixels = images.scale_pixels
scale_batch = images.scale_batch
FIXED_CNN_LEARNING_RATE = images.FIXED_CNN_LEARNING_RATE
DOUBLE_SOFTMAX_TASKS = images.DOUBLE_SOFTMAX_TASKS

TEXT_EVALUATIONS = ('authors', 'full')
EVAL_DATA = ('test', 'train')

# What every task takes, and what some do (`TaskSpec.options`).
COMMON_OPTIONS = ('num_clients', 'epochs', 'local_steps', 'seed', 'model_seed')
_PARTITIONED = ('total_clients', 'partition', 'alpha', 'ratio', 'dominant_fraction', 'batch_size')
_LOCAL_FILES = ('source', 'data_path', 'data_dir')
_IMAGE_ONLY = ('eval_data',)
# The options `check_options` sees when set (not None); the others have a value always.
_CHECKED_WHEN_SET = ('source', 'data_path', 'data_dir', 'total_clients', 'partition',
                     'double_softmax', 'batch_size')


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """A row of the task table: its data sources, its default population, what it takes, and
  how it is built.

  Attributes:
    sources: the data sources it reads, the default first; () for data that ships with a
      library (the demo's digits).
    num_clients: the clients it uses by default.
    options: the `build_task` options it honours besides `COMMON_OPTIONS`; any other given
      is refused (an option a task would ignore is a silent wrong run).
    build: `(name, TaskOptions) -> Task`, called once the options are checked.
  """

  sources: tuple[str, ...]
  num_clients: int
  options: tuple[str, ...]
  build: Callable[[str, TaskOptions], 'Task']


def default_num_clients(name: str) -> int:
  """The number of clients a task uses by default (before any data is loaded)."""
  if name not in TASKS:
    raise ValueError(f'Unknown task {name!r}; known tasks: {", ".join(TASK_NAMES)}.')
  return TASKS[name].num_clients


def check_options(name: str, given: dict) -> None:
  """Raises `ValueError` for an option `name` would ignore (`given`: the ones set; a path
  beside a source that does not read it: `data_sources.DataSourceError`)."""
  if name not in TASKS:
    raise ValueError(f'Unknown task {name!r}; known tasks: {", ".join(TASK_NAMES)}.')
  spec = TASKS[name]
  if 'source' in given and given['source'] not in spec.sources:
    raise ValueError(f'Unknown source {given["source"]!r} for task {name}; known: '
                     f'{", ".join(spec.sources) or "none (the data ships with scikit-learn)"}.')
  ignored = sorted(k for k in given if k not in spec.options + COMMON_OPTIONS)
  if ignored:
    raise ValueError(f'{name} does not take {", ".join(ignored)} (it takes '
                     f'{", ".join(sorted(spec.options + COMMON_OPTIONS))}).')
  data_sources.check_paths_read([s for s in data_sources.PATH_SOURCES if s in spec.sources],
                                given.get('source'), given.get('data_dir'), given.get('data_path'))
  partition = given.get('partition')
  for option, needs in (('alpha', 'dirichlet'), ('ratio', 'quantity_skew'), ('dominant_fraction',
                                                                             'class_imbalance')):
    if option in given and partition != needs:
      raise ValueError(f'{option} applies to partition={needs} only (partition is '
                       f'{partition or "the task default"}).')


def check_local_steps(local_steps: int | None, epochs: int) -> None:
  """The one check of the step cap (`TaskOptions.local_steps`) and the epochs beside it.

  Raises:
    ValueError: a cap not an int in [1, `task.MAX_LOCAL_STEPS`], or one with epochs != 1.
  """
  if local_steps is None:
    return
  limit = task_lib.MAX_LOCAL_STEPS
  if isinstance(local_steps,
                bool) or not isinstance(local_steps, int) or not (1 <= local_steps <= limit):
    raise ValueError(f'local_steps must be an int in [1, {limit}] (or unset: every batch), got '
                     f'{local_steps!r}.')
  if epochs != 1:
    raise ValueError(f'local_steps ({local_steps}) caps the steps of one stream of the '
                     f"client's examples; it takes no local epochs (got {epochs}).")


def build_task(name: str, **options: Any) -> Task:
  """Builds task `name` (see the module docstring).

  Args:
    name: one of `TASK_NAMES`.
    **options: fields of `TaskOptions` (see there); the rest keep their defaults.

  Raises:
    ValueError: unknown task name (listing the known ones), an unknown option or bad options.
    data_sources.DataSourceError: missing or malformed data.
  """
  known = [field.name for field in dataclasses.fields(TaskOptions)]
  unknown = sorted(set(options) - set(known))
  if unknown:
    raise ValueError(f'Unknown task option(s) {", ".join(unknown)}; known: {", ".join(known)}.')
  o = TaskOptions(**options)
  given = {k: getattr(o, k) for k in _CHECKED_WHEN_SET if getattr(o, k) is not None}
  if o.eval_data != TaskOptions.eval_data:
    given['eval_data'] = o.eval_data
  check_options(name, given)
  if o.eval_data not in EVAL_DATA:
    raise ValueError(f'Unknown eval_data {o.eval_data!r}; known: {", ".join(EVAL_DATA)}.')
  if o.epochs < 1:
    raise ValueError(f'epochs must be >= 1, got {o.epochs}.')
  check_local_steps(o.local_steps, o.epochs)
  return TASKS[name].build(name, o)


def _digits_task(name: str, o: TaskOptions) -> Task:
  """The demo: scikit-learn's digits split over clients, a small MLP seeded by `seed`."""
  x_train, y_train, x_test, y_test = digits.load_arrays(seed=o.seed)
  num_clients = o.num_clients or 10
  total_clients = o.total_clients or num_clients
  if num_clients > total_clients:
    raise ValueError(f'num_clients ({num_clients}) exceeds total_clients ({total_clients}).')
  parts = partitions.build(o.partition or 'contiguous',
                           y_train,
                           total_clients,
                           seed=o.seed,
                           **o.partition_options())[:num_clients]
  batch_size = 0 if o.batch_size is None else o.batch_size
  examples = partitions.to_client_data({'x': x_train, 'y': y_train}, parts)
  round_train_data = None
  if o.local_steps is not None:
    round_train_data = lambda r: examples.preprocess(lambda d: task_lib.capped_client(
        d, batch_size, o.local_steps, task_lib.round_seed(o.seed, r)))
    train = round_train_data(0)
  else:
    train = examples.preprocess(lambda d: batch_client(d, batch_size, o.epochs))
  test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x_test, y=y_test)).batch(500)
  model_seed = o.seed if o.model_seed is None else o.model_seed
  model_fn = models.tff_model_fn(lambda: models.digits_mlp(model_seed), digits.FEATURE_SHAPE)
  return Task(name,
              model_fn,
              train,
              test,
              dict(learning_rate=0.5,
                   momentum=0.0,
                   reg_steps=1,
                   batch_size=batch_size,
                   total_clients=total_clients,
                   num_clients=num_clients),
              round_train_data=round_train_data)


def _shakespeare_task(name: str, o: TaskOptions) -> Task:
  """Shakespeare by role, the authors' GRU; client batches reshuffled every round."""
  if o.text_evaluation not in TEXT_EVALUATIONS:
    raise ValueError(f'Unknown text_evaluation {o.text_evaluation!r}; known: '
                     f'{", ".join(TEXT_EVALUATIONS)}.')
  gru.fixed_layout()  # A bad $TFF_FLARE_GRU_LAYOUT is refused before the data is read.
  source = data_sources.choose_source('shakespeare', o.source, o.data_dir, 'tff', o.data_path)
  train, test = data_sources.load_shakespeare(source, o.data_path, o.data_dir)
  asked = o.num_clients or 10
  chosen = text.select_clients(train, asked)
  seed, epochs = o.seed, o.epochs
  if len(chosen) < asked:
    what = f'{asked} Shakespeare clients asked' + ('' if o.num_clients else " (the authors' 10)")
    advice = f': give num_clients={len(chosen)} or fewer.' if chosen else '.'
    raise data_sources.DataSourceError(
        f'{what}, but only {len(chosen)} roles of the data have more than 30 batches{advice}')

  def dataset_fn(client_id):
    # Through `train`, not its `serializable_dataset_fn`: that is a `tf.function` method,
    # which holds its `ClientData` weakly; once `train` is collected it would see `None`.
    return train.serializable_dataset_fn(client_id)

  subset = tff.simulation.datasets.ClientData.from_clients_and_tf_fn(chosen, dataset_fn)

  def round_train_data(round_num: int) -> tff.simulation.datasets.ClientData:
    # A seeded shuffle replays its first permutation whenever its dataset is built anew (as
    # TFF rebuilds a serialized dataset at every call): a seed per round gives every round
    # a new permutation, reproducibly.
    round_seed = task_lib.round_seed(seed, round_num)
    if o.local_steps is not None:  # The stream of batches, reshuffled at every pass.
      return subset.preprocess(
          lambda d: text.character_batches(d, round_seed).repeat().take(o.local_steps))
    return subset.preprocess(lambda d: text.character_batches(d, round_seed).repeat(epochs))

  # The authors' evaluation reads 2 batches newly shuffled each time; 'full' reads one fixed
  # set of sequences, so an evaluation is a function of the weights.
  test_data = text.test_stream(test, seed=seed, reshuffle=o.text_evaluation == 'authors')
  if o.text_evaluation == 'authors':
    test_data = test_data.take(text.AUTHORS_EVALUATION_BATCHES)
  return Task(name,
              models.shakespeare_model_fn(o.model_seed),
              round_train_data(0),
              test_data,
              dict(learning_rate=0.005,
                   momentum=0.0,
                   reg_steps='all',
                   batch_size=8,
                   total_clients=len(train.client_ids),
                   num_clients=len(chosen),
                   is_regularized=lambda var_name: 'embedding' not in var_name),
              round_train_data=round_train_data,
              data_fingerprint=data_sources.shakespeare_fingerprint(source, o.data_path,
                                                                    o.data_dir))


# The task table: a new task is its builder and one row here.
def _image_task_spec(name: str) -> TaskSpec:
  spec = images.IMAGE_TASKS[name]
  extra = ('double_softmax',) if name in images.DOUBLE_SOFTMAX_TASKS else ()
  return TaskSpec(data_sources.IMAGE_SOURCES, spec.num_clients,
                  _LOCAL_FILES + _PARTITIONED + _IMAGE_ONLY + extra, images.build_image_task)


TASKS: dict[str, TaskSpec] = dict(
    {name: _image_task_spec(name) for name in images.IMAGE_TASKS},
    shakespeare_gru=TaskSpec(data_sources.TEXT_SOURCES, 10,
                             ('source', 'data_path', 'data_dir', 'text_evaluation'),
                             _shakespeare_task),
    digits_demo=TaskSpec((), 10, _PARTITIONED, _digits_task))
TASK_NAMES = tuple(sorted(TASKS))
