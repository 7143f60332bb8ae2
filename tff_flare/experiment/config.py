"""One experiment's configuration, and the one place that validates it.

`ExperimentConfig` holds every setting of a run; `validate(config)` checks all of them before
any work (names, ranges, finite numbers, consistent combinations), each with the library's
own check of that value, and raises `ConfigError` with a one-line message. The binaries turn
flags into a config and print that message with exit status 2.

Resuming: a run records its configuration in `<output_dir>/config.json`. Started again on
the same directory, it compares (`compare_for_resume`): a setting that changes the results
(the algorithms, the task, a hyperparameter, the seed, ...) stops the run with the names of
the fields that differ; `RESUMABLE_FIELDS` (the number of rounds, evaluation, checkpoints,
where the rounds execute, where the client states are kept, where the data is: its content
is checked by its fingerprint) may change, and each change is recorded in `config.json`; a
knob that none of the run's algorithms takes is not compared.
"""

import dataclasses
import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import model_aggregators
from tff_flare.algorithms import registry as algorithms
from tff_flare.execution import modes
from tff_flare.simulation import sampling
from tff_flare.tasks import partitions
from tff_flare.tasks import registry as tasks

CLIENT_STATE_STORAGES = ('memory', 'disk', 'files')
# `tff.learning.ClientWeighting` by its lower-case name.
CLIENT_WEIGHTINGS = ('uniform', 'num_examples')
# Settings runs recorded under a name since retired: {retired name: the field it became}.
RETIRED_FIELDS = {'mask_weighting': 'client_weighting'}  # Update masking's own p_k knob.
# Settings a resumed run may change: they do not change what a round computes.
RESUMABLE_FIELDS = ('output_dir', 'rounds', 'eval_every', 'checkpoint_every', 'execution',
                    'workers', 'worker_timeout_s', 'client_threads', 'tff_subrounds',
                    'allow_nonfinite_rounds', 'client_state_storage', 'data_path', 'data_dir',
                    'memory_budget_gib')

# Knobs the runner itself reads for every run, whatever trains: E repeats every client's data
# (`runner.build_task`), though only EC-FFL declares it among its parameters.
EVERY_RUN_KNOBS = ('local_epochs',)


def knobs_used(algorithm_names) -> set[str]:
  """The knobs a run of these algorithms reads: theirs, and `EVERY_RUN_KNOBS`."""
  return algorithms.knobs_of(algorithm_names) | set(EVERY_RUN_KNOBS)


class ConfigError(ValueError):
  """A configuration that cannot run, or that does not match the run it would resume."""


_ = hyperparameters.setting  # A field that is not an algorithm's knob, with its help text.


@dataclasses.dataclass
class RunSettings:
  """What a run of the loop takes, whatever trains in it (`runner.simulate` takes these
  alone; an experiment adds its task and algorithms, `Settings`)."""

  output_dir: str | None = _(None, 'Where results and checkpoints go (None: nowhere, a '
                             'run in memory).')
  rounds: int = _(10, 'Rounds of training.')
  clients_per_round: int | None = _(None, 'Clients sampled each round (client '
                                    'unavailability); default: all clients in use.')
  client_sampling: str = _('uniform', f'How clients are sampled: {", ".join(sampling.SAMPLERS)} '
                           "(python_random: the authors' random.Random(seed).sample stream).")
  eval_every: int = _(10, 'Evaluate every this many rounds.')
  checkpoint_every: int = _(10, 'Save program state every this many rounds.')
  seed: int = _(0, 'Seed of partitions, client sampling and masks.')
  client_state_storage: str = _('memory', "Where the clients' states live: memory (the "
                                "driver's), disk (.npy files under <output_dir>/client_states "
                                "the driver reads memory-mapped) when they do not fit, or files "
                                '(under <output_dir>/client_states, read and written by the '
                                "clients' computations where TFF runs them, so no state "
                                "crosses the driver; TFF's workers must see <output_dir> at "
                                'the same path).')
  execution: str = _('inprocess', 'inprocess: this Python process, no TFF runtime (the '
                     "fastest on one machine; TFF's own algorithms still run on TFF's local "
                     "runtime); local: TFF's local runtime (a worker_binary subprocess); "
                     'remote: the TFF workers of --workers (start each with python -m '
                     'experiments.worker --port=PORT).')
  workers: Sequence[str] = _((), "With --execution=remote: host:port of each worker; a round's "
                             'clients are split over them.')
  worker_timeout_s: float = _(60.0, 'Seconds a TFF worker may be unreachable (at start, or '
                              'during a round while TFF retries) before the run stops with an '
                              'error naming it; a local worker that dies ends it at once.',
                              host_only=True)
  client_threads: int | None = _(None, 'With --execution=inprocess: clients trained at once '
                                 '(default: the number of CPUs).')
  tff_subrounds: int = _(1, "Rounds on TFF's local runtime (TFF's own algorithms; every "
                         'algorithm with --execution=local) run in this many subrounds, one '
                         "after another (TFF's mergeable context): its worker holds a "
                         "subround's clients at once, not the round's, and the driver sends "
                         'each subround the server state (slower).')
  allow_nonfinite_rounds: bool = _(False, 'Go on after a round in which an algorithm diverged '
                                   '(by default the run stops there).')
  memory_budget_gib: float | None = _(None, 'GiB this run may use at its peak (default: its '
                                      "cgroup's limit, else the machine's available "
                                      'memory); a run whose estimated peak is larger stops '
                                      'before its first round, naming settings that fit.',
                                      host_only=True)

  def __post_init__(self) -> None:
    hyperparameters.as_python_numbers(self)  # A notebook's np.int64 rounds are rounds.


@dataclasses.dataclass
class Settings(RunSettings):
  """What an experiment sets besides the algorithms' knobs: the run's settings, the task and
  its data, the algorithms and how they aggregate. `None`: the task's default (the authors'
  configuration)."""

  task: str = _('digits_demo', f'Task: {", ".join(tasks.TASK_NAMES)}.')
  algorithms: Sequence[str] = _(('flare', 'ec', 'fedavg'), 'Algorithms to run side by side: '
                                f'{", ".join(algorithms.NAMES)}.')
  total_clients: int | None = _(None, 'Clients the data is split into (task default).')
  num_clients: int | None = _(None, 'Clients in use, the first of the split (task '
                              'default).')
  batch_size: int | None = _(None, 'Local batch size (task default; 0: full batch).')
  local_steps: int | None = _(None, "Local steps a round: each client takes this many "
                              'batches from its examples reshuffled every round (a new '
                              'permutation at each pass), however many it has; default: '
                              'every batch of --local_epochs passes.')
  learning_rate: float | None = _(None, 'Client SGD learning rate (task default).')
  momentum: float | None = _(None, 'Client SGD momentum (task default).')
  model_seed: int | None = _(None, "Seed of the model's initializers (default: the "
                             "authors' seeding: the CNN's GlorotNormal(seed=0); FC, VGG and "
                             'GRU unseeded).')
  double_softmax: bool | None = _(None, "mnist_cnn: --nodouble_softmax drops the authors' "
                                  'second softmax (the fixed CNN; default: the authors\' '
                                  'model).')
  source: str | None = _(None, 'Data source: keras, tfds, npz, imagefolder (images); tff, '
                         'text (Shakespeare). Unset: with --data_dir, the local source '
                         'whose file is there; else the task default (keras, tff).')
  data_path: str | None = _(None, 'File or folder of a local source (default: its file in '
                            'the data directory).')
  data_dir: str | None = _(None, 'The data directory (python -m experiments.get_data fills '
                           'it): where a local source\'s file is without --data_path '
                           '(default: data/), and TFDS\'s data directory.')
  partition: str | None = _(None, 'Partition: contiguous, iid, dirichlet, quantity_skew, '
                            'class_imbalance (task default).')
  alpha: float = _(1.0, 'Dirichlet concentration.')
  ratio: float = _(100.0, 'quantity_skew: largest / smallest client.')
  eval_data: str = _('test', 'Image tasks: evaluate on the test set (test) or on every '
                     'training example of the clients in use (train: the objective they '
                     'minimise).')
  text_evaluation: str = _('authors', "shakespeare_gru's test set: authors (2 batches of 8 x "
                           '100 characters, newly shuffled at every evaluation) or full (every '
                           'test client).')
  model_aggregator: str = _('mean', 'What the server averages the messages with, for the '
                            'algorithms that average (not EF21 or TFF\'s own): '
                            f'{", ".join(model_aggregators.NAMES)} (TFF factories; mean: the '
                            "project's own, the only one that runs in-process).")
  aggregator_norm: float | None = _(None, 'The norm of --model_aggregator=clipping (L2 of '
                                    'each message) or zeroing (largest absolute value).')
  client_weighting: str = _('uniform', 'How the algorithms that average weigh their clients: '
                            "uniform (the authors') or num_examples (TFF's weighted FedAvg).")


@dataclasses.dataclass
class ExperimentConfig(algorithms.Knobs, Settings):
  """One experiment: the `Settings` (the run's, the task's, the algorithms and how they
  aggregate) and every algorithm's knob (`algorithms.Knobs`, each declared once where it
  belongs, `tff_flare.algorithms.hyperparameters`)."""


# The settings that are task options (`tasks.registry.TaskSpec.options`).
_TASK_OPTIONS = ('source', 'data_path', 'data_dir', 'total_clients', 'partition', 'alpha', 'ratio',
                 'batch_size', 'local_steps', 'double_softmax', 'eval_data', 'text_evaluation')


def _check(condition: bool, message: str) -> None:
  if not condition:
    raise ConfigError(message)


def check_partition(partition: str | None, alpha: float, ratio: float) -> None:
  """The partition settings' rules (a run's validation, and a grid's cells before any runs).

  Raises:
    ConfigError: an unknown partition, alpha not > 0, ratio below 1, or either not a number
      float32 holds.
  """
  if partition is not None:
    _check(partition in partitions.PARTITIONS,
           f'Unknown partition {partition!r}; known: {", ".join(partitions.PARTITIONS)}.')
  for name, value in (('alpha', alpha), ('ratio', ratio)):
    try:
      hyperparameters.check_representable(name, value)
    except ValueError as e:
      raise ConfigError(str(e)) from e
  _check(alpha > 0, f'alpha must be > 0, got {alpha}.')
  _check(ratio >= 1, f'ratio (largest / smallest client) must be >= 1, got {ratio}.')


# Seeds go to numpy, Python's random and TensorFlow's int32/int64 seeds: all take these.
SEED_LIMIT = 2**31


def _check_seed(name: str, value, optional: bool = False) -> None:
  _check((optional and value is None) or
         (hyperparameters.is_int(value) and 0 <= value < SEED_LIMIT),
         f'{name} must be an int in [0, 2^31), got {value!r}.')


def validate_run(settings: RunSettings, population: int) -> None:
  """The one check of a run's settings (`RunSettings`: an experiment's, or
  `runner.simulate`'s) for a population of `population` clients.

  Raises:
    ConfigError: the first setting that would fail later, in one line.
  """
  try:
    output_dir = settings.output_dir
    _check(output_dir is None or (isinstance(output_dir, str) and output_dir != ''),
           f'output_dir must name a directory, or be None (a run in memory), got {output_dir!r}.')
    _check(
        output_dir is not None or settings.client_state_storage == 'memory',
        f'client_state_storage {settings.client_state_storage!r} keeps the client states '
        'under output_dir: give one, or keep them in memory.')
    for name in ('rounds', 'eval_every', 'checkpoint_every'):
      value = getattr(settings, name)
      _check(
          hyperparameters.is_int(value) and value >= 1,
          f'{name} must be an int >= 1, got {value!r}.')
    _check_seed('seed', settings.seed)
    hyperparameters.check_kinds(settings, dataclasses.fields(RunSettings))
    _check(
        hyperparameters.is_int(population) and population >= 1,
        f'There must be at least one client, got {population!r}.')
    per_round = population if settings.clients_per_round is None else settings.clients_per_round
    _check(
        hyperparameters.is_int(per_round) and 1 <= per_round <= population,
        f'clients_per_round ({per_round}) must be in [1, {population}] (the clients in '
        'use).')
    sampling.validate_sampler(settings.client_sampling, population, per_round)
    _check(
        settings.client_state_storage in CLIENT_STATE_STORAGES,
        f'Unknown client_state_storage {settings.client_state_storage!r}; known: '
        f'{", ".join(CLIENT_STATE_STORAGES)}.')
    modes.validate_execution(settings.execution, settings.workers, settings.worker_timeout_s,
                             settings.client_threads, settings.tff_subrounds)
    _check(
        settings.tff_subrounds <= per_round,
        f'tff_subrounds ({settings.tff_subrounds}) must be at most the clients a round '
        f'({per_round}).')
    budget = settings.memory_budget_gib
    _check(budget is None or (hyperparameters.is_number(budget) and 0 < budget <= 2**20),
           f'memory_budget_gib must be a number of GiB in (0, 1048576], got {budget!r}.')
  except ConfigError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from e


def validate(config: ExperimentConfig, *, writable: bool = True) -> None:
  """Raises `ConfigError` for anything that would fail later (see the module docstring).

  `writable`: also make `output_dir` and check that it takes files (False: the settings
  alone, for a scheduler that checks every run before it starts any)."""
  try:
    _validate(config)
  except ConfigError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from e
  if writable and config.output_dir is not None:
    check_writable(config.output_dir)


def _validate(config: ExperimentConfig) -> None:
  _check(bool(config.output_dir), 'output_dir is required (where results and checkpoints go).')
  for name in ('data_path', 'data_dir'):
    if getattr(config, name):
      check_path_form(getattr(config, name), name)
  _check(bool(config.algorithms), 'algorithms is empty: name at least one of '
         f'{", ".join(algorithms.NAMES)}.')
  unknown = [a for a in config.algorithms if a not in algorithms.NAMES]
  _check(not unknown, f'Unknown algorithms {unknown}; known: {", ".join(algorithms.NAMES)}.')
  _check(
      len(set(config.algorithms)) == len(config.algorithms),
      f'An algorithm is named twice: {list(config.algorithms)}.')
  _check(config.task in tasks.TASK_NAMES,
         f'Unknown task {config.task!r}; known tasks: {", ".join(tasks.TASK_NAMES)}.')
  _check_seed('seed', config.seed)
  _check_seed('model_seed', config.model_seed, optional=True)
  hyperparameters.check_fields(config)  # Every number representable, every knob's check, once.
  for name in ('total_clients', 'num_clients'):
    value = getattr(config, name)
    _check(value is None or (hyperparameters.is_int(value) and value >= 1),
           f'{name} must be an int >= 1 (or unset for the task\'s default), got {value!r}.')
  _check(
      config.clients_per_round is None or
      (hyperparameters.is_int(config.clients_per_round) and config.clients_per_round >= 1),
      f'clients_per_round must be an int >= 1 (or unset: every client), got '
      f'{config.clients_per_round!r}.')
  _check(
      config.batch_size is None or
      (hyperparameters.is_int(config.batch_size) and config.batch_size >= 0),
      f'batch_size must be an int >= 0 (0: full batch), got {config.batch_size!r}.')
  tasks.check_local_steps(config.local_steps, config.local_epochs)
  if config.learning_rate is not None:
    _check(config.learning_rate > 0, f'learning_rate must be > 0, got {config.learning_rate}.')
  if config.momentum is not None:
    _check(0 <= config.momentum < 1, f'momentum must be in [0, 1), got {config.momentum}.')
  check_partition(config.partition, config.alpha, config.ratio)
  _check(config.eval_data in tasks.EVAL_DATA,
         f'Unknown eval_data {config.eval_data!r}; known: {", ".join(tasks.EVAL_DATA)}.')
  _check(
      config.text_evaluation in tasks.TEXT_EVALUATIONS,
      f'Unknown text_evaluation {config.text_evaluation!r}; known: '
      f'{", ".join(tasks.TEXT_EVALUATIONS)}.')
  # An option the task would ignore is refused (the task table says what each takes).
  defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
  tasks.check_options(config.task, {
      name: getattr(config, name)
      for name in _TASK_OPTIONS
      if getattr(config, name) != defaults[name]
  })
  model_aggregators.check(config.model_aggregator, config.aggregator_norm)
  if config.model_aggregator != 'mean':
    algorithms.check_take_model_aggregator(config.algorithms)
  _check(
      config.client_weighting in CLIENT_WEIGHTINGS,
      f'Unknown client_weighting {config.client_weighting!r}; known: '
      f'{", ".join(CLIENT_WEIGHTINGS)}.')
  if config.client_weighting != 'uniform':
    algorithms.check_take_model_aggregator(config.algorithms, 'client_weighting but uniform')
  population = config.num_clients or tasks.default_num_clients(config.task)
  if config.total_clients is not None:
    _check(population <= config.total_clients, f'num_clients ({population}) exceeds '
           f'total_clients ({config.total_clients}).')
  validate_run(config, population)


def check_entries(output_dir: str) -> None:
  """Refuses an output directory that is, or holds, a symbolic link (a run writes no file
  through a link it did not make: it would write where it was not told to), or a pipe, a
  socket or a device (a run reading or appending to one would wait forever)."""
  if os.path.islink(output_dir):
    raise ConfigError(f'Output directory {output_dir} is a symbolic link: give the directory '
                      'it points to.')
  for parent, directories, files in os.walk(output_dir):
    for name in directories + files:
      path = os.path.join(parent, name)
      if os.path.islink(path):
        raise ConfigError(f'{path} is a symbolic link: a run writes only files it makes. '
                          'Remove it, or use another output_dir.')
      if name in files and not os.path.isfile(path):
        raise ConfigError(f'{path} is a pipe, a socket or a device: a run reads and writes '
                          'only files. Remove it, or use another output_dir.')


# What Linux's file systems take: a name of at most 255 bytes, a path of at most 4,095.
NAME_MAX, PATH_MAX = 255, 4095


def shown(path: str, keep: int = 60) -> str:
  """`path` for a message: whole when short, else its first and last characters."""
  return path if len(path) <= 2 * keep else f'{path[:keep]}...{path[-keep:]}'


def check_path_form(path: str, what: str) -> None:
  """Refuses a path the operating system would refuse by its form alone (a name longer
  than `NAME_MAX` bytes, a path longer than `PATH_MAX`), naming the path once."""
  encoded = os.fsencode(path)
  longest = max((len(name) for name in encoded.split(b'/')), default=0)
  if longest > NAME_MAX:
    raise ConfigError(f'{what} {shown(path)} has a name of {longest} bytes; file systems take '
                      f'at most {NAME_MAX}.')
  if len(encoded) > PATH_MAX:
    raise ConfigError(f'{what} {shown(path)} is {len(encoded)} bytes long; paths may be at most '
                      f'{PATH_MAX}.')


def check_writable(output_dir: str) -> None:
  """Creates `output_dir` if needed; refuses one that is not writable or holds a link."""
  check_path_form(output_dir, 'Output directory')
  check_entries(output_dir)
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise ConfigError(f'Output directory {output_dir} is a file, not a directory: give a new '
                      'or empty directory.')
  try:
    os.makedirs(output_dir, exist_ok=True)
    probe = pathlib.Path(output_dir) / '.write_probe'
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    probe.unlink()
  except FileExistsError:
    raise ConfigError(f'{output_dir}/.write_probe exists: another program is checking the '
                      'directory, or one was stopped while doing so. Remove the file.') from None
  except OSError as e:  # Its message without the path again.
    raise ConfigError(f'Output directory {shown(output_dir)} is not writable: '
                      f'{e.strerror or e}.') from e


def as_dict(config: RunSettings) -> dict[str, Any]:
  """The configuration as JSON values (sequences as lists)."""
  return json.loads(json.dumps(dataclasses.asdict(config), default=list))


def compare_for_resume(recorded: dict[str, Any], config: RunSettings) -> dict[str, Any]:
  """The resumable fields that changed, `{field: [recorded, now]}`.

  A field the recorded configuration lacks (the run was made before the field existed) counts
  as its default: a new setting's default keeps the behaviour there was before it. A field
  recorded under a retired name (`RETIRED_FIELDS`) counts as the field it became.

  Raises:
    ConfigError: a field outside `RESUMABLE_FIELDS` differs (the message names them all).
  """
  now = as_dict(config)
  defaults = json.loads(
      json.dumps(
          {
              f.name: f.default
              for f in dataclasses.fields(config)
              if f.default is not dataclasses.MISSING
          },
          default=list))
  then = {name: recorded.get(name, defaults.get(name)) for name in now}
  for earlier, field in RETIRED_FIELDS.items():
    if earlier in recorded and field not in recorded and field in then:
      then[field] = recorded[earlier]
  changed = {name: [then[name], value] for name, value in now.items() if then[name] != value}
  if 'algorithms' not in changed and 'algorithms' in now:  # A knob none of them takes.
    unused = set(algorithms.KNOB_NAMES) - knobs_used(now['algorithms'])
    changed = {name: values for name, values in changed.items() if name not in unused}
  storage = changed.get('client_state_storage')
  if storage and storage[0] in ('disk', 'files'):
    raise ConfigError(
        f'{config.output_dir} holds a run whose client states are files (client_states/): '
        f'its checkpoints refer to those files, so it resumes with client_state_storage='
        f'{storage[0]} (memory can switch to disk or files).')
  fixed = {name: values for name, values in changed.items() if name not in RESUMABLE_FIELDS}
  if fixed:
    details = '; '.join(
        f'{name}: {old!r} then, {new!r} now' for name, (old, new) in sorted(fixed.items()))
    raise ConfigError(
        f'{config.output_dir} holds a run with another configuration ({details}). Resuming '
        'would mix two configurations in one run: use another output_dir, or the same '
        'settings.')
  return changed
