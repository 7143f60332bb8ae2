"""Tests of `tff_flare.experiment.run_files`: reading a run directory."""

import json
import os
import pathlib
import tempfile

import tensorflow as tf

from tests.experiments import synthetic_runs
from tff_flare.experiment import run_files

_CONFIG = dict(task='mnist_cnn', seed=0, keep_percent=0.001, model_seed=None)


def _constant(value):
  return lambda r: value


class ReadTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))

  def test_curves_rounds_and_rates(self):
    run = synthetic_runs.write_run(self.base / 'a', {
        'flare': lambda r: r / 100,
        'ec': _constant(0.1)
    }, _CONFIG, 20, range(0, 21, 10))
    curves = run_files.curves(run)
    self.assertEqual(sorted(curves), ['ec', 'flare'])
    self.assertEqual(curves['flare'].round, (0, 10, 20))
    self.assertEqual(curves['flare'].at(10), 0.1)
    self.assertIsNone(curves['flare'].at(15))
    self.assertEqual(curves['flare'].bytes, (0.0, 1000.0, 2000.0))  # Uploaded before each.
    self.assertEqual(run_files.rounds_done(run), 20)
    self.assertEqual(run_files.seconds_per_round(run), 1.0)  # Two algorithms, 0.5 s each.

  def test_a_cut_last_row_is_left_out_and_damage_is_refused(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': _constant(0.27)}, _CONFIG, 3, (0, 3))
    text = (run / 'metrics.csv').read_text()
    (run / 'metrics.csv').write_text(text[:-8])  # Killed while appending the last row.
    self.assertEqual([r['round'] for r in run_files.rows(run)], [0, 1, 2])
    (run / 'metrics.csv').write_text(text.replace('0.27', 'x.27', 1))
    with self.assertRaisesRegex(run_files.RunFileError, "line 2, flare/eval/accuracy: 'x.27' is "
                                'not a number'):
      run_files.rows(run)
    lines = text.splitlines(keepends=True)
    (run / 'metrics.csv').write_text(''.join(lines[:2]) + '1,2\n' + ''.join(lines[3:]))
    with self.assertRaisesRegex(run_files.RunFileError, 'line 3: 2 cells where the header has'):
      run_files.rows(run)
    # A round repeated, out of order, or not a whole number is refused, not read.
    for edited, message in ((lines[:3] + [lines[2]] + lines[3:], 'line 4: round 1 follows round 1'),
                            (lines[:2] + [lines[3], lines[2]] + lines[4:],
                             'line 4: round 1 follows round 2'),
                            (lines[:2] + [lines[2].replace('1,', '1.5,', 1)] + lines[3:],
                             'line 3: round 1.5 is not a round number')):
      (run / 'metrics.csv').write_text(''.join(edited))
      with self.assertRaisesRegex(run_files.RunFileError, message):
        run_files.rows(run)
    (run / 'metrics.csv').write_text(text.replace('flare/eval/loss', 'flare/eval/los'))
    with self.assertRaisesRegex(run_files.RunFileError, 'no flare/eval/loss column'):
      run_files.curves(run)
    with self.assertRaisesRegex(run_files.RunFileError, 'no readable metrics.csv'):
      run_files.rows(self.base / 'absent')
    (self.base / 'header').mkdir()
    (self.base / 'header' / 'metrics.csv').write_text('round,flare/eval/accuracy\n')
    with self.assertRaisesRegex(run_files.RunFileError, 'no evaluated round yet'):
      run_files.curves(self.base / 'header')
    self.assertFalse(run_files.has_curves(self.base / 'header'))

  def test_a_record_that_is_not_one_is_refused(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': _constant(0.27)}, _CONFIG, 3, (0, 3))
    good = json.loads((run / 'config.json').read_text())
    self.assertEqual(run_files.record(run), good)
    self.assertIsNone(run_files.record(self.base / 'absent'))
    for value, message in (([1], 'a JSON list, not an object'), ({}, "it has no 'config'"),
                           (dict(good, config=[1]), "its 'config' is a JSON list"),
                           (dict(good, code={}), "its 'code' is a JSON dict")):
      (run / 'config.json').write_text(json.dumps(value))
      with self.assertRaisesRegex(run_files.RunFileError, 'is not a run record: ' + message):
        run_files.record(run)
      with self.assertRaisesRegex(run_files.RunFileError, 'is not a run record'):
        run_files.config(run)
    (run / 'summary.json').write_text('[1]')
    with self.assertRaisesRegex(run_files.RunFileError, 'is not a run summary: a JSON list'):
      run_files.peak_gib(run)
    (run / 'summary.json').write_text(json.dumps(dict(memory=[3.5])))
    self.assertIsNone(run_files.peak_gib(run))

  def test_rows_before_a_resume_must_all_be_there(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': _constant(0.27)}, _CONFIG, 3, (0, 3))
    run_files.check_rows_before(run, 0)
    run_files.check_rows_before(run, 4)  # Rows 0-3: the end's row is round 3's.
    with self.assertRaisesRegex(run_files.RunFileError, r'no row of round\(s\) 4, '):
      run_files.check_rows_before(run, 5)
    with self.assertRaisesRegex(run_files.RunFileError, r'round\(s\) 4, 5, 6 and 3 more'):
      run_files.check_rows_before(run, 10)
    (run / 'metrics.csv').write_text('step,flare/eval/accuracy\n0,0.1\n')
    with self.assertRaisesRegex(run_files.RunFileError, 'has no round column'):
      run_files.check_rows_before(run, 1)

  def test_a_run_file_that_is_a_pipe_is_refused_not_waited_on(self):
    run = synthetic_runs.write_run(self.base / 'a', {'flare': _constant(0.27)}, _CONFIG, 3, (0, 3))
    for name, read in (('metrics.csv', run_files.rows), ('config.json', run_files.config),
                       ('config.json', run_files.code), ('summary.json', run_files.summary)):
      (run / name).unlink(missing_ok=True)
      os.mkfifo(run / name)
      with self.assertRaisesRegex(run_files.RunFileError, f'{name} is a pipe, a socket or a '
                                  'device',
                                  msg=read.__name__):
        read(run)
      (run / name).unlink()

  def test_rounds_done_is_the_later_of_summary_and_checkpoint_else_the_rows(self):
    run = self.base / 'run'
    self.assertEqual(run_files.rounds_done(run), 0)
    synthetic_runs.write_run(run, {'flare': _constant(0.1)}, _CONFIG, 7, (0, 4), summary=False)
    # Stopped for good, no checkpoint: the last round it evaluated (it trained 7).
    self.assertEqual(run_files.rounds_done(run), 4)
    (run / 'summary.json').write_text(json.dumps({'rounds': 5}))  # A first piece.
    self.assertEqual(run_files.rounds_done(run), 5)
    (run / 'checkpoints' / 'program_state_270').mkdir(parents=True)  # A later piece.
    self.assertEqual(run_files.rounds_done(run), 270)

  def test_ef21_is_named_as_today_where_the_run_says_it_had_the_dense_state(self):
    dense = synthetic_runs.write_run(self.base / 'dense', {'ef21': _constant(0.2)},
                                     dict(_CONFIG, ef21_dense_state=True), 1, (0, 1))
    plain = synthetic_runs.write_run(self.base / 'plain', {'ef21': _constant(0.2)}, _CONFIG, 1,
                                     (0, 1))
    self.assertEqual(list(run_files.curves(dense)), ['ef21_dense'])
    self.assertEqual(list(run_files.curves(plain)), ['ef21'])


if __name__ == '__main__':
  tf.test.main()
