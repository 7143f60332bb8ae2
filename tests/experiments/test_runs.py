"""Tests of `experiments.runs`: reading run directories, and selecting seeds of declared runs."""

import json
import pathlib
import tempfile

import tensorflow as tf

from experiments import runs
from experiments import spec
from tests.experiments import synthetic_runs

_CONFIG = dict(task='mnist_cnn', seed=0, keep_percent=0.001, model_seed=None)


def _constant(value):
  return lambda r: value


class ReadTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))

  def test_curves_rounds_and_rates(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': lambda r: r / 100,
                                                     'ec': _constant(0.1)}, _CONFIG, 20,
                                   range(0, 21, 10))
    curves = runs.curves(run)
    self.assertEqual(sorted(curves), ['ec', 'flare'])
    self.assertEqual(curves['flare'].round, (0, 10, 20))
    self.assertEqual(curves['flare'].at(10), 0.1)
    self.assertIsNone(curves['flare'].at(15))
    self.assertEqual(curves['flare'].bytes, (0.0, 1000.0, 2000.0))  # Uploaded before each.
    self.assertEqual(runs.rounds_done(run), 20)
    self.assertEqual(runs.seconds_per_round(run), 1.0)  # Two algorithms, 0.5 s each.

  def test_a_cut_last_row_is_left_out_and_damage_is_refused(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': _constant(0.27)}, _CONFIG, 3,
                                   (0, 3))
    text = (run / 'metrics.csv').read_text()
    (run / 'metrics.csv').write_text(text[:-8])  # Killed while appending the last row.
    self.assertEqual([r['round'] for r in runs.rows(run)], [0, 1, 2])
    (run / 'metrics.csv').write_text(text.replace('0.27', 'x.27', 1))
    with self.assertRaisesRegex(runs.RunFileError, "line 2, flare/eval/accuracy: 'x.27' is "
                                'not a number'):
      runs.rows(run)
    lines = text.splitlines(keepends=True)
    (run / 'metrics.csv').write_text(''.join(lines[:2]) + '1,2\n' + ''.join(lines[3:]))
    with self.assertRaisesRegex(runs.RunFileError, 'line 3: 2 cells where the header has'):
      runs.rows(run)
    # A round repeated, out of order, or not a whole number is refused, not read.
    for edited, message in (
        (lines[:3] + [lines[2]] + lines[3:], 'line 4: round 1 follows round 1'),
        (lines[:2] + [lines[3], lines[2]] + lines[4:], 'line 4: round 1 follows round 2'),
        (lines[:2] + [lines[2].replace('1,', '1.5,', 1)] + lines[3:],
         'line 3: round 1.5 is not a round number')):
      (run / 'metrics.csv').write_text(''.join(edited))
      with self.assertRaisesRegex(runs.RunFileError, message):
        runs.rows(run)
    (run / 'metrics.csv').write_text(text.replace('flare/eval/loss', 'flare/eval/los'))
    with self.assertRaisesRegex(runs.RunFileError, 'no flare/eval/loss column'):
      runs.curves(run)
    with self.assertRaisesRegex(runs.RunFileError, 'no readable metrics.csv'):
      runs.rows(self.base / 'absent')
    (self.base / 'header').mkdir()
    (self.base / 'header' / 'metrics.csv').write_text('round,flare/eval/accuracy\n')
    with self.assertRaisesRegex(runs.RunFileError, 'no evaluated round yet'):
      runs.curves(self.base / 'header')
    self.assertFalse(runs.has_curves(self.base / 'header'))

  def test_rounds_done_is_the_later_of_summary_and_checkpoint_else_the_rows(self):
    run = self.base / 'run'
    self.assertEqual(runs.rounds_done(run), 0)
    synthetic_runs.write_run(run, {'flare': _constant(0.1)}, _CONFIG, 7, (0, 4), summary=False)
    # Stopped for good, no checkpoint: the last round it evaluated (it trained 7).
    self.assertEqual(runs.rounds_done(run), 4)
    (run / 'summary.json').write_text(json.dumps({'rounds': 5}))  # A first piece.
    self.assertEqual(runs.rounds_done(run), 5)
    (run / 'checkpoints' / 'program_state_270').mkdir(parents=True)  # A later piece.
    self.assertEqual(runs.rounds_done(run), 270)

  def test_ef21_is_named_as_today_where_the_run_says_it_had_the_dense_state(self):
    dense = synthetic_runs.write_run(self.base / 'dense', {'ef21': _constant(0.2)},
                                     dict(_CONFIG, ef21_dense_state=True), 1, (0, 1))
    plain = synthetic_runs.write_run(self.base / 'plain', {'ef21': _constant(0.2)}, _CONFIG, 1,
                                     (0, 1))
    self.assertEqual(list(runs.curves(dense)), ['ef21_dense'])
    self.assertEqual(list(runs.curves(plain)), ['ef21'])


class SelectTest(tf.test.TestCase):

  def test_joins_reaching_and_where(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    figure = spec.Figure('fig', 'a figure', 'FLARE: test', grids=(
        spec.Grid('seed{seed}', dict(algorithms='flare,ec'), 300, dict(seed=(0, 1))),
        spec.Grid('long_seed{seed}', dict(algorithms='flare'), 1000, dict(seed=(0,)),
                  joins='seed{seed}'),
        spec.Grid('other_R', dict(algorithms='flare', keep_percent=0.1), 300)))
    for seed in (0, 1):
      synthetic_runs.write_run(base / 'fig' / f'seed{seed}', {
          'flare': _constant(0.5 + seed / 10), 'ec': _constant(0.2)}, dict(_CONFIG, seed=seed),
                               300, range(0, 301, 100))
    synthetic_runs.write_run(base / 'fig' / 'long_seed0', {'flare': _constant(0.9)}, _CONFIG,
                             1000, range(0, 1001, 100))
    synthetic_runs.write_run(base / 'fig' / 'other_R', {'flare': _constant(0.3)},
                             dict(_CONFIG, keep_percent=0.1), 300, range(0, 301, 100))
    results = runs.Results(base, [figure])
    seeds = results.select(('fig',), dict(keep_percent=0.001))
    self.assertLen(seeds, 2)
    # The joined run adds its rounds; the first declared run wins where both have a round.
    self.assertEqual(seeds[0].refs, ['fig/seed0', 'fig/long_seed0'])
    self.assertEqual(seeds[0].at('flare', 300), 0.5)
    self.assertEqual(seeds[0].at('flare', 1000), 0.9)
    self.assertIsNone(seeds[1].at('flare', 1000))
    # Only the runs that reached round 1,000: the joining run stands alone.
    (alone,) = results.select(('fig',), reaching=1000)
    self.assertEqual(alone.refs, ['fig/long_seed0'])
    (other,) = results.select(('fig',), dict(keep_percent=0.1))
    self.assertEqual(other.at('flare', 300), 0.3)
    with self.assertRaisesRegex(KeyError, 'fig/absent'):
      results.resolve('absent', 'fig')


if __name__ == '__main__':
  tf.test.main()
