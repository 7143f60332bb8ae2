"""Tests of `tff_flare.experiment.runner`: resume, refused configurations, data errors."""

import csv
import dataclasses
import inspect
import json
import os
import pathlib
import shutil
import signal
import subprocess
import types
from unittest import mock

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.execution import cleanup
from tff_flare.execution import remote
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner
from tff_flare.simulation import hooks


def _config(output_dir, **overrides):
  values = dict(output_dir=str(output_dir),
                task='digits_demo',
                algorithms=('flare', 'ef21', 'fedavg'),
                rounds=3,
                clients_per_round=3,
                eval_every=2,
                checkpoint_every=1,
                execution='inprocess')
  values.update(overrides)
  return config_lib.ExperimentConfig(**values)


def _run(config):
  lines = []
  summary = runner.run_experiment(config, log=lines.append)
  return summary, lines


class CodeVersionTest(tf.test.TestCase):

  def _git(self, root, *args):
    subprocess.run(['git', '-C', str(root), *args],
                   check=True,
                   capture_output=True,
                   env=dict(os.environ,
                            GIT_AUTHOR_NAME='t',
                            GIT_AUTHOR_EMAIL='t@t',
                            GIT_COMMITTER_NAME='t',
                            GIT_COMMITTER_EMAIL='t@t'))

  def test_commit_and_dirty_code_but_not_results(self):
    root = pathlib.Path(self.get_temp_dir()) / 'checkout'
    (root / 'experiments' / 'results').mkdir(parents=True)
    (root / 'code.py').write_text('a = 1\n')
    (root / 'experiments' / 'results' / 'metrics.csv').write_text('round\n')
    self.assertEqual(runner.code_version(root), dict(commit=None, dirty=None))
    self._git(root, 'init', '-q')
    self._git(root, 'add', '.')
    self._git(root, 'commit', '-q', '-m', 'first')
    version = runner.code_version(root)
    self.assertRegex(version['commit'], '^[0-9a-f]{40}$')
    self.assertFalse(version['dirty'])
    (root / 'experiments' / 'results' / 'metrics.csv').write_text('round\n0\n')
    (root / 'untracked.py').write_text('')
    self.assertFalse(runner.code_version(root)['dirty'])  # A run's results; a new file.
    (root / 'code.py').write_text('a = 2\n')
    self.assertEqual(runner.code_version(root), dict(commit=version['commit'], dirty=True))

  def test_each_piece_of_other_code_is_recorded_with_its_first_round(self):
    output = pathlib.Path(self.get_temp_dir()) / 'run'
    versions = [
        dict(commit='a' * 40, dirty=False),
        dict(commit='a' * 40, dirty=False),
        dict(commit='b' * 40, dirty=True)
    ]
    summaries = []
    for rounds, version in zip((1, 2, 3), versions):
      with mock.patch.object(runner, 'code_version', return_value=version):
        summaries.append(_run(_config(output, rounds=rounds, algorithms=('fedavg',)))[0])
    expected = [
        dict(commit='a' * 40, dirty=False, from_round=0),
        dict(commit='b' * 40, dirty=True, from_round=2)
    ]
    self.assertEqual(json.loads((output / 'config.json').read_text())['code'], expected)
    self.assertEqual(summaries[-1]['code'], expected)


class ResumeTest(tf.test.TestCase):

  def test_a_changed_configuration_is_refused_and_longer_rounds_are_recorded(self):
    output = pathlib.Path(self.get_temp_dir()) / 'run'
    flare = dict(algorithms=('flare',))
    _run(_config(output, rounds=2, **flare))
    with self.assertRaisesRegex(
        config_lib.ConfigError, r'another configuration \(keep_percent: 0.001 then, 0.01 now; '
        r'tau: 0.05 then, 0.5 now\)'):
      _run(_config(output, rounds=4, tau=0.5, keep_percent=0.01, **flare))
    summary, lines = _run(_config(output, rounds=4, **flare))
    self.assertIn('Resuming from the checkpoint after round 1.', lines)
    self.assertIn("Resuming with changed settings: rounds 2 -> 4", lines)
    record = json.loads((output / 'config.json').read_text())
    self.assertEqual(record['changes'][0]['changed'], dict(rounds=[2, 4]))
    self.assertEqual(summary['changes'], record['changes'])
    whole, _ = _run(_config(pathlib.Path(self.get_temp_dir()) / 'whole', rounds=4, **flare))
    self.assertEqual(summary['final_eval'], whole['final_eval'])

  def test_both_kept_checkpoints_resume_with_either_store(self):
    # The stores hold the same states (tests/simulation/test_client_state.py): one whole run.
    # FLARE and EF21: two kinds of client state (an accumulator; a dense estimate).
    algorithms = ('flare', 'ef21')
    whole, _ = _run(_config(pathlib.Path(self.get_temp_dir()) / 'whole', algorithms=algorithms))
    for storage in ('memory', 'disk', 'files'):
      base = pathlib.Path(self.get_temp_dir()) / storage
      output = base / 'run'
      _run(_config(output, client_state_storage=storage, algorithms=algorithms))
      checkpoints = sorted(os.listdir(output / 'checkpoints'))
      self.assertEqual(checkpoints,
                       ['client_states_2', 'client_states_3', 'program_state_2', 'program_state_3'])
      # Lost: resume from the older (its client states left behind are written over).
      shutil.rmtree(output / 'checkpoints' / 'program_state_3')
      summary, lines = _run(_config(output, client_state_storage=storage, algorithms=algorithms))
      self.assertIn('Resuming from the checkpoint after round 1.', lines)
      self.assertEqual(summary['final_eval'], whole['final_eval'], storage)

  def test_a_local_checkpoint_resumes_in_process(self):
    base = pathlib.Path(self.get_temp_dir())
    whole, _ = _run(_config(base / 'whole', rounds=4))
    _run(_config(base / 'mixed', rounds=2, execution='local'))
    summary, lines = _run(_config(base / 'mixed', rounds=4))
    self.assertIn(
        "Resuming with changed settings: rounds 2 -> 4, execution 'local' -> "
        "'inprocess'", lines)
    for name, result in whole['final_eval'].items():
      self.assertAllClose(summary['final_eval'][name], result, rtol=1e-5, msg=name)

  def test_corrupt_checkpoint_is_a_clear_error(self):
    output = pathlib.Path(self.get_temp_dir()) / 'corrupt'
    _run(_config(output, algorithms=('ec',), rounds=3))
    for path in (output / 'checkpoints' / 'program_state_3').rglob('*.pb'):
      path.write_bytes(b'garbage')
    with self.assertRaisesRegex(
        config_lib.ConfigError, r'The checkpoint after round 2 cannot be restored .* Remove '
        r'.*program_state_3 and .*client_states_3 to resume from the '
        r'checkpoint after round 1\.'):
      _run(_config(output, algorithms=('ec',), rounds=4))


class BadRunTest(tf.test.TestCase):

  def test_data_source_errors_are_one_line(self):
    base = pathlib.Path(self.get_temp_dir())
    corrupt = base / 'corrupt.npz'
    corrupt.write_bytes(b'not a zip file')
    for path, message in ((base / 'missing.npz', 'missing.npz does not exist'),
                          (corrupt, 'corrupt.npz is not an .npz archive')):
      with self.assertRaisesRegex(config_lib.ConfigError, message):
        _run(_config(base / 'out' / 'nested', task='mnist_cnn', source='npz', data_path=str(path)))
      self.assertFalse((base / 'out').exists())  # A refused run leaves no folder it made.
    kept = base / 'kept'
    kept.mkdir()
    with self.assertRaisesRegex(config_lib.ConfigError, 'missing.npz does not exist'):
      _run(_config(kept, task='mnist_cnn', source='npz', data_path=str(base / 'missing.npz')))
    self.assertTrue(kept.is_dir())  # One that was there stays.

  def test_a_diverged_round_stops_the_run_unless_allowed(self):
    config = _config(pathlib.Path(self.get_temp_dir()) / 'nan',
                     algorithms=('fedavg',),
                     learning_rate=1e30,
                     rounds=4)
    with self.assertRaisesRegex(hooks.NonFiniteRoundError,
                                r'Round \d: every client of fedavg \(3\) returned non-finite'):
      _run(config)
    config = _config(pathlib.Path(self.get_temp_dir()) / 'nan_allowed',
                     algorithms=('fedavg',),
                     learning_rate=1e30,
                     rounds=4,
                     allow_nonfinite_rounds=True)
    summary, _ = _run(config)
    self.assertEqual(summary['rounds'], 4)


class RefusedRunTest(tf.test.TestCase):
  """Runs that used to exit 0 with wrong or mixed results (issue 19), now refused up front."""

  def test_a_step_cap_trains_that_many_batches_a_round(self):
    config = _config(self.get_temp_dir(),
                     algorithms=('fedavg',),
                     rounds=2,
                     batch_size=8,
                     local_steps=3)
    _run(config)
    with open(os.path.join(config.output_dir, 'metrics.csv')) as f:
      rows = list(csv.DictReader(f))
    column = 'fedavg/train/client_work/train/num_examples'
    trained = [int(row[column]) for row in rows if row[column]]  # Not the final evaluation.
    self.assertEqual(trained, [3 * 3 * 8] * 2)  # 3 clients a round.

  def test_resuming_with_fewer_rounds_is_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'four'
    _run(_config(output, algorithms=('fedavg',), rounds=4, eval_every=1))
    rows_before = (output / 'metrics.csv').read_text()
    with self.assertRaisesRegex(
        config_lib.ConfigError, r'checkpointed after 4 rounds; '
        r'rounds=1 would end it before that. Give rounds >= 4 to continue it'):
      _run(_config(output, algorithms=('fedavg',), rounds=1, eval_every=1))
    self.assertEqual((output / 'metrics.csv').read_text(), rows_before)  # Untouched.
    self.assertEqual(json.loads((output / 'summary.json').read_text())['rounds'], 4)

  def test_checkpoints_without_their_config_are_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'no_config'
    _run(_config(output, algorithms=('ec',), rounds=2))
    (output / 'config.json').unlink()
    with self.assertRaisesRegex(config_lib.ConfigError, 'has checkpoints but no config.json'):
      _run(_config(output, algorithms=('ec',), rounds=3, keep_percent=0.01, tau=0.5))

  def test_a_run_record_or_rows_the_checkpoint_needs_damaged_are_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'damaged'
    _run(_config(output, algorithms=('fedavg',), rounds=2, eval_every=1))
    record, rows = (output / 'config.json').read_text(), (output / 'metrics.csv').read_text()
    (output / 'config.json').write_text('[1, 2]')
    with self.assertRaisesRegex(config_lib.ConfigError,
                                'config.json is not a run record: a JSON list'):
      _run(_config(output, algorithms=('fedavg',), rounds=3, eval_every=1))
    (output / 'config.json').write_text(record)
    # The checkpoint after round 1 has done rounds 0 and 1: a file without round 0's row
    # (cut, lost or replaced) would end the run with a gap no reader sees.
    header, round_0, round_1 = rows.splitlines(keepends=True)[:3]
    (output / 'metrics.csv').write_text(header + round_1)
    with self.assertRaisesRegex(
        config_lib.ConfigError, r'metrics.csv has no row of round\(s\) 0, which the checkpoint '
        r'to resume from has done \(rounds 0-1\)'):
      _run(_config(output, algorithms=('fedavg',), rounds=3, eval_every=1))
    (output / 'metrics.csv').unlink()
    with self.assertRaisesRegex(config_lib.ConfigError, 'metrics.csv is missing'):
      _run(_config(output, algorithms=('fedavg',), rounds=3, eval_every=1))
    (output / 'metrics.csv').write_text(header + round_0 + round_1)
    summary, _ = _run(_config(output, algorithms=('fedavg',), rounds=3, eval_every=1))
    self.assertEqual(summary['rounds'], 3)
    self.assertEqual(
        [row.split(',')[0] for row in (output / 'metrics.csv').read_text().splitlines()[1:]],
        ['0', '1', '2', '3'])

  def test_a_directory_in_use_by_another_run_is_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'in_use'
    output.mkdir()
    with runner.exclusive_output_dir(str(output)):  # Another open file: as another process.
      with self.assertRaisesRegex(config_lib.ConfigError,
                                  rf'in use by another run \(pid {os.getpid()}\)'):
        _run(_config(output, algorithms=('fedavg',), rounds=1))
      self.assertEqual(sorted(p.name for p in output.iterdir()), ['.lock'])  # Nothing written.
    summary, _ = _run(_config(output, algorithms=('fedavg',), rounds=1))  # Released.
    self.assertEqual(summary['rounds'], 1)
    self.assertFalse((output / '.lock').exists())  # Removed when the run ended.

  def test_a_directory_of_something_else_is_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'foreign'
    output.mkdir()
    (output / 'notes.txt').write_text('mine')
    with self.assertRaisesRegex(config_lib.ConfigError, r'is not empty \(notes.txt\) and '
                                'holds no run of this project'):
      _run(_config(output, algorithms=('fedavg',), rounds=1))
    self.assertEqual(sorted(p.name for p in output.iterdir()), ['notes.txt'])  # No .lock left.

  def test_a_file_where_a_run_keeps_a_folder_is_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'file_for_folder'
    output.mkdir()
    (output / 'client_states').write_text('x')
    with self.assertRaisesRegex(config_lib.ConfigError, 'client_states is not a folder'):
      _run(_config(output, algorithms=('ec',), rounds=1, client_state_storage='disk'))

  def test_no_file_is_written_through_a_link(self):
    base = pathlib.Path(self.get_temp_dir())
    victim = base / 'victim.txt'
    victim.write_text('mine')
    for name in ('.lock', '.write_probe', 'summary.json', 'checkpoints'):
      output = base / f'links_{name}'
      output.mkdir()
      (output / name).symlink_to(victim)
      with self.assertRaisesRegex(config_lib.ConfigError, f'{name} is a symbolic link'):
        _run(_config(output, algorithms=('fedavg',), rounds=1))
    self.assertEqual(victim.read_text(), 'mine')
    (base / 'linked_dir').symlink_to(base / 'links_.lock', target_is_directory=True)
    with self.assertRaisesRegex(config_lib.ConfigError, 'linked_dir is a symbolic link'):
      _run(_config(base / 'linked_dir', algorithms=('fedavg',), rounds=1))
    (base / 'linked_dir').unlink()  # TF's removal of the test's folder fails on it.

  def test_a_pipe_in_the_output_directory_is_refused(self):
    # Was: reading config.json (or TFF's reader of metrics.csv) waited on the pipe forever.
    base = pathlib.Path(self.get_temp_dir())
    for name in ('config.json', 'metrics.csv', '.lock', 'checkpoints/program_state_1'):
      output = base / f'pipe_{name.replace("/", "_")}'
      (output / name).parent.mkdir(parents=True)
      os.mkfifo(output / name)
      with self.assertRaisesRegex(
          config_lib.ConfigError, f'{name} is a pipe, a socket or a '
          'device: a run reads and writes only files'):
        _run(_config(output, algorithms=('fedavg',), rounds=1))

  def test_a_run_stopped_before_its_first_checkpoint_starts_again(self):
    output = pathlib.Path(self.get_temp_dir()) / 'early'
    whole, _ = _run(_config(output, algorithms=('ec',), rounds=2))
    # As a run stopped during its first rounds leaves it: rows, no checkpoint, no summary.
    shutil.rmtree(output / 'checkpoints')
    (output / 'summary.json').unlink()
    again, lines = _run(_config(output, algorithms=('ec',), rounds=2))
    self.assertIn('No checkpoint yet (stopped before the first): starting again from round 0.',
                  lines)
    self.assertAllClose(again['final_eval']['ec'], whole['final_eval']['ec'], rtol=1e-6)
    with open(output / 'metrics.csv', newline='') as f:
      self.assertEqual([int(r['round']) for r in csv.DictReader(f)], [0, 1, 2])
    # Finished, without checkpoints (as committed): starting again would write over it.
    shutil.rmtree(output / 'checkpoints')
    with self.assertRaisesRegex(config_lib.ConfigError, 'holds a finished run but no '
                                'checkpoint'):
      _run(_config(output, algorithms=('ec',), rounds=3))

  def test_a_resume_on_other_data_is_refused_and_a_moved_file_is_not(self):
    base = pathlib.Path(self.get_temp_dir())

    def mnist_like(path, seed):
      rng = np.random.default_rng(seed)
      np.savez(path,
               x_train=rng.integers(0, 255, (100, 28, 28), np.uint8),
               y_train=np.arange(100) % 10,
               x_test=rng.integers(0, 255, (20, 28, 28), np.uint8),
               y_test=np.arange(20) % 10)

    data = base / 'mnist.npz'
    mnist_like(data, 0)
    output = base / 'data_run'
    settings = dict(task='mnist_logreg',
                    source='npz',
                    algorithms=('fedavg',),
                    clients_per_round=None)
    _run(_config(output, data_path=str(data), rounds=1, **settings))
    recorded = json.loads((output / 'config.json').read_text())['data']
    mnist_like(data, 1)  # Another file at the same path.
    with self.assertRaisesRegex(config_lib.ConfigError, rf'holds a run on other data '
                                rf'\(fingerprint {recorded} then'):
      _run(_config(output, data_path=str(data), rounds=2, **settings))
    mnist_like(base / 'moved.npz', 0)  # The same data elsewhere.
    summary, lines = _run(_config(output, data_path=str(base / 'moved.npz'), rounds=2, **settings))
    self.assertEqual(summary['data'], recorded)
    self.assertTrue(any('data_path' in line for line in lines if 'changed settings' in line))

  def test_a_knob_of_no_algorithm_of_the_run_does_not_block_a_resume(self):
    output = pathlib.Path(self.get_temp_dir()) / 'knob'
    _run(_config(output, algorithms=('ec',), rounds=1, qsgd_levels=8))
    summary, _ = _run(_config(output, algorithms=('ec',), rounds=2))
    self.assertEqual(summary['rounds'], 2)

  def test_client_states_move_to_disk_on_resume_not_back(self):
    base = pathlib.Path(self.get_temp_dir())
    whole, _ = _run(_config(base / 'whole', algorithms=('ec',), rounds=3))
    _run(_config(base / 'moved', algorithms=('ec',), rounds=2))
    moved, lines = _run(
        _config(base / 'moved', algorithms=('ec',), rounds=3, client_state_storage='disk'))
    self.assertIn('Resuming from the checkpoint after round 1.', lines)
    self.assertAllClose(moved['final_eval']['ec'], whole['final_eval']['ec'], rtol=1e-6)
    with self.assertRaisesRegex(config_lib.ConfigError, 'resumes with client_state_storage=disk'):
      _run(_config(base / 'moved', algorithms=('ec',), rounds=4))

  def test_states_kept_by_the_clients_move_between_tff_and_in_process(self):
    # On TFF's runtime the client computations read and write the .tensor files; resumed in
    # process, the driver reads and writes the same files: one run, as in memory.
    base = pathlib.Path(self.get_temp_dir())
    whole, _ = _run(_config(base / 'whole', algorithms=('ec',), rounds=3))
    _run(
        _config(base / 'files',
                algorithms=('ec',),
                rounds=2,
                execution='local',
                client_state_storage='files'))
    states = base / 'files' / 'client_states' / 'ec'
    self.assertNotEmpty(list(states.glob('*/g*_0.tensor')))
    self.assertEmpty(list(states.glob('*/*.npy')))
    resumed, lines = _run(
        _config(base / 'files', algorithms=('ec',), rounds=3, client_state_storage='files'))
    self.assertIn('Resuming from the checkpoint after round 1.', lines)
    self.assertAllClose(resumed['final_eval']['ec'], whole['final_eval']['ec'], rtol=1e-6)
    with self.assertRaisesRegex(config_lib.ConfigError, 'resumes with client_state_storage=files'):
      _run(_config(base / 'files', algorithms=('ec',), rounds=4, client_state_storage='disk'))

  def test_a_model_check_fails_before_anything_is_written(self):
    output = pathlib.Path(self.get_temp_dir()) / 'keep_all'
    # The authors' top-k rule cannot keep 100 % of a 10-entry bias (it needs the 12th largest).
    with self.assertRaisesRegex(
        config_lib.ConfigError, r"flare: keep_percent=100.0 is too "
        r"large for .* the largest keep_percent this model takes is"):
      _run(_config(output, keep_percent=100.0))
    self.assertFalse((output / 'config.json').exists())
    summary, _ = _run(_config(output, keep_percent=50.0, rounds=1))  # The fixed retry runs.
    self.assertEqual(summary['config']['keep_percent'], 50.0)

  def test_a_model_that_evaluates_non_finite_stops_the_run(self):
    # The clients' updates are finite; the model they make evaluates to NaN.
    config = _config(pathlib.Path(self.get_temp_dir()) / 'huge',
                     algorithms=('fedavg',),
                     learning_rate=1e38,
                     rounds=1)
    with self.assertRaisesRegex(hooks.NonFiniteEvaluationError,
                                r'The model of fedavg after 1 rounds evaluates to test loss nan'):
      _run(config)
    self.assertFalse((pathlib.Path(config.output_dir) / 'summary.json').exists())


class HyperparametersReachTheBuildersTest(tf.test.TestCase):
  """Each registered builder receives what the configuration names (config -> runner ->
  registry -> builder), with values no default has, so a dropped or swapped one fails."""

  # Values no knob has by default, for the knobs there are (a new knob keeps its default).
  VALUES = dict(keep_percent=0.37,
                tau=0.123,
                tau_decay=1.7,
                mask_percentile=33.0,
                reg_steps=2,
                local_epochs=3,
                keep_probability=0.6,
                num_mask_draws=2,
                tff_fedprox_strength=0.02,
                qsgd_levels=3,
                topk_rule='global')
  # Builder keywords named otherwise than their knob, and what rows fix themselves.
  RENAMED = dict(tff_fedprox_strength='proximal_strength')
  FIXED = dict(ef21=dict(total_clients=7),
               ef21_dense=dict(dense_state_shortcut=True),
               mask_none=dict(mask_mode='none', seed=5),
               mask_independent=dict(mask_mode='independent'),
               mask_synchronized=dict(mask_mode='synchronized'))

  def test_every_builder_gets_its_hyperparameters(self):
    from tff_flare.algorithms import registry  # pylint: disable=g-import-not-at-top
    values = {k: v for k, v in self.VALUES.items() if k in registry.KNOB_NAMES}
    config = _config(self.get_temp_dir(),
                     learning_rate=0.07,
                     momentum=0.5,
                     seed=5,
                     num_clients=7,
                     clients_per_round=3,
                     **values)
    task = runner.build_task(config)
    hparams = runner.hyperparameters(config, task)
    # Every builder of every algorithm module, recorded instead of run.
    builders = {}
    modules = {
        getattr(registry, n)
        for n in dir(registry)
        if isinstance(getattr(registry, n), types.ModuleType)
    }
    for module in modules:
      for attribute in dir(module):
        if attribute.startswith('build_'):
          builders[(module.__name__, attribute)] = mock.patch.object(module, attribute)
    for name in registry.NAMES:
      mocks = {key: patcher.start() for key, patcher in builders.items()}
      try:
        registry.build(name, task.model_fn, hparams)
      finally:
        for patcher in builders.values():
          patcher.stop()
      (called,) = [m for m in mocks.values() if m.called]
      kwargs = called.call_args.kwargs
      for field in dataclasses.fields(registry.ALGORITHMS[name].params):
        keyword = self.RENAMED.get(field.name, field.name)
        self.assertEqual(kwargs[keyword], getattr(config, field.name), msg=f'{name}: {keyword}')
      for keyword, value in self.FIXED.get(name, {}).items():
        self.assertEqual(kwargs[keyword], value, msg=f'{name}: {keyword}')
      optimizer = kwargs['client_optimizer']
      self.assertEqual((optimizer._lr, optimizer._momentum), (0.07, 0.5), msg=name)  # pylint: disable=protected-access


class ModelAggregatorRunTest(tf.test.TestCase):

  def test_the_configured_factory_and_norm_reach_the_hyperparameters(self):
    config = _config(self.get_temp_dir(),
                     algorithms=('ec',),
                     model_aggregator='clipping',
                     aggregator_norm=0.25)
    with mock.patch.object(runner.model_aggregators, 'build') as build:
      hparams = runner.hyperparameters(config, runner.build_task(config))
    build.assert_called_once_with('clipping', 0.25)
    self.assertIs(hparams.context.model_aggregator, build.return_value)

  def test_a_stateful_factory_runs_and_resumes_from_its_checkpointed_state(self):
    # TFF's robust aggregator estimates its norms from the clients: server state.
    base = pathlib.Path(self.get_temp_dir())
    algorithms = ('ec',)
    straight, _ = _run(
        _config(base / 'straight',
                algorithms=algorithms,
                rounds=2,
                eval_every=1,
                model_aggregator='robust'))
    # A TFF factory cannot run in-process: TFF's local runtime runs these rounds.
    self.assertEqual(
        set(straight['where'].values()), {
            "TFF's local runtime (TFF's own algorithm, or a TFF aggregation factory: it cannot "
            'run in-process)'
        })
    with open(base / 'straight' / 'metrics.csv') as f:
      header = f.readline().strip().split(',')
      row = dict(zip(header, f.readlines()[0].strip().split(',')))  # Round 0's training.
    for name in algorithms:
      measured = [k for k in header if k.startswith(f'{name}/train/aggregator/')]
      self.assertNotEmpty(measured, msg=name)
      self.assertTrue(all(row[k] != '' for k in measured), msg=name)
    _run(
        _config(base / 'resumed',
                algorithms=algorithms,
                rounds=1,
                eval_every=1,
                model_aggregator='robust'))
    resumed, _ = _run(
        _config(base / 'resumed',
                algorithms=algorithms,
                rounds=2,
                eval_every=1,
                model_aggregator='robust'))
    self.assertEqual(straight['final_eval'], resumed['final_eval'])
    with self.assertRaisesRegex(config_lib.ConfigError, 'model_aggregator: .robust. then, '
                                '.tff_mean. now'):
      _run(_config(base / 'resumed', algorithms=algorithms, rounds=4, model_aggregator='tff_mean'))


class MaskingExperimentTest(tf.test.TestCase):

  def test_mask_processes_side_by_side_with_fedavg(self):
    output = pathlib.Path(self.get_temp_dir()) / 'minibatch_iid'
    config = _config(output,
                     algorithms=('fedavg', 'mask_none', 'mask_independent', 'mask_synchronized'),
                     rounds=2,
                     eval_every=1,
                     clients_per_round=4,
                     keep_probability=0.5,
                     num_mask_draws=8)
    summary, _ = _run(config)
    final = summary['final_eval']
    # No mask is FedAvg exactly; masks change the model.
    self.assertEqual(final['mask_none'], final['fedavg'])
    self.assertNotEqual(final['mask_independent'], final['fedavg'])
    self.assertNotEqual(final['mask_synchronized'], final['mask_independent'])
    with open(output / 'metrics.csv') as f:
      header = f.readline().strip().split(',')
      row = dict(zip(header, f.readlines()[1].strip().split(',')))
    for name in ('mask_none', 'mask_independent', 'mask_synchronized'):
      self.assertEqual(float(row[f'{name}/train/aggregator/survival/s_max']),
                       4.0)  # Uniform, K = 4.
      # The variances measured on 8 fresh mask draws agree with the closed form within
      # their sampling error (the CSV carries both, through the whole run).
      for mode in ('ind', 'sync'):
        closed = float(row[f'{name}/train/aggregator/survival/r_{mode}'])
        measured = float(row[f'{name}/train/aggregator/survival/r_{mode}_empirical'])
        stderr = float(row[f'{name}/train/aggregator/survival/r_{mode}_empirical_stderr'])
        self.assertLess(abs(measured - closed), 6 * stderr + 1e-12, msg=f'{name} {mode}')
    self.assertNotIn('fedavg/train/aggregator/survival/survival', row)
    self.assertEqual(summary['where'], {name: 'in-process' for name in final})
    self.assertTrue(np.isfinite(final['fedavg']['loss']))


class MemoryTest(tf.test.TestCase):

  def test_simulate_refuses_a_run_that_would_not_fit(self):
    output = pathlib.Path(self.get_temp_dir()) / 'simulated'
    datasets = {f'client_{i}': tiny_models.classification_dataset(i) for i in range(3)}
    with self.assertRaisesRegex(config_lib.ConfigError,
                                r'more than the 0\.1 GiB it may use; it would not finish'):
      runner.simulate({'flare': tiny_models.tiny_process('flare')},
                      datasets,
                      output_dir=str(output),
                      rounds=1,
                      memory_budget_gib=0.1,
                      log=lambda line: None)
    self.assertFalse((output / 'config.json').exists())


class SimulateResumeTest(tf.test.TestCase):
  """`simulate` records what it ran and resumes only that (issue 42's silent wrong results)."""

  def _process(self,
               keep_percent=5.0,
               learning_rate=0.1,
               builder='build_flare',
               model_fn=tiny_models.SOFTMAX_MODEL_FN,
               topk_rule='authors'):
    import tff_flare  # pylint: disable=g-import-not-at-top
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    optimizer = tff.learning.optimizers.build_sgdm(learning_rate)
    if builder == 'build_ec':
      return tff_flare.build_ec(model_fn, client_optimizer=optimizer, keep_percent=keep_percent)
    return tff_flare.build_flare(model_fn,
                                 client_optimizer=optimizer,
                                 keep_percent=keep_percent,
                                 topk_rule=topk_rule)

  def _simulate(self, output, processes, data, rounds, test_seed=9, log=None, **settings):
    lines = []
    result = runner.simulate(processes,
                             data,
                             output_dir=None if output is None else str(output),
                             rounds=rounds,
                             checkpoint_every=1,
                             eval_every=1,
                             test_data=tiny_models.classification_dataset(test_seed),
                             client_threads=1,
                             log=log or lines.append,
                             **dict(dict(clients_per_round=2, seed=3), **settings))
    return result, lines

  def test_a_resume_that_would_change_the_results_is_refused(self):
    output = pathlib.Path(self.get_temp_dir()) / 'refused'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    self._simulate(output, {'flare': self._process()}, data, 1)
    recorded = json.loads((output / 'config.json').read_text())
    self.assertEqual(recorded['clients'], ['c0', 'c1', 'c2'])
    self.assertEqual(recorded['processes']['flare']['arguments']['keep_percent'], 5.0)
    other_data = dict(data, c2=tiny_models.classification_dataset(7))
    for processes, client_data, test_seed, message in (({
        'flare': self._process(keep_percent=20.0)
    }, data, 9, r"'flare' was built otherwise \(keep_percent: 5.0 then, 20.0 now\)"), ({
        'flare': self._process(learning_rate=0.5)
    }, data, 9, r"built otherwise \(client_optimizer: .*'_lr': 0.1.* then, .*'_lr': 0.5"), ({
        'flare': self._process(builder='build_ec')
    }, data, 9, r"'flare' was built by build_flare; it is now build_ec's"), ({
        'flare': self._process()
    }, other_data, 9, r'on other data \(fingerprint'), ({
        'flare': self._process()
    }, dict(data,
            c3=data['c0']), 9, r"of 3 clients; these are 4 \(1 new, e.g. \['c3'\]; 0 gone"), ({
                'flare': self._process()
            }, {('d0' if k == 'c0' else k): v for k, v in data.items()
               }, 9, r"1 new, e.g. \['d0'\]; 1 gone, e.g. \['c0'\]"), ({
                   'flare': self._process()
               }, data, 8, r'on other test data')):
      with self.assertRaisesRegex(config_lib.ConfigError, message):
        self._simulate(output, processes, client_data, 2, test_seed=test_seed)
    self.assertEqual(checkpoints_rounds(output), [1])

  def test_a_run_recorded_with_the_retired_rule_argument_resumes(self):
    output = pathlib.Path(self.get_temp_dir()) / 'retired'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    self._simulate(output, {'flare': self._process()}, data, 1)
    path = output / 'config.json'
    recorded = json.loads(path.read_text())
    arguments = recorded['processes']['flare']['arguments']
    self.assertEqual(arguments.pop('topk_rule'), 'authors')
    arguments['rule'] = 'TopKRule.AUTHORS'  # As builders recorded it before the knob.
    path.write_text(json.dumps(recorded))
    self._simulate(output, {'flare': self._process()}, data, 2)
    self.assertEqual(checkpoints_rounds(output)[-1], 2)
    arguments = json.loads(path.read_text())['processes']['flare']['arguments']
    arguments.pop('topk_rule', None)
    arguments['rule'] = 'TopKRule.EXACT'
    recorded = json.loads(path.read_text())
    recorded['processes']['flare']['arguments'] = arguments
    path.write_text(json.dumps(recorded))
    with self.assertRaisesRegex(config_lib.ConfigError, "topk_rule: 'exact' then, 'authors' now"):
      self._simulate(output, {'flare': self._process()}, data, 3)

  def test_a_rule_given_as_enum_or_value_is_one_build(self):
    from tff_flare.algorithms import sparsification  # pylint: disable=g-import-not-at-top
    output = pathlib.Path(self.get_temp_dir()) / 'rule_forms'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    self._simulate(output, {'flare': self._process(topk_rule=sparsification.TopKRule.GLOBAL)}, data,
                   1)
    self._simulate(output, {'flare': self._process(topk_rule='global')}, data, 2)
    self.assertEqual(checkpoints_rounds(output)[-1], 2)
    with self.assertRaisesRegex(config_lib.ConfigError, "topk_rule: 'global' then, 'exact' now"):
      self._simulate(output, {'flare': self._process(topk_rule='exact')}, data, 3)

  def test_a_binarys_run_is_not_resumed_by_simulate(self):
    output = pathlib.Path(self.get_temp_dir()) / 'binary'
    _run(_config(output, algorithms=('flare',), rounds=1))
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    with self.assertRaisesRegex(
        config_lib.ConfigError, "holds a run of the experiment "
        "binaries \\(task 'digits_demo'\\), not of simulate"):
      self._simulate(output, {'flare': self._process()}, data, 2)

  def test_clients_in_another_order_resume_by_id(self):
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(4)}
    whole = pathlib.Path(self.get_temp_dir()) / 'whole'
    expected, _ = self._simulate(whole, {'flare': self._process()}, data, 3)
    pieces = pathlib.Path(self.get_temp_dir()) / 'pieces'
    self._simulate(pieces, {'flare': self._process()}, data, 1)
    reversed_data = dict(reversed(list(data.items())))
    resumed, lines = self._simulate(pieces, {'flare': self._process()}, reversed_data, 3)
    self.assertTrue(any('another order' in line for line in lines))
    self.assertEqual(resumed.summary['final_eval'], expected.summary['final_eval'])
    # The returned model is the run's: equal to the uninterrupted run's, array for array.
    for got, want in zip(resumed.model_weights['flare'].trainable,
                         expected.model_weights['flare'].trainable):
      self.assertIsInstance(got, np.ndarray)
      np.testing.assert_array_equal(got, want)

  def test_the_signature_lists_every_run_setting_with_its_default(self):
    parameters = inspect.signature(runner.simulate).parameters
    for field in dataclasses.fields(config_lib.RunSettings):
      self.assertIn(field.name, parameters)
      self.assertEqual(parameters[field.name].default, field.default, msg=field.name)
    self.assertNotIn('settings', parameters)
    self.assertEqual(parameters['hooks'].default, ())
    self.assertEqual(parameters['release_managers'].default, ())

  def test_a_run_in_memory_writes_nothing_and_equals_a_run_on_disk(self):
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    on_disk, _ = self._simulate(
        pathlib.Path(self.get_temp_dir()) / 'disk', {'flare': self._process()}, data, 2)
    here = pathlib.Path(self.get_temp_dir()) / 'cwd'
    here.mkdir()
    previous = os.getcwd()
    os.chdir(here)
    self.addCleanup(os.chdir, previous)
    flare = self._process()
    in_memory, lines = self._simulate(None, {'flare': flare}, data, 2)
    self.assertEqual(list(here.iterdir()), [])
    self.assertEqual(in_memory.summary['final_eval'], on_disk.summary['final_eval'])
    for got, want in zip(in_memory.model_weights['flare'].trainable,
                         on_disk.model_weights['flare'].trainable):
      np.testing.assert_array_equal(got, want)
    # The server state returned is the run's: its model is the model returned.
    for got, want in zip(
        flare.get_model_weights(in_memory.states['flare']).trainable,
        in_memory.model_weights['flare'].trainable):
      np.testing.assert_array_equal(got, want)
    self.assertTrue(any(line.startswith('round 1 ') for line in lines))
    with self.assertRaisesRegex(
        config_lib.ConfigError, "client_state_storage 'disk' keeps the "
        'client states under output_dir'):
      self._simulate(None, {'flare': flare}, data, 2, client_state_storage='disk')
    with self.assertRaisesRegex(
        config_lib.ConfigError, "output_dir must name a directory, or "
        "be None \\(a run in memory\\), got ''"):
      runner.simulate({'flare': flare}, data, output_dir='')
    self.assertEqual(list(here.iterdir()), [])

  def test_a_hook_ends_the_run_early_and_the_run_resumes_to_the_same_model(self):
    import tff_flare  # pylint: disable=g-import-not-at-top
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    whole, _ = self._simulate(
        pathlib.Path(self.get_temp_dir()) / 'whole', {'flare': self._process()}, data, 4)

    class StopAfterRound1(tff_flare.Hook):

      def __init__(self):
        self.accuracies = []

      def after_round(self, round_num, runs, row):
        self.accuracies.append(row['flare'].eval['accuracy'])
        return round_num == 1

    output = pathlib.Path(self.get_temp_dir()) / 'early'
    stop, released = StopAfterRound1(), tff.program.MemoryReleaseManager()
    early, _ = self._simulate(output, {'flare': self._process()},
                              data,
                              4,
                              hooks=[stop],
                              release_managers=[released])
    self.assertEqual(early.summary['rounds_trained'], 2)
    self.assertEqual(checkpoints_rounds(output), [1, 2])  # The early end is checkpointed.
    self.assertLen(stop.accuracies, 2)
    rows = dict(released.values())
    self.assertEqual(sorted(rows), [0, 1, 2])  # Two rounds and the end of the run.
    self.assertEqual(rows[2]['flare']['eval'], early.summary['final_eval']['flare'])
    resumed, _ = self._simulate(output, {'flare': self._process()}, data, 4)
    self.assertEqual(resumed.summary['rounds_trained'], 4)
    self.assertEqual(resumed.summary['final_eval'], whole.summary['final_eval'])
    for got, want in zip(resumed.model_weights['flare'].trainable,
                         whole.model_weights['flare'].trainable):
      np.testing.assert_array_equal(got, want)

  def test_the_result_holds_each_process_model(self):
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    output = pathlib.Path(self.get_temp_dir()) / 'result'
    flare = self._process()
    result, _ = self._simulate(output, {
        'flare': flare,
        'ec': self._process(builder='build_ec')
    }, data, 2)
    self.assertEqual(set(result.model_weights), {'flare', 'ec'})
    self.assertFalse(
        np.array_equal(result.model_weights['flare'].trainable[0],
                       result.model_weights['ec'].trainable[0]))
    # The weights go into a Keras model built as the model_fn builds it, and it predicts
    # what the final evaluation measured.
    keras_model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(3)])
    result.model_weights['flare'].assign_weights_to(keras_model)
    test = tiny_models.classification_dataset(9)
    x = np.concatenate([b['x'] for b in test.as_numpy_iterator()])
    y = np.concatenate([b['y'] for b in test.as_numpy_iterator()]).ravel()
    accuracy = np.mean(np.argmax(keras_model.predict(x, verbose=0), axis=1) == y)
    self.assertAllClose(accuracy, result.summary['final_eval']['flare']['accuracy'])
    # Run again on a finished run: the same model, nothing trained.
    again, _ = self._simulate(output, {
        'flare': self._process(),
        'ec': self._process(builder='build_ec')
    }, data, 2)
    for got, want in zip(again.model_weights['ec'].trainable, result.model_weights['ec'].trainable):
      np.testing.assert_array_equal(got, want)

  def test_numpy_numbers_are_numbers(self):
    # A notebook's np.int64 (from np.arange) and np.float32: were "eval_every must be an int
    # >= 1, got 1".
    output = pathlib.Path(self.get_temp_dir()) / 'numpy'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    process = self._process(keep_percent=np.float32(5.0))
    kept = process.build['arguments']['keep_percent']  # Recorded as a number, for a resume.
    self.assertEqual((type(kept), kept), (float, 5.0))
    result, _ = self._simulate(output, {'flare': process},
                               data,
                               np.int64(2),
                               seed=np.int64(3),
                               clients_per_round=np.int32(2))
    recorded = result.summary['config']  # As config.json and summary.json hold it.
    self.assertEqual((recorded['rounds'], recorded['clients_per_round'], recorded['seed']),
                     (2, 2, 3))
    self.assertEqual(json.loads((output / 'summary.json').read_text())['config'], recorded)
    self.assertEqual(result.summary['rounds_trained'], 2)

    # The worker's error says what happened to it; the run adds whether and where it resumes
    # (a run in memory has nothing to resume; the worker cannot know which).
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    for output, advice in (
        (None, r'The run was in memory \(no output directory\): nothing to resume\.$'),
        (pathlib.Path(self.get_temp_dir()) / 'dead_worker',
         r'Started again on the same output directory, the run resumes from its checkpoint '
         r'after round 0\.$')):
      others = set(cleanup.local_worker_pids())  # Only the run's own worker is killed.

      def kill_after_round_0(line, others=others):
        if line.startswith('round 0 '):
          for pid in set(cleanup.local_worker_pids()) - others:
            os.kill(pid, signal.SIGKILL)

      with self.assertRaisesRegex(
          remote.WorkerUnavailableError,
          r"TFF's local worker killed by signal 9 during a round \(UNAVAILABLE\)\. " + advice):
        self._simulate(output, {'flare': self._process()},
                       data,
                       3,
                       log=kill_after_round_0,
                       execution='local')

  def test_a_ctrl_c_that_tensorflow_swallows_still_stops_the_run(self):
    # Python's own SIGINT handler, as in a terminal or a notebook (a shell's background job
    # starts with SIGINT ignored, and then simulate leaves it so).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    self.addCleanup(signal.signal, signal.SIGINT, previous)
    output = pathlib.Path(self.get_temp_dir()) / 'interrupted'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}

    def log(line):
      if line.startswith('round 0 '):
        try:  # As TF's _xla_gc_callback does: the KeyboardInterrupt is raised and ignored.
          signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
          pass

    with self.assertRaisesRegex(
        KeyboardInterrupt, 'Interrupted at round 1; called again, the '
        'run resumes from its checkpoint after round 0'):
      self._simulate(output, {'flare': self._process()}, data, 4, log=log)
    self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)
    self.assertEqual(checkpoints_rounds(output), [1])
    result, lines = self._simulate(output, {'flare': self._process()}, data, 4)
    self.assertEqual(result.summary['rounds'], 4)
    self.assertTrue(any('Resuming from the checkpoint after round 0' in l for l in lines))

  def test_labels_the_model_has_no_class_for_are_one_line(self):
    # Was: TF's InvalidArgumentError with the node's 40-line traceback, in the first round.
    data = {
        f'c{i}': tiny_models.dataset_from_arrays(np.ones((8, 4), np.float32),
                                                 np.full((8, 1), 7, np.int32), 4) for i in range(3)
    }
    with self.assertRaisesRegex(
        config_lib.ConfigError, r'^The model cannot run on the data '
        r'\(round 0\): Received a label value of 7 which is outside '
        r'the valid range of \[0, 3\)\.  Label values: 7 7 7 7$'):
      self._simulate(None, {'flare': self._process()}, data, 2)

  def test_what_tff_runtime_says_of_a_failed_op_is_its_line(self):
    # What TFF's local runtime raised for the labels above (its gRPC error, cut).
    details = ('Failed to run computation: Received a label value of 7 which is outside the '
               'valid range of [0, 3).  Label values: 7 7 7 7\n\t [[{{function_node '
               '__forward_forward_pass_633}}{{node sparse_categorical_crossentropy/Sparse'
               'SoftmaxCrossEntropyWithLogits}}]] while evaluating local [_oqv16] in block')

    class Failed(grpc.RpcError, grpc.Call):  # pylint: disable=abstract-method

      def __init__(self, code):
        self._code = code

      def code(self):
        return self._code

      def details(self):
        return details

    for method in ('initial_metadata', 'trailing_metadata', 'is_active', 'time_remaining', 'cancel',
                   'add_callback'):
      setattr(Failed, method, lambda self, *_: None)
    Failed.__abstractmethods__ = frozenset()
    self.assertEqual(
        runner.what_tf_says(Failed(grpc.StatusCode.INTERNAL)),
        'Received a label value of 7 which is outside the valid range of [0, 3).  '
        'Label values: 7 7 7 7')
    self.assertIsNone(runner.what_tf_says(Failed(grpc.StatusCode.UNAVAILABLE)))
    self.assertIsNone(runner.what_tf_says(ValueError(details)))

  def test_inputs_refused_before_anything_is_written(self):
    output = pathlib.Path(self.get_temp_dir()) / 'never'
    data = {f'c{i}': tiny_models.classification_dataset(i) for i in range(3)}
    nan_x = np.full((8, 4), np.nan, np.float32)
    nan_data = dict(data, c1=tiny_models.dataset_from_arrays(nan_x, np.zeros((8, 1), np.int32), 4))
    inf_once = nan_x.copy()
    inf_once[:] = 1.0
    inf_once[5, 2] = np.inf
    inf_data = dict(data,
                    c2=tiny_models.dataset_from_arrays(inf_once, np.zeros((8, 1), np.int32), 4))
    flare = self._process()
    for processes, client_data, settings, message in (
        # Was: the run trained and said the model had diverged.
        ({
            'flare': flare
        }, nan_data, {}, r"The data of 'c1' hold NaN or infinite values"),
        ({
            'flare': flare
        }, inf_data, {}, r"The data of 'c2' hold NaN or infinite values"),
        ({
            'flare': flare
        }, data, dict(clients_per_round=0), r'clients_per_round \(0\) must be in \[1, 3\]'),
        ({
            'flare': flare
        }, {
            0: data['c0'],
            '0': data['c1']
        }, {}, r"Client ids must be strings .*got 0 \(int\)"),
        ({
            '../../x': flare
        }, data, {}, r"Process name '../../x' must be"),
        ({
            '': flare
        }, data, {}, "Process name '' must be"),
        ({
            'a/b': flare
        }, data, {}, "Process name 'a/b' must be"),
        ({
            5: flare
        }, data, {}, 'Process name 5 must be'),
        ({}, data, {}, r'processes must map names to processes of this project .*got dict '
         r'\(empty\)'),
        ([flare], data, {}, 'processes must map names .*got list'),
        ({
            'fedavg':
                tff.learning.algorithms.build_unweighted_fed_avg(
                    tiny_models.SOFTMAX_MODEL_FN,
                    client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.1))
        }, data, {},
         r"processes\['fedavg'\] is a .*LearningProcess, not a process of this project .*"
         r'tff_flare.build_tff_fedavg'),
        ({
            'flare':
                flare,
            'ec':
                self._process(builder='build_ec',
                              model_fn=tiny_models.softmax_model_fn(num_classes=5))
        }, data, {}, "Processes 'flare' and 'ec' are of different models"),
        ({
            'flare': flare
        }, data, dict(hooks=[print]),
         'hooks must be a list of tff_flare.Hook, got a builtin_function_or_method in it'),
        ({
            'flare': flare
        }, data, dict(release_managers='metrics.csv'),
         'release_managers must be a list of tff.program.ReleaseManager, got str'),
        ({
            'flare': flare
        }, {
            'c0': [1, 2]
        }, {}, r"train_data\['c0'\] must be a batched tf.data.Dataset, got list"),
        ({
            'flare': flare
        }, data, dict(log='stdout'), "log must be a function taking a line .*got str")):
      with self.assertRaisesRegex(config_lib.ConfigError, message):
        self._simulate(output, processes, client_data, 1, **settings)
    self.assertFalse(output.exists())


def checkpoints_rounds(output: pathlib.Path) -> list[int]:
  from tff_flare.simulation import checkpoints  # pylint: disable=g-import-not-at-top
  return checkpoints.saved_rounds(output / 'checkpoints')


if __name__ == '__main__':
  tf.test.main()
