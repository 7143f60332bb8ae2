"""Runs (or resumes) one experiment: several algorithms side by side on one task.

Every algorithm trains on the same task, from the same initial model (the first algorithm's
initial weights are given to all), on the same sampled clients each round. Per round, the
metrics of every algorithm (training metrics, communication counters, the round's seconds,
and at evaluation rounds the test loss and accuracy, taken before the round's training as the
authors do) are released through `tff.program` release managers: `metrics.csv` (one row per
round, columns `<algorithm>/<metric path>`) and TensorBoard (`tensorboard/`). The program
state (the round, each algorithm's server state and every client's state) is checkpointed
every `checkpoint_every` rounds and at the end; started again with the same configuration
and output directory, the run resumes from the latest checkpoint (`config` says what may
change). `summary.json` holds the configuration, where each algorithm ran and the final
results. One run at a time uses a directory (`exclusive_output_dir`).
"""

import collections
import contextlib
import dataclasses
import inspect
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Iterator, TypeAlias

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import model_aggregators
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import registry as algorithms
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.execution import remote
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import run_files
from tff_flare.simulation import checkpoints as checkpoints_lib
from tff_flare.simulation import evaluation
from tff_flare.simulation import files
from tff_flare.simulation import hooks as hooks_lib
from tff_flare.simulation import loop
from tff_flare.simulation import memory
from tff_flare.simulation import sampling
from tff_flare.tasks import data_sources
from tff_flare.tasks import registry as tasks

# The folder whose git checkout is the code a run records (`code_version`).
_SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2]


def code_version(root: pathlib.Path = _SOURCE_ROOT) -> dict:
  """`{'commit': <sha or None>, 'dirty': <bool or None>}` of the code at `root`.

  `dirty` says whether a tracked file outside `experiments/results` differs from the commit
  (a run's own results under the checkout do not make its code dirty). Both are None where
  `root` is not a git checkout or git is missing or slow (5 s): an installed package.
  """

  def git(*args: str) -> str | None:
    try:
      done = subprocess.run(['git', '-C', str(root), *args],
                            capture_output=True,
                            text=True,
                            timeout=5,
                            stdin=subprocess.DEVNULL,
                            check=False)
    except (OSError, subprocess.SubprocessError):
      return None
    return done.stdout if done.returncode == 0 else None

  commit = git('rev-parse', '--verify', 'HEAD')
  if commit is None or not commit.strip():
    return dict(commit=None, dirty=None)
  changed = git('status', '--porcelain', '--untracked-files=no', '--', '.',
                ':(exclude)experiments/results')
  return dict(commit=commit.strip(), dirty=None if changed is None else bool(changed.strip()))


def build_task(config: config_lib.ExperimentConfig) -> tasks.Task:
  """The configuration's task; data errors become `ConfigError` (one line).

  Every `TaskOptions` field the configuration has under the same name is passed; `epochs` is
  the configuration's `local_epochs`.
  """
  options = {
      field.name: getattr(config, field.name)
      for field in dataclasses.fields(tasks.TaskOptions)
      if hasattr(config, field.name)
  }
  try:
    return tasks.build_task(config.task, **dict(options, epochs=config.local_epochs))
  except ValueError as e:
    raise config_lib.ConfigError(str(e)) from e


def hyperparameters(config: config_lib.ExperimentConfig,
                    task: tasks.Task) -> algorithms.Hyperparameters:
  """The algorithms' hyperparameters: every knob's configured value (the task's default where
  the configuration leaves it None), and the run's context."""
  task_defaults = task.hparams
  learning_rate = (config.learning_rate
                   if config.learning_rate is not None else task_defaults['learning_rate'])
  momentum = config.momentum if config.momentum is not None else task_defaults['momentum']
  knobs = {name: getattr(config, name) for name in algorithms.KNOB_NAMES}
  for name, value in knobs.items():
    if value is None and name in task_defaults:
      knobs[name] = task_defaults[name]
  return algorithms.Hyperparameters(
      client_optimizer=tff.learning.optimizers.build_sgdm(learning_rate, momentum=momentum or None),
      total_clients=len(task.train_data.client_ids),
      is_regularized=task_defaults.get('is_regularized'),
      seed=config.seed,
      model_aggregator=model_aggregators.build(config.model_aggregator, config.aggregator_norm),
      client_weighting=tff.learning.ClientWeighting[config.client_weighting.upper()],
      **knobs)


# How TFF's runtime reports a TF op that failed in a computation (a gRPC INTERNAL error).
_TFF_OP_FAILED = 'Failed to run computation: '


def what_tf_says(error: Exception) -> str | None:
  """The line of a failed TF op that says what is wrong, without the graph's node and its
  traceback (`Received a label value of 7 which is outside the valid range of [0, 3)...`):
  from TF's `InvalidArgumentError` in this process, or from TFF's runtime (a gRPC error whose
  details start so); None for another error."""
  if isinstance(error, tf.errors.InvalidArgumentError):
    text = error.message
  elif (isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.INTERNAL and
        _TFF_OP_FAILED in (error.details() or '')):
    text = error.details().split(_TFF_OP_FAILED, 1)[1]
  else:
    return None
  said = [
      line.strip() for line in text.splitlines() if line.strip() and not line[0].isspace() and
      not line.startswith(('Detected at node', 'Graph execution error', '[['))
  ]
  text = said[-1] if said else type(error).__name__
  return text.split('\t [[')[0].split(' [[')[0].split(' while evaluating')[0].strip()


@contextlib.contextmanager
def _removed_if_refused(output_dir: str) -> Iterator[None]:
  """A run refused (`ConfigError`) leaves no folder it made: the folders of `output_dir` that
  did not exist before are removed again if they hold no file (the lock is gone by then)."""
  top = None
  for folder in [pathlib.Path(output_dir), *pathlib.Path(output_dir).parents]:
    if os.path.lexists(folder):
      break
    top = folder
  try:
    yield
  except config_lib.ConfigError:
    try:
      if top is not None and top.is_dir() and not top.is_symlink() and not any(
          files_here for _, _, files_here in os.walk(top)):
        shutil.rmtree(top, ignore_errors=True)
    except OSError:  # A path the system refuses (too long a name): nothing was made there.
      pass
    raise


# Files of the reproduce machinery (`experiments/schedule.py`) that may precede a run's own.
_FOREIGN_BUT_ALLOWED = ('command.json', 'log.txt', '.write_probe', run_files.LOCK_FILE)


@contextlib.contextmanager
def exclusive_output_dir(output_dir: str) -> Iterator[None]:
  """Holds `<output_dir>/.lock` (an exclusive `flock`) while a run uses the directory.

  A second run started on the same directory (a second `reproduce`, two overlapping shards)
  would write the same checkpoints and rows as the first and mix them; it is refused instead.
  The kernel releases the lock when its process ends, however it ends (a kill, a crash), so a
  lock is never left stale; the file is removed when the run ends or is refused. A link in
  the directory is refused (`config.check_entries`): a run writes no file through a link.
  `flock` is local to one machine: shards on several machines need directories of their own,
  as `reproduce --shard` gives them.

  Raises:
    config_lib.ConfigError: another process holds the directory.
  """
  config_lib.check_entries(output_dir)
  path = pathlib.Path(output_dir) / run_files.LOCK_FILE
  while True:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    lock = os.fdopen(descriptor, 'r+')
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = lock.read().strip() or 'unknown'
      lock.close()
      raise config_lib.ConfigError(
          f'{output_dir} is in use by another run (pid {holder}): two runs in one directory '
          'would mix their checkpoints and rows. Wait for it or stop it, or use another '
          'output_dir.') from None
    try:  # Locked; still the file at `path` (not one an ending run has just removed)?
      same = os.path.samestat(os.fstat(descriptor), os.stat(path, follow_symlinks=False))
    except FileNotFoundError:
      same = False
    if same:
      break
    lock.close()
  try:
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    yield
  finally:
    path.unlink(missing_ok=True)  # Removed while still held: no lock file is left behind.
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()


def _output_dir(config: config_lib.RunSettings) -> str:
  """The run's output directory, where it needs one."""
  if config.output_dir is None:
    raise config_lib.ConfigError('This run needs an output directory (output_dir).')
  return config.output_dir


def _check_output_dir(config: config_lib.RunSettings, checkpoint_rounds: list[int]) -> None:
  """Refuses a directory the run cannot prove is its own, or fewer rounds than it holds."""
  output = pathlib.Path(_output_dir(config))
  for name in (run_files.CHECKPOINTS, 'client_states', 'tensorboard'):
    if (output / name).exists() and not (output / name).is_dir():
      raise config_lib.ConfigError(f'{output / name} is not a folder: a run keeps its {name} '
                                   'there. Move it away, or use another output_dir.')
  if not (output / run_files.CONFIG_FILE).exists():
    if checkpoint_rounds:
      raise config_lib.ConfigError(
          f'{output} has checkpoints but no {run_files.CONFIG_FILE}: the configuration they '
          'were made with is unknown, so resuming could mix two configurations. Restore '
          f'{run_files.CONFIG_FILE}, or use another output_dir.')
    foreign = sorted(p.name for p in output.iterdir() if p.name not in _FOREIGN_BUT_ALLOWED)
    if foreign:
      raise config_lib.ConfigError(
          f'{output} is not empty ({", ".join(foreign[:3])}{", ..." if len(foreign) > 3 else ""}) '
          f'and holds no run of this project (no {run_files.CONFIG_FILE}): use a new or empty '
          'output_dir.')
  if not checkpoint_rounds and (output / run_files.SUMMARY_FILE).exists():
    raise config_lib.ConfigError(
        f'{output} holds a finished run but no checkpoint to continue it from (committed '
        'results keep none): starting again would write over it. Use another output_dir.')
  if checkpoint_rounds and max(checkpoint_rounds) > config.rounds:
    raise config_lib.ConfigError(
        f'{output} holds a run checkpointed after {max(checkpoint_rounds)} rounds; '
        f'rounds={config.rounds} would end it before that. Give rounds >= '
        f'{max(checkpoint_rounds)} to continue it, or use another output_dir.')


# What a run records besides its settings, and a resume must find unchanged: the algorithms a
# `simulate` run trains and how each process was built, its client ids, the fingerprints of
# its client (`data`: a task's data, for the binaries) and test data.
_RECORDED_FACTS = ('algorithms', 'processes', 'clients', 'data', 'test_data')


def _differences(then: dict, now: dict) -> list[str]:
  """`'name: old then, new now'` of the keys whose values differ."""
  return [
      f'{k}: {then.get(k)!r} then, {now.get(k)!r} now' for k in sorted(set(then) | set(now))
      if then.get(k) != now.get(k)
  ]


# Builder arguments recorded under a name since retired: {old name: (new name, {old value:
# new value})}. The top-k rule became the `topk_rule` knob, recorded by its value.
RETIRED_ARGUMENTS = {
    'rule': ('topk_rule', {f'TopKRule.{n}': n.lower() for n in ('AUTHORS', 'EXACT', 'GLOBAL')})
}


def _current_arguments(build: dict | None) -> dict | None:
  """A recorded build with its retired argument names and values as they are now."""
  if not build or not any(k in build.get('arguments', {}) for k in RETIRED_ARGUMENTS):
    return build
  arguments = dict(build['arguments'])
  for old, (new, values) in RETIRED_ARGUMENTS.items():
    if old in arguments and new not in arguments:
      value = arguments.pop(old)
      arguments[new] = values.get(value, value)
  return dict(build, arguments=arguments)


def _check_facts(output_dir: str, record: dict, facts: dict) -> None:
  """Refuses a resume whose processes, clients or data differ from the recorded ones, naming
  what changed (a fact the record lacks, from a run made before it was recorded, passes)."""

  def refuse(what: str) -> None:
    raise config_lib.ConfigError(
        f'{output_dir} holds a run {what}. Resuming would mix two runs in one: use another '
        'output_dir, or the same processes and data.')

  if 'algorithms' in facts and 'algorithms' not in record:
    refuse(f'of the experiment binaries (task {record.get("config", {}).get("task")!r}), '
           'not of simulate')
  if 'algorithms' in facts and record.get('algorithms') != facts['algorithms']:
    refuse(f'of {record.get("algorithms")}; these processes are {facts["algorithms"]}')
  recorded = record.get('processes') or {}
  for name, build in (facts.get('processes') or {}).items():
    then = _current_arguments(recorded.get(name))
    if then is None or build is None or then == build:
      continue
    if then.get('builder') != build.get('builder'):
      refuse(f'whose {name!r} was built by {then.get("builder")}; it is now '
             f'{build.get("builder")}\'s')
    changed = _differences(then.get('arguments', {}), build.get('arguments', {}))
    refuse(f'whose {name!r} was built otherwise ({"; ".join(changed[:4])})')
  if 'clients' in facts and 'clients' in record and (set(record['clients']) != set(
      facts['clients'])):
    then_ids, now_ids = set(record['clients']), set(facts['clients'])
    refuse(f'of {len(then_ids)} clients; these are {len(now_ids)} ({len(now_ids - then_ids)} '
           f'new, e.g. {sorted(now_ids - then_ids)[:2]}; {len(then_ids - now_ids)} gone, e.g. '
           f'{sorted(then_ids - now_ids)[:2]})')
  for name, what in (('data', 'data'), ('test_data', 'test data')):
    then, now = record.get(name), facts.get(name)
    if (name in record and name in facts and then != now and
        data_sources.VARYING not in (then, now) and not (name == 'data' and now is None)):
      refuse(f'on other {what} (fingerprint {then} then, {now} now: changed, replaced, or '
             'given or left out?)')


def _record_config(config: config_lib.RunSettings,
                   log,
                   facts: dict | None = None,
                   from_round: int = 0) -> dict:
  """Checks the configuration against the recorded one; records it (and any change), with
  `facts` that must not change either: the algorithms a `simulate` run trains, and `data`,
  the fingerprint of a task's data (the data a run resumes on is the data it started on).

  `code` lists the code the run's pieces ran: `{'commit', 'dirty', 'from_round'}`, one entry
  each time a piece (starting at round `from_round`) runs other code than the last.
  """
  path = pathlib.Path(_output_dir(config)) / run_files.CONFIG_FILE
  try:
    record = run_files.record(path.parent)
  except run_files.RunFileError as e:
    raise config_lib.ConfigError(f'{e} It records the run of this directory: restore it, or '
                                 'use another output_dir.') from e
  facts = {k: v for k, v in (facts or {}).items() if k in _RECORDED_FACTS}
  if record is None:
    record = dict(config=config_lib.as_dict(config), changes=[], **facts)
  else:
    _check_facts(_output_dir(config), record, facts)
    if 'clients' in facts and 'clients' in record:
      facts['clients'] = record['clients']  # The same clients: the run keeps their order.
    record.update({k: v for k, v in facts.items() if v is not None})  # A run made before.
    changed = config_lib.compare_for_resume(record['config'], config)
    if changed:
      log('Resuming with changed settings: ' +
          ', '.join(f'{name} {old!r} -> {new!r}' for name, (old, new) in changed.items()))
      record['changes'].append(dict(changed=changed, at=time.strftime('%Y-%m-%d %H:%M:%S')))
      record['config'] = config_lib.as_dict(config)
  code = record.setdefault('code', [])
  version = code_version()
  if not code or {k: code[-1].get(k) for k in version} != version:
    code.append(dict(version, from_round=from_round))
  files.write_file(path, json.dumps(record, indent=2))
  return record


def build_processes(config: config_lib.ExperimentConfig, task: tasks.Task) -> dict:
  """`{name: process}` of the configuration's algorithms; a builder's refusal (an R the
  model's tensors cannot take, say) becomes `ConfigError`, before anything is written."""
  hparams = hyperparameters(config, task)
  processes = collections.OrderedDict()
  for name in config.algorithms:
    try:
      processes[name] = algorithms.build(name, task.model_fn, hparams)
    except ValueError as e:
      raise config_lib.ConfigError(f'{name}: {e}') from e
  return processes


def run_experiment(config: config_lib.ExperimentConfig,
                   log: Callable[[str], object] = print) -> dict:
  """Runs (or resumes) the experiment; returns the summary also written to summary.json.

  Everything is checked before anything is written into `output_dir`: the configuration,
  the data, the algorithms' hyperparameters against the model, and for a resume the
  directory's record and checkpoints.

  Raises:
    config_lib.ConfigError: a bad configuration, data source or checkpoint, a
      configuration that does not match the run in `output_dir`, or another run using
      `output_dir` now.
    remote.WorkerUnavailableError: a TFF worker down at start or gone during a round; the
      run resumes from its last checkpoint when started again.
    hooks.NonFiniteRoundError, hooks.NonFiniteEvaluationError: an algorithm diverged.
  """
  with _removed_if_refused(_output_dir(config)):
    return _run_experiment(config, log)


def _run_experiment(config: config_lib.ExperimentConfig, log) -> dict:
  config_lib.validate(config)
  with exclusive_output_dir(_output_dir(config)):
    task = build_task(config)
    config_lib.validate_run(config, len(task.train_data.client_ids))  # The real population.
    processes = build_processes(config, task)
    with cleanup.noting_interrupts() as interrupted:
      return _run_processes(
          processes,
          task.client_datasets,
          list(task.train_data.client_ids),
          evaluation.build_evaluate_fn(task.model_fn, task.test_data),
          config,
          dict(task_hparams={k: v for k, v in task.hparams.items() if not callable(v)},
               data=task.data_fingerprint),
          log,
          interrupted,
          test_data=task.test_data).summary


ClientData: TypeAlias = tff.simulation.datasets.ClientData | Mapping[str, tf.data.Dataset]


def _signature_with_settings(function: Callable) -> Callable:
  """`function` whose signature (what `help()`, `inspect` and notebooks show) lists each
  `config.RunSettings` field in place of its `**settings`, with its default: the settings
  stay defined once, in `RunSettings`."""
  signature = inspect.signature(function)
  parameters = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
  named = {p.name for p in parameters}
  parameters += [
      inspect.Parameter(f.name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=f.default,
                        annotation=f.type)
      for f in dataclasses.fields(config_lib.RunSettings)
      if f.name not in named
  ]
  function.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
  return function


@dataclasses.dataclass(frozen=True)
class SimulationResult:
  """What `simulate` returns: the run's summary and each process's global model after its
  last round (also after a resume, or when every round was run already).

  Attributes:
    summary: the summary written to `summary.json`: `final_eval` (`{name: {'accuracy': ...,
      'loss': ...}}` or None without test data), the settings, the timings, the memory.
    model_weights: `{name: tff.learning.models.ModelWeights}` of numpy arrays, each process's
      global model; `weights.assign_weights_to(keras_model)` puts it into a Keras model built
      as the `model_fn` builds it.
    states: `{name: server state}`, each process's state after its last round (its
      `next` returns it: the global model, the server optimizer's and the aggregator's
      states). The clients' states are in the run's checkpoints (`output_dir`).
  """

  summary: dict
  model_weights: dict
  states: dict


@_signature_with_settings
def simulate(processes: Mapping[str, process_lib.AlgorithmProcess],
             train_data: ClientData,
             *,
             output_dir: str | None = None,
             test_data: tf.data.Dataset | None = None,
             hooks: Sequence[loop.Hook] = (),
             release_managers: Sequence[tff.program.ReleaseManager] = (),
             log: Callable[[str], object] = print,
             **settings) -> SimulationResult:
  """Runs (or resumes) `processes` side by side on `train_data`, as the binaries' runs do.

  The same loop, hooks and files as `run_experiment` (metrics.csv, tensorboard/,
  checkpoints/, summary.json in `output_dir`; started again, it resumes), for a model and
  data of one's own instead of a task of the registry:

    processes = {'flare': tff_flare.build_flare(model_fn, client_optimizer=sgd),
                 'fedavg': tff_flare.build_fedavg(model_fn, client_optimizer=sgd)}
    result = tff_flare.simulate(processes, client_data, test_data=test, rounds=20,
                                clients_per_round=5, output_dir='runs/mine')
    result.summary['final_eval']['flare']                  # {'accuracy': ..., 'loss': ...}
    result.model_weights['flare'].assign_weights_to(keras_model)

  Args:
    processes: `{name: process}` of this project's builders (`tff_flare.build_*`,
      `algorithms.registry.build`); they start from the first one's initial model.
    train_data: the clients' data: a `tff.simulation.datasets.ClientData`, or a mapping of
      client id to a batched `tf.data.Dataset` in the model's input format.
    output_dir: where results and checkpoints go; None runs in memory (a notebook's run:
      nothing written, no resume; client states in memory).
    test_data: a batched dataset to evaluate the global models on every `eval_every` rounds
      (and after the last); None evaluates nothing.
    hooks: `tff_flare.Hook`s called around every round after the run's own (evaluation,
      releases) and before its checkpoint: a hook reads each round's row (metrics, test
      accuracy) and may end the run early by returning True from `after_round`.
    release_managers: `tff.program.ReleaseManager`s that get every round's row, keyed by
      the round (as the run's metrics.csv and tensorboard/ do), e.g. a
      `tff.program.MemoryReleaseManager`.
    log: where progress lines go.
    **settings: `config.RunSettings` fields (the signature lists them with their defaults;
      `seed` seeds the client sampling: the initial model is the first process's
      `initialize`, from the model's initializers, which
      `tf.keras.utils.set_random_seed(n)` before building the processes fixes):
      `rounds`, `clients_per_round` (default: all),
      `client_sampling`, `eval_every`, `checkpoint_every`, `seed`, `client_state_storage`,
      `execution` (default 'inprocess'), `workers`, `worker_timeout_s`, `client_threads`,
      `allow_nonfinite_rounds`.

  A run records what it ran in `config.json`: how each process was built (its builder and
  arguments, `process.records_build`), the client ids in order, and fingerprints of the client
  and test data. A resume that would change any of them is refused, naming what changed; the
  same clients in another order resume in the recorded order (states follow the ids).

  Returns:
    A `SimulationResult`: the summary (also `summary.json`) and each process's final model
    weights.

  Raises:
    config_lib.ConfigError: a bad setting or input (client ids that are not strings, a process
      name that is no plain word, processes of different models), or a directory holding
      another run.
  """
  if not isinstance(processes, Mapping) or not processes:
    raise config_lib.ConfigError('processes must map names to processes of this project '
                                 "({'flare': tff_flare.build_flare(...), ...}), got "
                                 f'{type(processes).__name__}{"" if processes else " (empty)"}.')
  for name, process in processes.items():
    if not isinstance(process, process_lib.AlgorithmProcess):
      kind = type(process)
      hint = (' TFF\'s FedAvg and FedProx run here as tff_flare.build_tff_fedavg(model_fn, '
              'client_optimizer=...) and build_tff_fedprox.' if isinstance(
                  process, tff.templates.IterativeProcess) else '')
      raise config_lib.ConfigError(
          f'processes[{name!r}] is a {kind.__module__}.{kind.__name__}, not a process of this '
          f'project (tff_flare.build_*: their clients may keep a state).{hint}')
  fields = {f.name for f in dataclasses.fields(config_lib.RunSettings)}
  unknown = sorted(set(settings) - fields)
  if unknown:
    raise config_lib.ConfigError(f'Unknown settings {unknown}; known: {", ".join(sorted(fields))}.')
  run = config_lib.RunSettings(output_dir=output_dir, **settings)
  if not callable(log):
    raise config_lib.ConfigError('log must be a function taking a line (print, a list\'s '
                                 f'append), got {type(log).__name__}.')
  if isinstance(train_data, Mapping):
    not_datasets = [(cid, d) for cid, d in train_data.items() if not isinstance(d, tf.data.Dataset)]
    if not_datasets:
      cid, value = not_datasets[0]
      raise config_lib.ConfigError(f'train_data[{cid!r}] must be a batched tf.data.Dataset, got '
                                   f'{type(value).__name__}.')
    client_ids = list(train_data)
    datasets = lambda ids, round_num: [train_data[cid] for cid in ids]
    dataset_of = train_data.__getitem__
  elif isinstance(train_data, tff.simulation.datasets.ClientData):
    client_ids = list(train_data.client_ids)
    datasets = loop.datasets_of(train_data)
    dataset_of = train_data.create_tf_dataset_for_client
  else:
    raise config_lib.ConfigError('train_data must be a tff.simulation.datasets.ClientData or a '
                                 'mapping of client id to tf.data.Dataset, got '
                                 f'{type(train_data).__name__}.')
  not_strings = [cid for cid in client_ids if not isinstance(cid, str)]
  if not_strings:
    raise config_lib.ConfigError(f'Client ids must be strings (as ClientData\'s are), got '
                                 f'{not_strings[0]!r} ({type(not_strings[0]).__name__}).')
  _check_processes(processes)
  config_lib.validate_run(run, len(client_ids))
  if test_data is not None and not isinstance(test_data, tf.data.Dataset):
    raise config_lib.ConfigError('test_data must be a batched tf.data.Dataset or None, got '
                                 f'{type(test_data).__name__}.')
  _check_instances('hooks', hooks, loop.Hook, 'tff_flare.Hook')
  _check_instances('release_managers', release_managers, tff.program.ReleaseManager,
                   'tff.program.ReleaseManager')
  added = dict(hooks=list(hooks), release_managers=list(release_managers))
  if output_dir is None:
    return _simulate_checked(processes, client_ids, datasets, dataset_of, run, test_data, log,
                             **added)
  with _removed_if_refused(output_dir):
    return _simulate_checked(processes, client_ids, datasets, dataset_of, run, test_data, log,
                             **added)


def _check_instances(name: str, values, kind: type, kind_name: str) -> None:
  if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
    raise config_lib.ConfigError(f'{name} must be a list of {kind_name}, got '
                                 f'{type(values).__name__}.')
  for value in values:
    if not isinstance(value, kind):
      raise config_lib.ConfigError(f'{name} must be a list of {kind_name}, got a '
                                   f'{type(value).__name__} in it.')


def _simulate_checked(processes, client_ids, datasets, dataset_of, run, test_data, log, *,
                      hooks: list, release_managers: list) -> SimulationResult:
  """`simulate` after its inputs are checked: the directory, the facts it records, the run."""
  output_dir = run.output_dir
  model_fn = next(iter(processes.values())).model_fn
  evaluate = (evaluation.build_evaluate_fn(model_fn, test_data) if test_data is not None else None)
  if output_dir is not None:
    config_lib.check_writable(output_dir)
  with (exclusive_output_dir(output_dir) if output_dir is not None else contextlib.nullcontext()):
    facts = dict(algorithms=list(processes),
                 processes={name: process.build for name, process in processes.items()},
                 clients=client_ids,
                 data=_fingerprint_datasets((cid, dataset_of(cid)) for cid in sorted(client_ids)),
                 test_data=(None if test_data is None else _fingerprint_datasets([('test',
                                                                                   test_data)])))
    if data_sources.VARYING in (facts['data'], facts['test_data']):
      log('The client or test data differ from one pass to the next (shuffled?): a resume '
          'cannot check that it is on the same data.')
    with cleanup.noting_interrupts() as interrupted:
      return _run_processes(dict(processes),
                            datasets,
                            client_ids,
                            evaluate,
                            run,
                            facts,
                            log,
                            interrupted,
                            test_data=test_data,
                            hooks=hooks,
                            release_managers=release_managers)


# A process's name is a folder (client_states/<name>) and a column prefix (<name>/<metric>).
_PROCESS_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}')


def _check_processes(processes: Mapping[str, process_lib.AlgorithmProcess]) -> None:
  """Refuses a name that is no plain word, and processes of different models (they start
  from the first one's weights)."""
  for name in processes:
    if not isinstance(name, str) or not _PROCESS_NAME.fullmatch(name):
      raise config_lib.ConfigError(
          f'Process name {name!r} must be letters, digits, _, . or - (at most 100, not '
          'starting with .): it names a folder and the metrics\' columns.')
  names = list(processes)
  first = model_facts.model_facts(processes[names[0]].model_fn)
  for name in names[1:]:
    facts = model_facts.model_facts(processes[name].model_fn)
    if (facts.names, facts.specs) != (first.names, first.specs):
      raise config_lib.ConfigError(
          f'Processes {names[0]!r} and {name!r} are of different models (variables '
          f'{[(n, s.shape.as_list()) for n, s in zip(first.names, first.specs)][:3]}... and '
          f'{[(n, s.shape.as_list()) for n, s in zip(facts.names, facts.specs)][:3]}...): '
          'processes run side by side start from one model. Build them with one model_fn.')


def _fingerprint_datasets(named) -> str | None:
  try:
    return data_sources.fingerprint_datasets(named)
  except data_sources.DataSourceError as e:
    raise config_lib.ConfigError(str(e)) from e
  except (tf.errors.OpError, TypeError, ValueError) as e:
    raise config_lib.ConfigError(
        f'The client or test data cannot be read: {e}'.splitlines()[0]) from e


def _check_memory(processes: dict, first_dataset: tf.data.Dataset, population: int,
                  settings: config_lib.RunSettings, test_data: tf.data.Dataset | None,
                  log) -> memory.Estimate:
  """Estimates the run's peak (a step's activations from `first_dataset`'s first batch, the
  evaluation's from `test_data`'s; None: no evaluation) and logs it beside what the run may
  use; refuses a run that would not fit (`memory.plan`)."""
  threads = settings.client_threads or os.cpu_count() or 1

  def first_batch(dataset: tf.data.Dataset | None):
    try:
      return None if dataset is None else memory.batch_spec(dataset)
    except (tf.errors.OpError, TypeError, ValueError):  # Data that cannot be read: said where
      return None  # the round or the evaluation reads it.

  batches = dict(train=first_batch(first_dataset), test=first_batch(test_data))
  passes: dict = {}  # Processes of one model share its forward passes (a model takes seconds).

  def forward(process, which: str) -> memory.ForwardPass:
    model_fn = getattr(process, 'model_fn', None)
    if batches[which] is None or model_fn is None:
      return memory.ForwardPass()
    if (model_fn, which) not in passes:
      passes[model_fn, which] = memory.forward_tensors(model_fn, batches[which])
    return passes[model_fn, which]

  budget = (None if settings.memory_budget_gib is None else int(settings.memory_budget_gib *
                                                                memory.GIB))
  estimate, available, refusal = memory.plan(
      {name: memory.process_sizes(p, forward(p, 'train')) for name, p in processes.items()},
      clients_with_state=population,
      clients_per_round=settings.clients_per_round or population,
      threads=threads,
      storage=settings.client_state_storage,
      execution=settings.execution,
      evaluates=test_data is not None,
      evaluation_forward=max([forward(p, 'test').total for p in processes.values()] + [0]),
      tff_subrounds=settings.tff_subrounds,
      budget=budget)
  if refusal:
    raise config_lib.ConfigError(refusal)
  log(f'Memory: estimated peak {estimate.describe()}' +
      (f' of {memory.gib(available)} GiB this run may use' if available else '') +
      f' ({memory.allocator_name()}).')
  return estimate


def _run_processes(
    processes: dict,
    client_datasets,
    client_ids: list[str],
    evaluate,
    settings: config_lib.RunSettings,
    facts: dict,
    log,
    interrupted: threading.Event | None = None,
    *,
    test_data: tf.data.Dataset | None = None,
    hooks: Sequence[loop.Hook] = (),
    release_managers: Sequence[tff.program.ReleaseManager] = ()
) -> SimulationResult:
  """The one run of processes: checks the directory, records the settings (`facts` beside
  them), runs the loop with its own hooks, then the caller's `hooks`, and the caller's
  `release_managers`, writes the summary
  (returned with the runs' final models and states); stops between rounds once `interrupted`
  is set (`cleanup.noting_interrupts`); `test_data`, the batches `evaluate` reads, sizes the
  evaluation in the memory estimate. Without `settings.output_dir` nothing is read or
  written: no record, checkpoint, metrics file or summary file."""
  # TFF's default context starts a `worker_binary` that would outlive a script that runs
  # processes it built with the modules' own builders (not the package's, which register
  # this too) and hold the script's output open: stopped at exit. At a run, not on import.
  cleanup.stop_workers_at_exit()
  output = pathlib.Path(settings.output_dir) if settings.output_dir is not None else None
  checkpoint_rounds = []
  if output is not None:
    checkpoint_rounds = checkpoints_lib.saved_rounds(output / run_files.CHECKPOINTS)
    _check_output_dir(settings, checkpoint_rounds)
  estimate = _check_memory(processes,
                           client_datasets(client_ids[:1], 0)[0], len(client_ids), settings,
                           test_data if evaluate is not None else None, log)
  record: dict[str, Any]
  if output is None:
    record = dict(changes=[], code=[dict(code_version(), from_round=0)])
  else:
    record = _record_config(settings,
                            log,
                            facts,
                            from_round=checkpoint_rounds[-1] if checkpoint_rounds else 0)
  if record.get('clients') and record['clients'] != list(client_ids):
    log('The clients are given in another order than the run recorded; it keeps its own '
        '(the states and the sampling follow the client ids).')
    client_ids = list(record['clients'])
  if output is not None and not checkpoint_rounds and (output / run_files.METRICS).exists():
    log('No checkpoint yet (stopped before the first): starting again from round 0.')
    for name in run_files.ROUND_OUTPUTS:
      entry = output / name
      if entry.is_dir():
        shutil.rmtree(entry)
      else:
        entry.unlink(missing_ok=True)
  execution = modes.build_execution(settings.execution,
                                    settings.workers,
                                    timeout_s=settings.worker_timeout_s,
                                    num_threads=settings.client_threads,
                                    tff_subrounds=settings.tff_subrounds)
  with execution, memory.PeakSampler() as peak:
    runs: list[loop.AlgorithmRun] = []
    for name, process in processes.items():
      state_dir = (output / 'client_states' / name if output is not None and
                   settings.client_state_storage in ('disk', 'files') else None)
      run = loop.AlgorithmRun(name,
                              process,
                              execution,
                              client_state_dir=state_dir,
                              states_written_by_clients=settings.client_state_storage == 'files',
                              initial_weights=runs[0].model_weights() if runs else None)
      runs.append(run)
    log(f'Execution: {execution.name}. ' + '; '.join(f'{run.name} on {run.where}' for run in runs) +
        '.')
    checkpoints, start_round = None, 0
    if output is not None:
      checkpoints = checkpoints_lib.Checkpoints(str(output / run_files.CHECKPOINTS), runs,
                                                client_ids)
      try:
        start_round = checkpoints.restore()
        run_files.check_rows_before(output, start_round)
      except checkpoints_lib.CheckpointError as e:
        raise config_lib.ConfigError(str(e)) from e
      except run_files.RunFileError as e:
        raise config_lib.ConfigError(f'{e} Restore it, or start again in another '
                                     'output_dir.') from e
    if start_round:
      log(f'Resuming from the checkpoint after round {start_round - 1}.')
    sampler = sampling.build_client_sampler(client_ids, settings.clients_per_round or
                                            len(client_ids), settings.seed,
                                            settings.client_sampling)
    collected = hooks_lib.CollectRows()

    def last_checkpoint() -> int | None:
      versions = checkpoints.versions() if checkpoints else []
      return versions[-1] if versions else None

    run_hooks: list[loop.Hook] = [hooks_lib.Evaluation(evaluate, settings.eval_every)
                                 ] if evaluate else []
    if any(run.process.uses_test_loss for run in runs):  # EC-FFL, reusing the evaluation.
      if evaluate is None:
        raise config_lib.ConfigError(', '.join(r.name for r in runs if r.process.uses_test_loss) +
                                     ' adapt(s) to the test loss: give test_data.')
      run_hooks.append(hooks_lib.TestLossFeedback(evaluate))
    managers, final_managers = list(release_managers), list(release_managers)
    if output is not None:
      csv = tff.program.CSVFileReleaseManager(output / run_files.METRICS, key_fieldname='round')
      managers += [csv, tff.program.TensorBoardReleaseManager(output / 'tensorboard')]
      final_managers.append(csv)
    run_hooks += [hooks_lib.ReleaseRows(managers, final_managers=final_managers)
                 ] if managers else []
    if not settings.allow_nonfinite_rounds:
      run_hooks.append(hooks_lib.StopOnNonFiniteRound(last_checkpoint))
    run_hooks += hooks
    if checkpoints is not None:
      run_hooks.append(
          hooks_lib.CheckpointEvery(checkpoints, settings.checkpoint_every, settings.rounds))
    progress = hooks_lib.LogProgress(log, start_round, settings.rounds, peak.peak_bytes)
    run_hooks += [progress, collected]
    if interrupted:  # Last: a stop after a round comes after its row and checkpoint.
      run_hooks.append(
          hooks_lib.StopOnInterrupt(interrupted,
                                    last_checkpoint,
                                    checkpoints.save if checkpoints is not None else None,
                                    end_round=settings.rounds))
    started = time.perf_counter()
    try:
      loop.run_rounds(runs,
                      client_datasets,
                      sampler,
                      start_round=start_round,
                      end_round=settings.rounds,
                      hooks=run_hooks,
                      execution_stats=execution.stats)
    except remote.WorkerUnavailableError as e:  # Where this run resumes from, if anywhere.
      last = last_checkpoint()
      raise e.with_advice(
          'The run was in memory (no output directory): nothing to resume.' if output is None else
          'Started again on the same output directory, the run resumes from ' +
          ('round 0 (no checkpoint yet).'
           if last is None else f'its checkpoint after round {last - 1}.')) from e
    except (tf.errors.InvalidArgumentError, grpc.RpcError) as e:  # Labels past the classes.
      said = what_tf_says(e)
      if said is None:
        raise
      done = collected.rows[-1].round_num + 1 if collected.rows else start_round
      raise config_lib.ConfigError(
          f'The model cannot run on the data (round {done}): {said}') from e
  final = collections.OrderedDict((run.name, collected.rows[-1][run.name].eval) for run in runs)
  summary = dict(config=config_lib.as_dict(settings),
                 changes=record['changes'],
                 code=record['code'],
                 **dict(facts, clients=list(client_ids)),
                 final_eval=final,
                 rounds=settings.rounds,
                 rounds_trained=collected.rows[-1].round_num,
                 where={run.name: run.where for run in runs},
                 num_trainable_parameters=int(
                     sum(np.size(t) for t in runs[0].model_weights().trainable)),
                 gpus=[d.name for d in tf.config.list_physical_devices('GPU')],
                 seconds_this_session=time.perf_counter() - started,
                 memory=dict(estimated_peak_gib=round(estimate.total / memory.GIB, 3),
                             peak_gib=round(peak.peak_bytes() / memory.GIB, 3),
                             floor_gib=round(estimate.floor / memory.GIB, 3)))
  if output is not None:
    files.write_file(output / run_files.SUMMARY_FILE, json.dumps(summary, indent=2, default=str))
  return SimulationResult(
      summary=summary,
      model_weights={
          run.name: tf.nest.map_structure(np.asarray, run.model_weights()) for run in runs
      },
      states={run.name: run.state for run in runs})
