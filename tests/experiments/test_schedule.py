"""Tests of `experiments.schedule`: a two-run figure made from scratch, sharded, resumed."""

import csv
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

import tensorflow as tf

from experiments import report
from experiments import schedule
from experiments import spec
from tff_flare.experiment import run_files
from tff_flare.simulation import files

_FLAGS = dict(task='digits_demo',
              algorithms='fedavg',
              eval_every=1,
              checkpoint_every=1,
              clients_per_round=3)


def _tiny_figure(rounds: int = 2, seeds=(0, 1)) -> spec.Figure:
  return spec.Figure(name='tiny',
                     title='a tiny figure',
                     paper='Ours: a test',
                     reading='Two seeds.',
                     grids=(spec.Grid('seed{seed}', _FLAGS, rounds, dict(seed=seeds)),),
                     draw=(spec.SeedCurves(
                         dict(curves=spec.Group('tiny', ('seed0', 'seed1'), (1, 2)))),),
                     image='curves.png')


def _rounds_in_csv(run_dir: pathlib.Path) -> list[int]:
  with open(run_dir / 'metrics.csv', newline='') as f:
    return [int(row['round']) for row in csv.DictReader(f)]


def _alive(pid: int) -> bool:
  """Whether process `pid` runs (a zombie does not)."""
  try:
    with open(f'/proc/{pid}/stat', 'rb') as f:
      return f.read().rsplit(b')', 1)[1].split()[0] != b'Z'
  except OSError:
    return False


def _repository_state() -> str:
  """The tracked files' changes and the untracked files, as git sees them."""
  return subprocess.run(['git', 'status', '--porcelain', '--untracked-files=all'],
                        cwd=schedule.ROOT,
                        capture_output=True,
                        text=True,
                        check=True).stdout


class ScheduleTest(tf.test.TestCase):

  def test_a_figure_from_scratch_in_pieces_and_shards_into_a_fresh_folder(self):
    before = _repository_state()
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir())) / 'results'
    figure = _tiny_figure()
    pairs = schedule.runs_shown([figure], [figure])
    lines = []
    shard_0 = schedule.shard_runs(pairs, (0, 2))
    self.assertEqual([run.name for _, run in shard_0], ['seed0'])
    self.assertEqual([run.name for _, run in schedule.shard_runs(pairs, (1, 2))], ['seed1'])
    # A piece: shard 0's run, up to round 1 only.
    self.assertEqual(
        schedule.execute(shard_0, results, '', log=lines.append, pin=False, until_round=1), 0)
    self.assertEqual(run_files.rounds_done(results / 'tiny' / 'seed0'), 1)
    self.assertFalse((results / 'tiny' / 'seed1').exists())  # The other shard's.
    # The whole figure: seed0 resumes from its checkpoint, seed1 starts; both at once.
    self.assertEqual(schedule.execute(pairs, results, '', jobs=2, log=lines.append, pin=False), 0)
    for name in ('seed0', 'seed1'):
      self.assertEqual(run_files.rounds_done(results / 'tiny' / name), 2)
      self.assertEqual(_rounds_in_csv(results / 'tiny' / name), [0, 1, 2])  # Each round once.
      config = json.loads((results / 'tiny' / name / 'config.json').read_text())['config']
      self.assertFalse(os.path.isabs(config['output_dir']))  # No absolute path recorded.
    self.assertIn('Resuming from the checkpoint after round 0',
                  (results / 'tiny' / 'seed0' / schedule.LOG_FILE).read_text())
    self.assertIn('2 / 2', schedule.format_list([figure], results))
    # Finished: skipped, no process started.
    lines.clear()
    self.assertEqual(schedule.execute(pairs, results, '', log=lines.append, pin=False), 0)
    self.assertEqual(
        lines,
        ['tiny/seed0: finished (2 rounds), skipped', 'tiny/seed1: finished (2 rounds), skipped'])
    # Another seed in a finished run's directory: refused before anything runs.
    changed = _tiny_figure(seeds=(0, 5))
    changed_pairs = [(changed, dataclasses.replace(changed.runs[1], name='seed1'))]
    with self.assertRaisesRegex(schedule.ReproduceError, r'tiny/seed1 holds a run made with '
                                r'other flags \(seed\)'):
      schedule.execute(changed_pairs, results, '', pin=False)
    # A log that is a pipe: refused before anything runs (was: the append waited forever).
    log_file = results / 'tiny' / 'seed1' / schedule.LOG_FILE
    log_text = log_file.read_text()
    log_file.unlink()
    os.mkfifo(log_file)
    with self.assertRaisesRegex(schedule.ReproduceError, r'seed1/log.txt is a pipe'):
      schedule.execute(pairs, results, '', pin=False)
    log_file.unlink()
    log_file.write_text(log_text)
    # The page: drawn from the runs, written twice in place.
    for _ in range(2):
      page = report.write([figure], [], results, log=lines.append)
    text = page.read_text()
    self.assertEqual(text.count('<a id="tiny">'), 1)
    self.assertIn('![a tiny figure](tiny/curves.png)', text)
    self.assertIn('| [tiny](#tiny) | 2 of 2 | 4 / 4 |', text)
    self.assertTrue((results / 'tiny' / 'curves.md').exists())
    # Links planted in the results folder: the page and figures are not written through them.
    outside = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    (outside / 'victim').write_text('kept')
    (results / 'tiny' / 'curves.md').unlink()
    (results / 'tiny' / 'curves.md').symlink_to(outside / 'victim')
    with self.assertRaisesRegex(files.LinkedPathError, 'curves.md is a symbolic link'):
      report.write([figure], [], results, log=lines.append)
    (results / 'tiny' / 'curves.md').unlink()
    page.unlink()
    page.symlink_to(outside / 'victim')
    with self.assertRaisesRegex(files.LinkedPathError, 'README.md is a symbolic link'):
      report.write([figure], [], results, log=lines.append)
    self.assertEqual((outside / 'victim').read_text(), 'kept')
    page.unlink()
    self.assertEqual(_repository_state(), before)

  def test_an_absolute_data_directory_is_passed_relative(self):
    # A committed run recorded /work/shared/datasets/mnist.npz: a reader has no such path.
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir())) / 'results'
    data = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir())).resolve()
    figure = spec.Figure(name='npz',
                         title='t',
                         paper='Ours: a test',
                         grids=(spec.Grid(
                             'seed0',
                             dict(task='mnist_cnn', source='npz', data_path='{data}/mnist.npz'),
                             1),))
    lines = []
    schedule.execute(schedule.runs_shown([figure], [figure]),
                     results,
                     str(data),
                     log=lines.append,
                     pin=False)  # Fails: there is no mnist.npz there.
    started = next(line for line in lines  # Shell quotes left out (xdist's temp dirs need them).
                   if line.startswith('npz/seed0: ')).replace("'", '')
    self.assertIn(f'--data_path={os.path.relpath(data)}/mnist.npz ', started)
    self.assertNotIn(f'={data}', started)  # No path starts at the root.

  def test_the_data_directory_fills_the_placeholder(self):
    run = spec.Run('r', dict(source='npz', data_path='{data}/mnist.npz'), 3)
    args = schedule.command(run, pathlib.Path('out/r'), '/d/')
    self.assertIn('--data_path=/d/mnist.npz', args)
    self.assertEqual(
        schedule.printable(args).split()[:3], ['python', '-m', 'experiments.run_experiment'])

  def test_a_run_ends_resumable_when_the_scheduler_is_killed(self):
    # SIGKILL (no handler can run): the kernel gives the run SIGINT, as Ctrl-C would.
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    script = textwrap.dedent(f"""
        import pathlib
        from experiments import schedule
        from tests.experiments import test_schedule
        figure = test_schedule._tiny_figure(rounds=100000, seeds=(0,))
        schedule.execute([(figure, figure.runs[0])], pathlib.Path({str(results)!r}), '',
                         pin=False)
        """)
    scheduler = subprocess.Popen([sys.executable, '-c', script],
                                 cwd=schedule.ROOT,
                                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    run_dir = results / 'tiny' / 'seed0'
    deadline = time.monotonic() + 240
    while not (run_dir / 'checkpoints' / 'program_state_2').exists():
      self.assertLess(time.monotonic(), deadline, 'the run did not start')
      time.sleep(0.5)
    pid = int((run_dir / '.lock').read_text())
    scheduler.kill()
    scheduler.wait()
    deadline = time.monotonic() + 60
    while _alive(pid):
      self.assertLess(time.monotonic(), deadline, 'the run outlived its scheduler')
      time.sleep(0.5)
    self.assertIn('Interrupted', (run_dir / 'log.txt').read_text())

  def test_stopping_runs_waits_for_their_round_then_stops_them_at_once(self):
    # A run that ends its round in 0.3 s on Ctrl-C, and one that only a second Ctrl-C ends
    # (a round longer than the wait).
    child = textwrap.dedent("""
        import signal, sys, time
        seen = []
        def on_ctrl_c(signum, frame):
          seen.append(signum)
          if len(seen) == int(sys.argv[1]):
            time.sleep(0.3)
            sys.exit(130)
        signal.signal(signal.SIGINT, on_ctrl_c)
        print('ready', flush=True)
        while True:
          time.sleep(0.05)
        """)
    runs = {}
    for presses in (1, 2):
      process = subprocess.Popen(
          [sys.executable, '-c', child, str(presses)],
          stdout=subprocess.PIPE,
          start_new_session=True)
      self.assertEqual(process.stdout.readline(), b'ready\n')
      process.stdout.close()
      runs[process] = pathlib.Path(self.get_temp_dir()) / f'no_rounds_{presses}'
    original = schedule.STOP_WAIT_S
    schedule.STOP_WAIT_S = 2.0
    self.addCleanup(setattr, schedule, 'STOP_WAIT_S', original)
    start = time.monotonic()
    schedule._stop_runs(runs)  # pylint: disable=protected-access
    self.assertLess(time.monotonic() - start, 10)
    self.assertEqual([p.returncode for p in runs], [130, 130])

  def test_a_failed_run_is_reported(self):
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    figure = _tiny_figure(rounds=1)
    # Valid flags; the run itself refuses its input (its data file is absent).
    bad = dataclasses.replace(figure.runs[0],
                              flags=dict(figure.runs[0].flags,
                                         task='mnist_logreg',
                                         source='npz',
                                         data_path=str(results / 'absent.npz')))
    lines = []
    self.assertEqual(schedule.execute([(figure, bad)], results, '', log=lines.append, pin=False), 2)
    self.assertRegex(lines[-1], r'Data file .*absent\.npz does not exist')

  def test_a_bad_value_of_any_run_is_refused_before_the_first_starts(self):
    # Was: the first runs ran (hours, for a grid) and the bad one failed when its turn came.
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    figure = _tiny_figure(rounds=1)
    good, second = figure.runs
    for flags, message in ((dict(learning_rate=float('nan')), 'learning_rate must be a finite'),
                           (dict(learning_rate=-1), 'learning_rate must be > 0'),
                           (dict(algorithms='fedavg,masked_fedavg'),
                            r"Unknown algorithms \['masked_fedavg'\]"),
                           (dict(local_epochs=10**11), 'local_epochs must be an int below 2\\^31'),
                           (dict(nope=1), 'Unknown command line flag .nope.'),
                           (dict(clients_per_round=11), r'clients_per_round \(11\) must be in '
                            r'\[1, 10\]')):
      bad = dataclasses.replace(second, flags=dict(second.flags, **flags))
      with self.assertRaisesRegex(schedule.ReproduceError, f'^tiny/seed1: .*{message}'):
        schedule.execute([(figure, good), (figure, bad)], results, '', pin=False)
      self.assertFalse((results / 'tiny').exists(), flags)  # Nothing started, nothing written.
    with self.assertRaisesRegex(schedule.ReproduceError, 'at least one worker'):  # The execution.
      schedule.execute([(figure, good)],
                       results,
                       '',
                       pin=False,
                       execution_args=['--execution=remote'])
    self.assertFalse((results / 'tiny').exists())

  def test_a_crash_is_named_by_its_signal_not_the_fault_handler_last_line(self):
    log = pathlib.Path(self.get_temp_dir()) / 'log.txt'
    log.write_text('round 73 | 0.04 rounds/s\nFatal Python error: Segmentation fault\n\n'
                   'Thread 0x1 (most recent call first):\n  File "x.py", line 1\n\n'
                   'Extension modules: numpy.core._multiarray_umath (total: 1)\n')
    self.assertEqual(schedule.failure(-11, log),
                     'killed by SIGSEGV: Fatal Python error: Segmentation fault')
    self.assertEqual(schedule.failure(-9, log.with_name('absent.txt')), 'killed by SIGKILL')
    self.assertEqual(schedule.failure(1, log),
                     'exit 1: Extension modules: numpy.core._multiarray_umath (total: 1)')

  def test_a_command_record_that_is_not_one_is_refused(self):
    run = _tiny_figure().runs[0]
    run_dir = pathlib.Path(self.get_temp_dir()) / 'seed0'
    run_dir.mkdir()
    for recorded in ('[1, 2]', '"flare"', json.dumps(dict(binary=run.binary, flags=[1]))):
      (run_dir / schedule.COMMAND_FILE).write_text(recorded)
      with self.assertRaisesRegex(schedule.ReproduceError,
                                  r"command.json is not the record of a run's command"):
        schedule.check_recorded_flags(run, run_dir)
    (run_dir / schedule.COMMAND_FILE).write_text(
        json.dumps(dict(binary=run.binary, flags=dict(run.flags))))
    schedule.check_recorded_flags(run, run_dir)

  def test_bad_selections(self):
    with self.assertRaisesRegex(schedule.ReproduceError, 'Unknown figures'):
      schedule.select([_tiny_figure()], ['nope'])
    for text in ('2/2', '1', '-1/3', 'a/b'):
      with self.assertRaisesRegex(schedule.ReproduceError, 'shard'):
        schedule.parse_shard(text)
    self.assertEqual(schedule.parse_shard('1/3'), (1, 3))
    reader = spec.Figure('reader', 'reads', 'Ours', reads=('tiny/absent',))
    with self.assertRaisesRegex(schedule.ReproduceError, 'reads tiny/absent'):
      schedule.runs_shown([reader], [reader, _tiny_figure()])

  def test_costs_measured_and_estimated(self):
    figure = _tiny_figure(rounds=10)
    statuses = [
        schedule.RunStatus(figure, figure.runs[0], 4, 2.0),
        schedule.RunStatus(figure, figure.runs[1], 0, None)
    ]
    costs = schedule.costs(statuses)
    self.assertEqual(costs[('tiny', 'seed0')], schedule.Cost(20.0, 12.0, True))
    self.assertEqual(costs[('tiny', 'seed1')], schedule.Cost(20.0, 20.0, False))
    statuses[0].peak_gib = 1.5  # A measured peak stands for its kind too.
    costs = schedule.costs(statuses)
    self.assertEqual(costs[('tiny', 'seed0')], schedule.Cost(20.0, 12.0, True, 1.5, True))
    self.assertEqual(costs[('tiny', 'seed1')], schedule.Cost(20.0, 20.0, False, 1.5, False))

  def test_recorded_peaks_and_logged_estimates_that_are_not_numbers_are_unknown(self):
    run_dir = pathlib.Path(self.get_temp_dir()) / 'peaks'
    run_dir.mkdir()
    for value, expected in ((1.5, 1.5), (True, None), ('2', None), (float('inf'), None), (-1, None),
                            (None, None)):
      (run_dir / 'summary.json').write_text(json.dumps(dict(memory=dict(peak_gib=value))))
      self.assertEqual(run_files.peak_gib(run_dir), expected, value)
    log = run_dir / 'log.txt'
    log.write_text('Memory: estimated peak 1.2.3 GiB\n')
    self.assertIsNone(schedule._logged_estimate(log, 0))  # pylint: disable=protected-access
    log.write_text('old\nMemory: estimated peak 2.5 GiB (base 0.4)\n')
    self.assertEqual(schedule._logged_estimate(log, 4), int(2.5 * 2**30))  # pylint: disable=protected-access

  def test_runs_that_do_not_fit_together_run_one_after_the_other(self):
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    figure = _tiny_figure(rounds=1)
    pairs = schedule.runs_shown([figure], [figure])
    lines = []
    # The first run's estimate (TensorFlow alone holds about 0.4 GiB, the digits' MLP next to
    # nothing) leaves the second too little beside it.
    self.assertEqual(
        schedule.execute(pairs,
                         results,
                         '',
                         jobs=2,
                         log=lines.append,
                         pin=False,
                         memory_budget_gib=0.6), 0, lines)
    # It started beside the first and refused itself, or was not started (too little left):
    # either way it ran alone after the first.
    starts = [i for i, line in enumerate(lines) if line.startswith('tiny/seed1: python')]
    self.assertGreater(starts[-1], lines.index('tiny/seed0: finished'), lines)
    self.assertNotIn('--memory_budget_gib', lines[starts[-1]])
    if len(starts) > 1:
      self.assertIn('tiny/seed1: would not fit beside the runs going on; it waits to run '
                    'alone', lines)
    self.assertEqual([line.endswith('finished') for line in lines].count(True), 2, lines)
    for run in figure.runs:
      self.assertEqual(run_files.rounds_done(results / 'tiny' / run.name), 1)
      self.assertGreater(run_files.peak_gib(results / 'tiny' / run.name), 0.2)
    listed = schedule.format_list([figure], results)
    self.assertRegex(listed, r'seed0 .* peak [\d.]+ GiB')


if __name__ == '__main__':
  tf.test.main()
