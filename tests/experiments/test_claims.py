"""Tests of the claims table (`experiments.claims`): its rules on hand-written runs, and the
committed table against the committed runs."""

import csv
import pathlib
import tempfile
from unittest import mock

import tensorflow as tf

from experiments import claims
from experiments import figures


def _write(directory: pathlib.Path, accuracies: dict[str, dict[int, float]]) -> None:
  """A metrics.csv with `{algorithm: {round: accuracy}}` evaluations."""
  directory.mkdir(parents=True)
  rounds = sorted({r for by_round in accuracies.values() for r in by_round})
  columns = ['round'] + [f'{a}/eval/{k}' for a in accuracies for k in ('accuracy', 'loss')]
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, columns)
    writer.writeheader()
    for r in rounds:
      row = {'round': r}
      for a, by_round in accuracies.items():
        if r in by_round:
          row[f'{a}/eval/accuracy'], row[f'{a}/eval/loss'] = by_round[r], 1.0
      writer.writerow(row)


def _rising(reaches_at: int, final: float = 0.6) -> dict[int, float]:
  """An accuracy curve every 10 rounds to 1,000 that gets to `final` at `reaches_at`."""
  return {r: final * min(1.0, r / reaches_at) for r in range(0, 1001, 10)}


class ClaimsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    patcher = mock.patch.object(claims, '_path', lambda name: self.root / name)
    patcher.start()
    self.addCleanup(patcher.stop)
    claims._read.cache_clear()  # pylint: disable=protected-access
    self.addCleanup(claims._read.cache_clear)  # pylint: disable=protected-access

  def test_a_seed_of_several_runs_merges_them_and_skips_the_missing(self):
    _write(self.root / 'a', {'flare': {0: 0.1, 10: 0.5}})
    _write(self.root / 'b', {'ec': {0: 0.1, 10: 0.3}})
    self.assertEqual(sorted(claims.curves(('a', 'b', 'not_run_yet'))), ['ec', 'flare'])
    self.assertEqual(claims.last_round(('a', 'b'), ('flare', 'ec')), 10)
    self.assertIsNone(claims.last_round('a', ('flare', 'ec')))

  def test_sooner_holds_only_where_flare_is_first_in_every_run(self):
    for r, seeds in claims.SEEDS_1001.items():
      for seed in seeds:
        _write(self.root / seed, {'flare': _rising(100), 'ec': _rising(500)})
    _, shown, verdict, _ = claims.flare_sooner()
    self.assertIn('R = 0.1 %: 90 / 450', shown)  # 90 % of 0.6 at 0.9 x 100 and 0.9 x 500.
    self.assertStartsWith(verdict, '**holds**')
    seed = claims.SEEDS_1001[0.1][0]  # One run where EC is first.
    (self.root / seed / 'metrics.csv').unlink()
    (self.root / seed).rmdir()
    _write(self.root / seed, {'flare': _rising(500), 'ec': _rising(100)})
    claims._read.cache_clear()  # pylint: disable=protected-access
    _, _, verdict, _ = claims.flare_sooner()
    self.assertStartsWith(verdict, '**partly**: FLARE sooner in 4 of 5 runs')


class CommittedTableTest(tf.test.TestCase):

  def test_the_results_page_holds_the_table_the_committed_runs_give(self):
    readme = (figures.ROOT / figures.README).read_text()
    section = claims.summarize(None, None).strip()
    self.assertTrue(section in readme, 'experiments/results/README.md does not hold the claims '
                    'table its runs give: run python -m experiments.reproduce --summarize_only '
                    '--figures=claims')
    self.assertLen([l for l in section.splitlines() if l.startswith('| ') and '**' in l],
                   len(claims.CLAIMS))


if __name__ == '__main__':
  tf.test.main()
