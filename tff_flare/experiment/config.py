"""One experiment's configuration, and the one place that validates it.

`ExperimentConfig` holds every setting of a run; `validate(config)` checks all of them before
any work (names, ranges, finite numbers, consistent combinations), each with the library's
own check of that value, and raises `ConfigError` with a one-line message. The binaries turn
flags into a config and print that message with exit status 2.

Resuming: a run records its configuration in `<output_dir>/config.json`. Started again on
the same directory, it compares (`compare_for_resume`): a setting that changes the results
(the algorithms, the task, a hyperparameter, the seed, ...) stops the run with the names of
the fields that differ; `RESUMABLE_FIELDS` (the number of rounds, evaluation, checkpoints and
where the rounds execute) may change, and each change is recorded in `config.json`.
"""

import dataclasses
import json
import math
import os
import pathlib
from collections.abc import Sequence
from typing import Any, Optional, Union

from tff_flare.algorithms import local_training
from tff_flare.algorithms import masking
from tff_flare.algorithms import regularizers
from tff_flare.algorithms import registry as algorithms
from tff_flare.algorithms import schedules
from tff_flare.algorithms import sparsification
from tff_flare.execution import modes
from tff_flare.simulation import sampling
from tff_flare.tasks import data_sources
from tff_flare.tasks import partitions
from tff_flare.tasks import registry as tasks

CLIENT_STATE_STORAGES = ('memory', 'disk')
# Settings a resumed run may change: they do not change what a round computes.
RESUMABLE_FIELDS = ('output_dir', 'rounds', 'eval_every', 'checkpoint_every', 'execution',
                    'workers', 'worker_timeout_s', 'client_threads', 'allow_nonfinite_rounds')


class ConfigError(ValueError):
  """A configuration that cannot run, or that does not match the run it would resume."""


@dataclasses.dataclass
class ExperimentConfig:
  """One experiment. `None` means the task's default (the authors' configuration)."""

  output_dir: str
  task: str = 'digits_demo'
  algorithms: Sequence[str] = ('flare', 'ec', 'fedavg')
  rounds: int = 10
  total_clients: Optional[int] = None
  num_clients: Optional[int] = None
  clients_per_round: Optional[int] = None
  client_sampling: str = 'uniform'
  keep_percent: float = 0.001
  tau: float = 0.05
  tau_decay: float = 1.1
  mask_percentile: float = 50.0
  reg_steps: Union[int, str, None] = None  # 'all': every local step.
  local_epochs: int = 1
  batch_size: Optional[int] = None  # 0: the whole client as one batch.
  learning_rate: Optional[float] = None
  momentum: Optional[float] = None
  eval_every: int = 10
  checkpoint_every: int = 10
  seed: int = 0
  model_seed: Optional[int] = None  # None: the authors' seeding of the task's model.
  double_softmax: Optional[bool] = None  # mnist_cnn: False for the fixed CNN.
  source: Optional[str] = None
  data_path: Optional[str] = None
  data_dir: Optional[str] = None
  partition: Optional[str] = None
  alpha: float = 1.0
  ratio: float = 100.0
  text_evaluation: str = 'authors'  # Shakespeare: 'authors' (2 batches) or 'full'.
  tff_fedprox_strength: float = 0.01
  keep_probability: float = 0.5
  mask_weighting: str = 'uniform'
  num_mask_draws: int = 0
  client_state_storage: str = 'memory'  # 'disk': files under <output_dir>/client_states.
  execution: str = 'local'
  workers: Sequence[str] = ()
  worker_timeout_s: float = 60.0
  client_threads: Optional[int] = None  # In-process: clients trained at once.
  allow_nonfinite_rounds: bool = False


def _check(condition: bool, message: str) -> None:
  if not condition:
    raise ConfigError(message)


def _is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def validate(config: ExperimentConfig) -> None:
  """Raises `ConfigError` for anything that would fail later (see the module docstring)."""
  try:
    _validate(config)
  except ConfigError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from e
  _check_writable(config.output_dir)


def _validate(config: ExperimentConfig) -> None:
  _check(bool(config.algorithms), 'algorithms is empty: name at least one of '
         f'{", ".join(algorithms.NAMES)}.')
  unknown = [a for a in config.algorithms if a not in algorithms.NAMES]
  _check(not unknown, f'Unknown algorithms {unknown}; known: {", ".join(algorithms.NAMES)}.')
  _check(len(set(config.algorithms)) == len(config.algorithms),
         f'An algorithm is named twice: {list(config.algorithms)}.')
  _check(config.task in tasks.TASK_NAMES,
         f'Unknown task {config.task!r}; known tasks: {", ".join(tasks.TASK_NAMES)}.')
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if isinstance(value, float):
      _check(math.isfinite(value), f'{field.name} must be a finite number, got {value}.')
  sparsification.validate_keep_percent(config.keep_percent)
  schedules.validate_tau(config.tau, config.tau_decay)
  regularizers.validate_percentile(config.mask_percentile)
  if config.reg_steps is not None:
    local_training.validate_penalized_steps(config.reg_steps)
  masking.validate_keep_probability(config.keep_probability)
  masking.Weighting(config.mask_weighting)
  for name in ('rounds', 'local_epochs', 'eval_every', 'checkpoint_every'):
    value = getattr(config, name)
    _check(_is_int(value) and value >= 1, f'{name} must be an int >= 1, got {value!r}.')
  for name in ('total_clients', 'num_clients', 'clients_per_round'):
    value = getattr(config, name)
    _check(value is None or (_is_int(value) and value >= 1),
           f'{name} must be an int >= 1 (or unset for the task\'s default), got {value!r}.')
  _check(_is_int(config.seed) and config.seed >= 0,
         f'seed must be an int >= 0, got {config.seed!r}.')
  _check(config.model_seed is None or (_is_int(config.model_seed) and config.model_seed >= 0),
         f'model_seed must be an int >= 0, got {config.model_seed!r}.')
  _check(_is_int(config.num_mask_draws) and config.num_mask_draws >= 0,
         f'num_mask_draws must be an int >= 0, got {config.num_mask_draws!r}.')
  _check(config.batch_size is None or (_is_int(config.batch_size) and config.batch_size >= 0),
         f'batch_size must be an int >= 0 (0: full batch), got {config.batch_size!r}.')
  if config.learning_rate is not None:
    _check(config.learning_rate > 0, f'learning_rate must be > 0, got {config.learning_rate}.')
  if config.momentum is not None:
    _check(0 <= config.momentum < 1, f'momentum must be in [0, 1), got {config.momentum}.')
  _check(config.tff_fedprox_strength >= 0,
         f'tff_fedprox_strength must be >= 0, got {config.tff_fedprox_strength}.')
  if config.partition is not None:
    _check(config.partition in partitions.PARTITIONS,
           f'Unknown partition {config.partition!r}; known: {", ".join(partitions.PARTITIONS)}.')
  _check(config.alpha > 0, f'alpha must be > 0, got {config.alpha}.')
  _check(config.double_softmax is None or config.task in tasks.DOUBLE_SOFTMAX_TASKS,
         f'double_softmax applies to {", ".join(tasks.DOUBLE_SOFTMAX_TASKS)} only, not '
         f'{config.task}.')
  _check(config.text_evaluation in tasks.TEXT_EVALUATIONS,
         f'Unknown text_evaluation {config.text_evaluation!r}; known: '
         f'{", ".join(tasks.TEXT_EVALUATIONS)}.')
  _check(config.ratio >= 1, f'ratio (largest / smallest client) must be >= 1, got {config.ratio}.')
  if config.source is not None:
    known = (data_sources.TEXT_SOURCES if config.task == 'shakespeare_gru' else
             data_sources.IMAGE_SOURCES)
    if config.task == 'digits_demo':
      known = ()
    _check(config.source in known, f'Unknown source {config.source!r} for task '
           f'{config.task}; known: {", ".join(known) or "none (the data ships with scikit-learn)"}.')
  _check(config.client_state_storage in CLIENT_STATE_STORAGES,
         f'Unknown client_state_storage {config.client_state_storage!r}; known: '
         f'{", ".join(CLIENT_STATE_STORAGES)}.')
  modes.validate_execution(config.execution, config.workers, config.worker_timeout_s,
                           config.client_threads)
  population = config.num_clients or tasks.default_num_clients(config.task)
  if config.total_clients is not None:
    _check(population <= config.total_clients, f'num_clients ({population}) exceeds '
           f'total_clients ({config.total_clients}).')
  per_round = config.clients_per_round or population
  _check(_is_int(per_round) and 1 <= per_round <= population,
         f'clients_per_round ({per_round}) must be in [1, {population}] (the clients of '
         'the task).')
  sampling.validate_sampler(config.client_sampling, population, per_round)


def _check_writable(output_dir: str) -> None:
  try:
    os.makedirs(output_dir, exist_ok=True)
    probe = pathlib.Path(output_dir) / '.write_probe'
    probe.write_text('ok')
    probe.unlink()
  except OSError as e:
    raise ConfigError(f'Output directory {output_dir} is not writable: {e}') from e


def as_dict(config: ExperimentConfig) -> dict[str, Any]:
  """The configuration as JSON values (sequences as lists)."""
  return json.loads(json.dumps(dataclasses.asdict(config), default=list))


def compare_for_resume(recorded: dict[str, Any], config: ExperimentConfig) -> dict[str, Any]:
  """The resumable fields that changed, `{field: [recorded, now]}`.

  Raises:
    ConfigError: a field outside `RESUMABLE_FIELDS` differs (the message names them all).
  """
  now = as_dict(config)
  changed = {name: [recorded.get(name), value] for name, value in now.items()
             if recorded.get(name) != value}
  fixed = {name: values for name, values in changed.items() if name not in RESUMABLE_FIELDS}
  if fixed:
    details = '; '.join(f'{name}: {old!r} then, {new!r} now' for name, (old, new) in
                        sorted(fixed.items()))
    raise ConfigError(
        f'{config.output_dir} holds a run with another configuration ({details}). Resuming '
        'would mix two configurations in one run: use another --output_dir, or the same '
        'settings.')
  return changed
