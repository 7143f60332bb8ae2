"""Tests of `experiments.manifest`: the declarations hold together, `reproduce --dry_run` lists
every run a figure shows, and the committed results page is the one its runs give."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import tensorflow as tf

from experiments import claims
from experiments import manifest
from experiments import report
from experiments import schedule

ROOT = schedule.ROOT


class ManifestTest(tf.test.TestCase):

  def test_names_references_and_flags(self):
    names = [f.name for f in manifest.FIGURES]
    self.assertLen(set(names), len(names))
    for figure in manifest.FIGURES:
      runs = [r.name for r in figure.runs]
      self.assertLen(set(runs), len(runs), figure.name)
      for run in figure.runs:
        if run.joins:
          self.assertIn(run.joins, runs[:runs.index(run.name)], run.name)  # Declared before.
        self.assertNotIn('output_dir', run.flags)
        self.assertNotIn('rounds', run.flags)
      self.assertTrue(figure.paper.split(':')[0] in ('FLARE', 'Masking', 'Ours'), figure.paper)
      # A figure of a paper says how its setting differs from the paper's; one of ours does not.
      self.assertEqual(bool(figure.differs), not figure.paper.startswith('Ours'), figure.name)
      self.assertNotRegex(figure.reading, r'\d\.\d', figure.name)  # No typed-in numbers.
    schedule.runs_shown(manifest.FIGURES, manifest.FIGURES)  # Every read resolves.
    for claim in manifest.CLAIMS:
      self.assertContainsSubset(set(claim.figures) | claims.figures_read(claim), set(names))

  def test_every_run_is_a_configuration_its_binary_takes(self):
    # As `reproduce` checks them all before it starts one (an error, not a test failure, then).
    for figure in manifest.FIGURES:
      for run in figure.runs:
        schedule.check_configuration(run,
                                     pathlib.Path(self.get_temp_dir()) / figure.name / run.name,
                                     '../shared/datasets', run.rounds)

  def test_dry_run_prints_every_run_a_figure_shows(self):
    results = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir())) / 'fresh'
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    output = subprocess.run([
        sys.executable, '-m', 'experiments.reproduce', '--figures=sparsity_fixed_cnn3',
        f'--results_dir={results}', '--data_dir=/data', '--dry_run'
    ],
                            cwd=ROOT,
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=300)
    self.assertEqual(output.returncode, 0, output.stderr[-2000:])
    lines = output.stdout.splitlines()
    figure = next(f for f in manifest.FIGURES if f.name == 'sparsity_fixed_cnn3')
    self.assertLen(lines, len(figure.runs) + len(figure.reads))
    self.assertTrue(
        all(
            line.startswith('python -m experiments.run_experiment ') and
            '--data_path=/data/mnist.npz' in line and line.endswith('# 0 of 300 rounds done')
            for line in lines))
    self.assertIn('initialization_cnn3/fixed_cnn_seed2', output.stdout)
    self.assertFalse(results.exists())  # A dry run writes nothing.

  def test_no_committed_run_records_a_path_of_this_machine(self):
    results = pathlib.Path(__file__).resolve().parents[2] / 'experiments' / 'results'

    def paths(value):
      if isinstance(value, str):
        yield value
      elif isinstance(value, dict):
        for item in value.values():
          yield from paths(item)
      elif isinstance(value, list):
        for item in value:
          yield from paths(item)

    checked = 0
    for path in results.rglob('*.json'):
      checked += 1
      absolute = [v for v in paths(json.loads(path.read_text())) if v.startswith('/')]
      self.assertEqual(absolute, [], str(path))
    self.assertGreater(checked, 100)

  def test_the_committed_page_is_what_the_committed_runs_give(self):
    tracked = subprocess.run(['git', 'ls-files', str(schedule.RESULTS)],
                             cwd=ROOT,
                             capture_output=True,
                             text=True,
                             check=True).stdout.split()
    if not tracked:
      self.skipTest('not a git checkout')
    # The files as git holds them (runs still going on this machine write on).
    copy = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    subprocess.run(['git', 'checkout-index', f'--prefix={copy}/', *tracked], cwd=ROOT, check=True)
    results = copy / schedule.RESULTS
    committed = (results / report.PAGE).read_text()
    page = report.write(manifest.FIGURES, manifest.CLAIMS, results, log=lambda _: None)
    self.assertEqual(page.read_text(), committed,
                     'Regenerate the page: python -m experiments.reproduce --summarize_only')


if __name__ == '__main__':
  tf.test.main()
