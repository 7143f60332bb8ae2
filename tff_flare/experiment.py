"""Runs several algorithms side by side on one task, with checkpoints and released metrics.

Algorithms: the FLARE study's (`flare`, `ec`, `ec_fedprox`, `ef21`, `fedavg`, TFF's
`tff_fedavg` and `tff_fedprox`) and the masking study's (`mask_none`, `mask_independent`,
`mask_synchronized`: `masking.build_masked_fedavg`, with `keep_probability`,
`mask_weighting` and `num_mask_draws` from the config; their metrics carry `survival`).

Every algorithm trains on the same task, from the same initial model (the first process's
initial weights are given to all), on the same sampled clients each round (a seeded sampler
that is a pure function of the round number). Per round, the metrics of every algorithm
(training metrics, communication counters, the round's seconds, and at evaluation rounds the
test loss and accuracy, taken before the round's training as the authors do) are released
through `tff.program` release managers: a CSV file (`metrics.csv`, one row per round, columns
`<algorithm>/<metric path>`) and TensorBoard (`tensorboard/`). Program state (the round, each
algorithm's server state and the state of every client) is saved with
`tff.program.FileProgramStateManager` every `checkpoint_every` rounds and at the end; a run
started again with the same configuration and output directory resumes from the latest
checkpoint, and the CSV manager drops rows of rounds after it. `summary.json` holds the full
configuration and the final results.

`execution='remote'` runs every computation on TFF workers (`remote`), with the client
states, checkpoints and outputs kept here; `client_state_storage='disk'` keeps the client
states in memory-mapped files under `<output_dir>/client_states/` instead of in RAM.
"""

import asyncio
import collections
import dataclasses
import json
import os
import pathlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import ec
from tff_flare import ef21
from tff_flare import evaluation
from tff_flare import fedavg
from tff_flare import flare
from tff_flare import masking
from tff_flare import presets
from tff_flare import regularizers
from tff_flare import remote
from tff_flare import schedules
from tff_flare import sparsification
from tff_flare import tasks
from tff_flare import tff_baselines
from tff_flare import training_loop

# The masking study's processes: FedAvg with no / independent / synchronized update masks.
MASKING_ALGORITHMS = {'mask_none': masking.MaskMode.NONE,
                      'mask_independent': masking.MaskMode.INDEPENDENT,
                      'mask_synchronized': masking.MaskMode.SYNCHRONIZED}
ALGORITHMS = ('flare', 'ec', 'ec_fedprox', 'ef21', 'fedavg', 'tff_fedavg',
              'tff_fedprox') + tuple(MASKING_ALGORITHMS)

CLIENT_STATE_STORAGES = ('memory', 'disk')


class ExperimentError(ValueError):
  """A configuration that cannot run, or a checkpoint that cannot be restored."""


@dataclasses.dataclass
class ExperimentConfig:
  """One experiment. `None` means the task's default (the authors' config)."""

  output_dir: str
  task: str = 'digits_demo'
  algorithms: Sequence[str] = ('flare', 'ec', 'fedavg')
  rounds: int = 10
  total_clients: int | None = None
  num_clients: int | None = None
  clients_per_round: int | None = None
  keep_percent: float = 0.001
  tau: float = 0.05
  tau_decay: float = 1.1
  mask_percentile: float = 50.0
  reg_steps: int | None = None  # -1: every local step.
  local_epochs: int = 1
  batch_size: int | None = None
  learning_rate: float | None = None
  momentum: float | None = None
  eval_every: int = 10
  checkpoint_every: int = 10
  seed: int = 0
  source: str | None = None
  data_path: str | None = None
  data_dir: str | None = None
  partition: str | None = None
  alpha: float = 1.0
  ratio: float = 100.0
  ef21_dense_state: bool = False
  tff_fedprox_strength: float = 0.01
  keep_probability: float = 0.5
  mask_weighting: str = 'uniform'
  num_mask_draws: int = 0
  client_state_storage: str = 'memory'  # 'disk': files under <output_dir>/client_states.
  execution: str = 'local'
  workers: Sequence[str] = ()
  worker_timeout_s: float = 60.0


def config_from_preset(name: str, output_dir: str, **overrides) -> ExperimentConfig:
  """The preset's configuration with `overrides` (explicit flags) applied."""
  if name not in presets.PRESETS:
    raise ExperimentError(f'Unknown preset {name!r}; known presets: '
                          f'{", ".join(sorted(presets.PRESETS))}.')
  values = dict(presets.PRESETS[name])
  values.update(overrides)
  return ExperimentConfig(output_dir=output_dir, **values)


def validate(config: ExperimentConfig) -> None:
  """Raises `ExperimentError` for anything that would fail later, before any work."""
  try:
    unknown = [a for a in config.algorithms if a not in ALGORITHMS]
    if unknown or not config.algorithms:
      raise ExperimentError(f'Unknown algorithms {unknown}; known: {", ".join(ALGORITHMS)}.')
    if config.task not in tasks.TASK_NAMES:
      raise ExperimentError(f'Unknown task {config.task!r}; known tasks: '
                            f'{", ".join(tasks.TASK_NAMES)}.')
    sparsification.validate_keep_percent(config.keep_percent)
    schedules.validate_tau(config.tau, config.tau_decay)
    regularizers.validate_percentile(config.mask_percentile)
    masking.validate_keep_probability(config.keep_probability)
    masking.Weighting(config.mask_weighting)
    if config.client_state_storage not in CLIENT_STATE_STORAGES:
      raise ExperimentError(f'Unknown client_state_storage {config.client_state_storage!r}; '
                            f'known: {", ".join(CLIENT_STATE_STORAGES)}.')
    remote.validate_execution(config.execution, config.workers, config.worker_timeout_s)
    if config.num_mask_draws < 0:
      raise ExperimentError(f'num_mask_draws must be >= 0, got {config.num_mask_draws}.')
    for name in ('rounds', 'local_epochs', 'eval_every', 'checkpoint_every'):
      if getattr(config, name) < 1:
        raise ExperimentError(f'{name} must be >= 1, got {getattr(config, name)}.')
    if config.reg_steps is not None and config.reg_steps < -1:
      raise ExperimentError(f'reg_steps must be >= 0 (or -1 for every step), got '
                            f'{config.reg_steps}.')
    population = config.num_clients or tasks.default_num_clients(config.task)
    if config.total_clients is not None and population > config.total_clients:
      raise ExperimentError(f'num_clients ({population}) exceeds total_clients '
                            f'({config.total_clients}).')
    if config.clients_per_round is not None and not (
        1 <= config.clients_per_round <= population):
      raise ExperimentError(f'clients_per_round ({config.clients_per_round}) must be in '
                            f'[1, {population}] (the clients of the task).')
  except ValueError as e:
    if isinstance(e, ExperimentError):
      raise
    raise ExperimentError(str(e)) from e
  _check_writable(config.output_dir)


def _check_writable(output_dir: str) -> None:
  try:
    os.makedirs(output_dir, exist_ok=True)
    probe = pathlib.Path(output_dir) / '.write_probe'
    probe.write_text('ok')
    probe.unlink()
  except OSError as e:
    raise ExperimentError(f'Output directory {output_dir} is not writable: {e}') from e


def build_process(name: str, task: tasks.Task, config: ExperimentConfig):
  """The process of algorithm `name` for `task` with the configuration's hyperparameters."""
  hparams = task.hparams
  learning_rate = config.learning_rate if config.learning_rate is not None else hparams[
      'learning_rate']
  momentum = config.momentum if config.momentum is not None else hparams['momentum']
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate, momentum=momentum or None)
  reg_steps = hparams['reg_steps'] if config.reg_steps is None else config.reg_steps
  if reg_steps == -1:
    reg_steps = None
  is_regularized = hparams.get('is_regularized')
  common = dict(keep_percent=config.keep_percent, client_optimizer=optimizer)
  if name == 'flare':
    return flare.build_flare(task.model_fn, tau=config.tau, tau_decay=config.tau_decay,
                             mask_percentile=config.mask_percentile, reg_steps=reg_steps,
                             is_regularized=is_regularized, **common)
  if name == 'ec':
    return ec.build_ec(task.model_fn, **common)
  if name == 'ec_fedprox':
    return ec.build_ec_fedprox(task.model_fn, tau=config.tau, tau_decay=config.tau_decay,
                               is_regularized=is_regularized, **common)
  if name == 'ef21':
    return ef21.build_ef21(task.model_fn, total_clients=len(task.train_data.client_ids),
                           dense_state_shortcut=config.ef21_dense_state, **common)
  if name == 'fedavg':
    return fedavg.build_fedavg(task.model_fn, client_optimizer=optimizer)
  if name == 'tff_fedavg':
    return tff_baselines.build_tff_fedavg(task.model_fn, client_optimizer=optimizer)
  if name == 'tff_fedprox':
    return tff_baselines.build_tff_fedprox(task.model_fn, client_optimizer=optimizer,
                                           proximal_strength=config.tff_fedprox_strength)
  if name in MASKING_ALGORITHMS:
    return masking.build_masked_fedavg(
        task.model_fn, keep_probability=config.keep_probability,
        mask_mode=MASKING_ALGORITHMS[name], client_optimizer=optimizer,
        weighting=masking.Weighting(config.mask_weighting),
        num_mask_draws=config.num_mask_draws, seed=config.seed)
  raise ExperimentError(f'Unknown algorithm {name!r}; known: {", ".join(ALGORITHMS)}.')


class _Checkpoints:
  """Program state of all runs, through `tff.program.FileProgramStateManager`.

  The state is saved as flat lists of arrays (server state; the states of all clients of
  the population, in client-id order) and packed back with each process's own structure.
  """

  def __init__(self, directory: str, runs, client_ids):
    self._manager = tff.program.FileProgramStateManager(directory, keep_total=2)
    self._directory = directory
    self._runs = runs
    self._client_ids = list(client_ids)

  def _flatten(self, round_num: int):
    state = collections.OrderedDict(round=np.int64(round_num))
    for run in self._runs:
      clients = [np.zeros([0], np.float32)]
      if run.store is not None:
        clients = run.store.checkpoint_arrays(self._client_ids)
      state[run.name] = collections.OrderedDict(
          server=[np.asarray(t) for t in tf.nest.flatten(run.state)], clients=clients)
    return state

  def save(self, round_num: int) -> None:
    asyncio.run(self._manager.save(self._flatten(round_num), round_num))
    for run in self._runs:
      if run.store is not None:
        run.store.commit()

  def restore(self) -> int:
    """Restores the latest checkpoint into the runs; returns its round (0 if none)."""
    versions = asyncio.run(self._manager.get_versions())
    if not versions:
      return 0
    latest = max(versions)
    try:
      saved = asyncio.run(self._manager.load(latest, self._flatten(0)))
      for run in self._runs:
        entry = saved[run.name]
        run.state = tf.nest.pack_sequence_as(run.state, list(entry['server']))
        if run.store is not None:
          run.store.restore_checkpoint_arrays(self._client_ids, list(entry['clients']))
      return int(saved['round'])
    except Exception as e:  # pylint: disable=broad-except
      raise ExperimentError(f'Checkpoint {latest} under {self._directory} cannot be restored '
                            f'({type(e).__name__}: {e}). Remove it to start over.') from e


def _release(managers, value, key: int) -> None:
  async def release_all():
    await asyncio.gather(*[m.release(value, key=key) for m in managers])
  asyncio.run(release_all())


def _round_row(runs, client_ids, datasets, evaluate, evaluate_now, dense_bytes_per_client,
               execution_stats=None):
  """One round of every run: `{name: {eval?, round_seconds, bytes_uploaded, train}}`.

  `bytes_uploaded` is the sparse (value + index) encoding of what our processes' clients
  sent, and the dense float32 size of the model per client for TFF's processes. With remote
  execution, `bytes_driver_workers` is what the round's computations moved between this
  driver and its workers (serialized, both ways; evaluation not included).
  """
  row = collections.OrderedDict()
  for run in runs:
    entry = collections.OrderedDict()
    if evaluate_now:
      entry['eval'] = evaluate(run.model_weights())
    if execution_stats is not None:
      execution_stats.reset()
    start = time.perf_counter()
    metrics = run.run_round(client_ids, datasets)
    entry['round_seconds'] = time.perf_counter() - start
    if execution_stats is not None:
      entry['bytes_driver_workers'] = execution_stats.total_bytes()
    communication = metrics.get('communication')
    if communication is not None:
      entry['bytes_uploaded'] = int(communication['bytes_sent_total'])
    else:
      entry['bytes_uploaded'] = len(client_ids) * dense_bytes_per_client
    entry['train'] = metrics
    row[run.name] = entry
  return row


def run_experiment(config: ExperimentConfig, log=print) -> dict:
  """Runs (or resumes) the experiment; returns the summary also written to summary.json.

  With `execution='remote'` every computation runs on the configured TFF workers; the
  client states, checkpoints and outputs stay with this driver, and the results are those
  of a local run up to float rounding (the workers' partial sums are added in another order).

  Raises:
    ExperimentError: a bad configuration or checkpoint.
    remote.WorkerUnavailableError: a worker down at start or gone during a round; the run
      resumes from its last checkpoint when started again.
  """
  validate(config)
  with remote.execution_context(config.execution, config.workers,
                                timeout_s=config.worker_timeout_s) as remote_run:
    if remote_run is not None:
      log(f'Running on {len(remote_run.addresses)} TFF workers: '
          f'{", ".join(remote_run.addresses)}.')
    return _run(config, log, remote_run.stats if remote_run is not None else None)


def _run(config: ExperimentConfig, log, execution_stats) -> dict:
  """`run_experiment` in the installed execution context."""
  task = tasks.build_task(
      config.task, source=config.source, data_path=config.data_path,
      data_dir=config.data_dir, total_clients=config.total_clients,
      num_clients=config.num_clients, partition=config.partition, alpha=config.alpha,
      ratio=config.ratio, batch_size=config.batch_size, epochs=config.local_epochs,
      seed=config.seed)
  client_ids = task.train_data.client_ids
  runs = []
  for name in config.algorithms:
    process = build_process(name, task, config)
    initial = runs[0].model_weights() if runs else None
    state_dir = (str(pathlib.Path(config.output_dir) / 'client_states' / name)
                 if config.client_state_storage == 'disk' else None)
    runs.append(training_loop.AlgorithmRun(name, process, initial_weights=initial,
                                           client_state_dir=state_dir))
  evaluate = evaluation.build_evaluate_fn(task.model_fn, task.test_data)
  # All runs share one model architecture: its dense float32 size, for TFF's processes.
  dense_bytes_per_client = 4 * sum(int(np.size(t)) for t in runs[0].model_weights().trainable)
  output = pathlib.Path(config.output_dir)
  checkpoints = _Checkpoints(str(output / 'checkpoints'), runs, client_ids)
  managers = [tff.program.CSVFileReleaseManager(output / 'metrics.csv', key_fieldname='round'),
              tff.program.TensorBoardReleaseManager(output / 'tensorboard')]
  start_round = checkpoints.restore()
  if start_round:
    log(f'Resuming from the checkpoint after round {start_round - 1}.')
  sampler = training_loop.build_client_sampler(
      client_ids, config.clients_per_round or len(client_ids), config.seed)
  started = time.perf_counter()
  for round_num in range(start_round, config.rounds):
    ids = sampler(round_num)
    datasets = [task.train_data.create_tf_dataset_for_client(cid) for cid in ids]
    row = _round_row(runs, ids, datasets, evaluate, round_num % config.eval_every == 0,
                     dense_bytes_per_client, execution_stats)
    _release(managers, row, round_num)
    done = round_num + 1
    if done % config.checkpoint_every == 0 or done == config.rounds:
      checkpoints.save(done)
    rate = (done - start_round) / (time.perf_counter() - started)
    log(f'round {round_num} | {rate:.2f} rounds/s | ETA {(config.rounds - done) / rate:.0f} s'
        + ''.join(f' | {r.name} acc {row[r.name]["eval"]["accuracy"]:.4f}'
                  for r in runs if 'eval' in row[r.name]))
  final = collections.OrderedDict((run.name, evaluate(run.model_weights())) for run in runs)
  _release(managers[:1], collections.OrderedDict(
      (name, collections.OrderedDict(eval=result)) for name, result in final.items()),
      config.rounds)
  summary = dict(config=dataclasses.asdict(config), task_hparams={
      k: v for k, v in task.hparams.items() if not callable(v)}, clients=list(client_ids),
                 final_eval=final, rounds=config.rounds,
                 gpus=[d.name for d in tf.config.list_physical_devices('GPU')],
                 seconds_this_session=time.perf_counter() - started)
  (output / 'summary.json').write_text(json.dumps(summary, indent=2, default=str))
  return summary
