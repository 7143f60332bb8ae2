"""Tests of `experiments.figures`: a tiny figure (2 runs of 2 rounds) run, sharded, resumed."""

import csv
import dataclasses
import json
import pathlib

import tensorflow as tf

from experiments import figures


def _tiny_figure(rounds: int = 2, seed_of_second: int = 1) -> figures.Figure:
  def summarize(figure, folder):
    finals = []
    for run in figure.runs:
      summary = json.loads((folder / run.name / 'summary.json').read_text())
      finals.append(f'{run.name}: {summary["final_eval"]["fedavg"]["accuracy"]:.4f}')
    (folder / 'table.md').write_text('\n'.join(finals) + '\n')
    return '### tiny\n\n' + '\n'.join(finals)

  flags = dict(task='digits_demo', algorithms='fedavg', eval_every=1, checkpoint_every=1,
               clients_per_round=3)
  return figures.Figure(
      name='tiny', title='a tiny figure', summarize=summarize,
      runs=(figures.Run('seed0', dict(flags, seed=0), rounds=rounds),
            figures.Run('seed1', dict(flags, seed=seed_of_second), rounds=rounds)))


def _rounds_in_csv(run_dir: pathlib.Path) -> list[int]:
  with open(run_dir / 'metrics.csv', newline='') as f:
    return [int(row['round']) for row in csv.DictReader(f)]


class FiguresTest(tf.test.TestCase):

  def test_rounds_done_is_the_later_of_summary_and_checkpoint(self):
    run_dir = pathlib.Path(self.get_temp_dir()) / 'run'
    self.assertEqual(figures.rounds_done(run_dir), 0)
    run_dir.mkdir()
    (run_dir / 'summary.json').write_text(json.dumps({'rounds': 100}))  # The first piece.
    self.assertEqual(figures.rounds_done(run_dir), 100)
    (run_dir / 'checkpoints' / 'program_state_270').mkdir(parents=True)  # A later piece.
    self.assertEqual(figures.rounds_done(run_dir), 270)
    (run_dir / 'summary.json').write_text(json.dumps({'rounds': 300}))  # Finished.
    self.assertEqual(figures.rounds_done(run_dir), 300)

  def test_shard_resume_skip_refuse_and_summarize(self):
    root = pathlib.Path(self.get_temp_dir())
    lines = []
    figure = _tiny_figure(rounds=2)
    shard_0 = figures.shard_runs([figure], (0, 2))
    self.assertEqual([run.name for _, run in shard_0], ['seed0'])
    self.assertEqual([run.name for _, run in figures.shard_runs([figure], (1, 2))],
                     ['seed1'])
    # A piece: shard 0's run, up to round 1 only.
    self.assertEqual(figures.execute(shard_0, root=root, log=lines.append, pin=False,
                                     until_round=1), 0)
    folder = figure.folder(root)
    self.assertEqual(figures.rounds_done(folder / 'seed0'), 1)
    self.assertFalse((folder / 'seed1').exists())  # The other shard's.

    # The whole figure: seed0 resumes from its checkpoint, seed1 starts; both at once.
    runs = [(figure, run) for run in figure.runs]
    self.assertEqual(figures.execute(runs, jobs=2, root=root, log=lines.append, pin=False), 0)
    for name in ('seed0', 'seed1'):
      self.assertEqual(figures.rounds_done(folder / name), 2)
      self.assertEqual(_rounds_in_csv(folder / name), [0, 1, 2])  # Each round once.
    self.assertIn('Resuming from the checkpoint after round 0',
                  (folder / 'seed0' / figures.LOG_FILE).read_text())
    config = json.loads((folder / 'seed0' / 'config.json').read_text())['config']
    self.assertEqual(config['output_dir'], 'experiments/results/tiny/seed0')  # Relative.
    self.assertIn('2 / 2', figures.format_list([figure], root))

    # Finished: skipped, no process started.
    lines.clear()
    self.assertEqual(figures.execute(runs, root=root, log=lines.append, pin=False), 0)
    self.assertEqual(lines, ['tiny/seed0: finished (2 rounds), skipped',
                             'tiny/seed1: finished (2 rounds), skipped'])

    # Another seed in a finished run's directory: refused before anything runs.
    changed = _tiny_figure(rounds=2, seed_of_second=5)
    with self.assertRaisesRegex(figures.ReproduceError, r'tiny/seed1 holds a run made with '
                                r'other flags \(seed\)'):
      figures.execute([(changed, run) for run in changed.runs], root=root, pin=False)

    # The summary and its README section, replaced in place on a second summary.
    readme = root / figures.README
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text('# Results\n\nkept\n')
    figures.summarize([figure], root, log=lines.append)
    figures.summarize([figure], root, log=lines.append)
    text = readme.read_text()
    self.assertEqual(text.count('<!-- reproduce:tiny -->'), 1)
    self.assertIn('kept', text)
    self.assertIn('seed0: 0.', text)
    self.assertTrue((folder / 'table.md').exists())

  def test_a_failed_run_is_reported(self):
    root = pathlib.Path(self.get_temp_dir())
    figure = _tiny_figure(rounds=1)
    bad = dataclasses.replace(figure.runs[0], flags=dict(figure.runs[0].flags,
                                                         learning_rate=-1))
    lines = []
    self.assertEqual(figures.execute([(figure, bad)], root=root, log=lines.append, pin=False),
                     2)
    self.assertIn('learning_rate must be > 0', lines[-1])

  def test_a_crash_is_named_by_its_signal_not_the_fault_handler_last_line(self):
    log = pathlib.Path(self.get_temp_dir()) / 'log.txt'
    log.write_text('round 73 | 0.04 rounds/s\nFatal Python error: Segmentation fault\n\n'
                   'Thread 0x1 (most recent call first):\n  File "x.py", line 1\n\n'
                   'Extension modules: numpy.core._multiarray_umath (total: 1)\n')
    self.assertEqual(figures.failure(-11, log),
                     'killed by SIGSEGV: Fatal Python error: Segmentation fault')
    self.assertEqual(figures.failure(-9, log.with_name('absent.txt')), 'killed by SIGKILL')
    self.assertEqual(figures.failure(1, log),
                     'exit 1: Extension modules: numpy.core._multiarray_umath (total: 1)')

  def test_bad_selections(self):
    with self.assertRaisesRegex(figures.ReproduceError, 'Unknown figures'):
      figures.select([_tiny_figure()], ['nope'])
    for text in ('2/2', '1', '-1/3', 'a/b'):
      with self.assertRaisesRegex(figures.ReproduceError, 'shard'):
        figures.parse_shard(text)
    self.assertEqual(figures.parse_shard('1/3'), (1, 3))

  def test_estimates_from_runs_of_the_same_cost(self):
    figure = _tiny_figure(rounds=10)
    statuses = [figures.RunStatus(figure, figure.runs[0], 4, 2.0),
                figures.RunStatus(figure, figure.runs[1], 0, None)]
    estimates = figures.estimate_seconds(statuses)
    self.assertEqual(estimates[('tiny', 'seed0')], (12.0, True))
    self.assertEqual(estimates[('tiny', 'seed1')], (20.0, False))


if __name__ == '__main__':
  tf.test.main()
