"""Tests of `experiments.claims`: every claim of the manifest on synthetic runs, where its rule
holds and where it does not, and the verdict's order."""

import dataclasses
import json
import pathlib
import tempfile

from absl.testing import parameterized
import tensorflow as tf

from experiments import claims
from experiments import manifest
from experiments import presets
from experiments import runs
from experiments import spec
from tests.experiments import synthetic_runs
from tff_flare.experiment import config as config_lib

# A scenario: (figure name, the run's recorded configuration, algorithm) -> the algorithm's
# accuracy(round), or with `loss` its test loss(round); `survival` the masking cells' S/S_max.


@dataclasses.dataclass(frozen=True)
class Scenario:
  accuracy: callable
  loss: callable = None
  survival: callable = None


def _config(run: spec.Run) -> dict:
  """What a run of these flags records: the preset's values, then the flags'."""
  flags = {k: v for k, v in run.flags.items() if k not in ('preset', 'algorithms')}
  values = dict(presets.PRESETS.get(run.flags.get('preset'), {}))
  values.update(flags)
  values.pop('task', None)
  defaults = config_lib.as_dict(config_lib.ExperimentConfig(output_dir='x'))
  return {**defaults, **{k: v for k, v in values.items() if k in defaults}}


def _write(base: pathlib.Path, figures, scenario: Scenario) -> None:
  """Every run of `figures` (and the runs they read) as a finished synthetic run."""
  by_name = {f.name: f for f in manifest.FIGURES}
  wanted = set(figures)
  for name in list(wanted):
    wanted.update(ref.split('/')[0] for ref in by_name[name].reads)
  for name in wanted:
    for run in by_name[name].runs:
      config = _config(run)
      algorithms = run.flags['algorithms'].split(',')
      every = int(run.flags.get('eval_every', 10))
      evals = sorted(set(range(0, run.rounds + 1, every)) | {run.rounds})
      curve = lambda a, c=config, n=name: (lambda r: scenario.accuracy(n, c, a, r))
      loss = ({a: (lambda r, a=a, c=config, n=name: scenario.loss(n, c, a, r))
               for a in algorithms} if scenario.loss else None)
      extra = {}
      if run.binary == spec.RUN_MASKING:
        value = lambda r, c=config: scenario.survival(c)
        extra = {f'{a}/train/survival/{c}': fn for a in algorithms for c, fn in (
            ('survival', value), ('survival_normalized', value), ('s_max', lambda r: 10.0))}
      synthetic_runs.write_run(base / name / run.name, {a: curve(a) for a in algorithms},
                               config, run.rounds, evals, loss=loss,
                               density=config['keep_percent'] / 100, extra=extra)


def _claim(number: int) -> spec.Claim:
  return manifest.CLAIMS[number - 1]


def _flat(value):
  return lambda *args: value


def _scaling_loss(slow_exponent: dict):
  """Losses that reach FedAvg's loss at round t at t * (0.1 / delta) ** exponent."""
  def loss(name, config, algorithm, round_num):
    del name
    if algorithm == 'fedavg':
      return 1.0 / (1.0 + round_num)
    slowdown = (0.1 / (config['keep_percent'] / 100)) ** slow_exponent[algorithm]
    return 1.0 / (1.0 + round_num / slowdown)
  return loss


def _by(default: float, **values):
  """accuracy by algorithm (a constant each)."""
  return lambda name, config, algorithm, r: values.get(algorithm, default)


SCENARIOS = {
    # 1: EC near FedAvg at R = 0.1 %, a third of it at R = 0.0001 %.
    1: (Scenario(lambda n, c, a, r: (0.92 if a == 'fedavg' else 0.9 if c['keep_percent'] >= 0.1
                                     else 0.3)), Scenario(_by(0.5, fedavg=0.92))),
    2: (Scenario(_by(0.5, flare=0.9, fedavg=0.92)),
        Scenario(_by(0.5, flare=0.4, ec=0.6, ef21_dense=0.6, fedavg=0.92))),
    3: (Scenario(lambda n, c, a, r: min(0.8, r / (100 if a == 'flare' else 500))),
        Scenario(lambda n, c, a, r: min(0.8, r / (500 if a == 'flare' else 100)))),
    4: (Scenario(_by(0.4, flare=0.8, fedavg=0.9)), Scenario(_by(0.4, ec=0.9))),
    5: (Scenario(_by(0.3, flare=0.6)),
        Scenario(lambda n, c, a, r: 0.9 if a == 'flare' and c['double_softmax'] is False
                 else 0.5)),
    7: (Scenario(_by(0.3, flare=0.88, fedavg=0.9)), Scenario(_by(0.3, flare=0.25, fedavg=0.9))),
    8: (Scenario(_by(0.2, flare=0.5, fedavg=0.6)), Scenario(_by(0.2, ec=0.6))),
    9: (Scenario(_flat(0.3), loss=lambda n, c, a, r: {'fedavg': 1.95, 'flare': 2.0}.get(a, 3.0)),
        Scenario(_flat(0.3), loss=lambda n, c, a, r: {'fedavg': 1.95, 'flare': 3.0}.get(a, 2.5))),
    10: (Scenario(_by(0.8, flare=0.9)), Scenario(_by(0.9, flare=0.8))),
    11: (Scenario(_flat(0.5), loss=_scaling_loss(dict(flare=0.5, ec=1.0))),
         Scenario(_flat(0.5), loss=_scaling_loss(dict(flare=1.0, ec=0.5)))),
    12: (Scenario(_flat(0.6), survival=lambda c: 0.1), Scenario(_flat(0.6), survival=lambda c: 0.5)),
    13: (Scenario(_flat(0.3), survival=lambda c: 0.9), Scenario(_flat(0.3), survival=lambda c: 0.1)),
    14: (Scenario(_flat(0.3), survival=lambda c: 0.5),
         Scenario(lambda n, c, a, r: 0.7 if c['batch_size'] == 0 else 0.3,
                  survival=lambda c: 0.5)),
    15: (Scenario(_by(0.5, flare=0.9, fedavg=0.92)),
         Scenario(_by(0.5, flare=0.52, ec_ffl=0.55, fedavg=0.92))),
}


class ClaimRulesTest(parameterized.TestCase, tf.test.TestCase):

  def _verdict(self, number: int, scenario: Scenario) -> tuple[str, list[str]]:
    claim = _claim(number)
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write(base, claims.figures_read(claim) | set(claim.figures), scenario)
    return claims.verdict(runs.Results(base, manifest.FIGURES), claim)

  @parameterized.parameters(sorted(SCENARIOS))
  def test_the_rule_holds_where_it_should_and_not_where_it_should_not(self, number):
    holding, failing = SCENARIOS[number]
    verdict, lines = self._verdict(number, holding)
    self.assertEqual(verdict, 'holds', lines)
    verdict, lines = self._verdict(number, failing)
    self.assertEqual(verdict, 'does not hold', lines)

  def test_local_epochs_hold_partly_without_the_epochs_not_run(self):
    # E = 16 and 32 have no runs: FLARE steady over E = 1, 4, 8 is "partly", never "holds".
    verdict, lines = self._verdict(6, Scenario(_by(0.4, flare=0.6)))
    self.assertEqual(verdict, 'partly', lines)
    verdict, lines = self._verdict(6, Scenario(
        lambda n, c, a, r: 0.3 if a == 'flare' and c['local_epochs'] == 4 else 0.6))
    self.assertEqual(verdict, 'does not hold', lines)

  def test_partly_and_not_tested(self):
    # Claim 2: FLARE ahead of EC and EF21 everywhere but far below FedAvg: partly.
    verdict, _ = self._verdict(2, Scenario(_by(0.3, flare=0.6, fedavg=0.95)))
    self.assertEqual(verdict, 'partly')
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    verdict, lines = claims.verdict(runs.Results(base, manifest.FIGURES), _claim(8))
    self.assertEqual(verdict, 'not tested')
    self.assertIn('no runs', lines[0])

  def test_a_claim_with_an_unfinished_run_is_in_progress_never_a_verdict(self):
    claim = _claim(2)
    for scenario in SCENARIOS[2]:
      base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
      _write(base, claims.figures_read(claim), scenario)
      results = runs.Results(base, manifest.FIGURES)
      ref = claims.runs_read(results, claim)[-1]
      declared = results.run(ref).rounds
      summary = base / ref / 'summary.json'
      summary.write_text(json.dumps(dict(json.loads(summary.read_text()),
                                         rounds=declared // 2)))
      verdict, lines = claims.verdict(runs.Results(base, manifest.FIGURES), claim)
      self.assertEqual(verdict, 'in progress', lines)
      self.assertIn(f'{ref} round {declared // 2} of {declared}',
                    claims.progress_text(results, claim))
      self.assertNotEmpty(lines)  # The reading so far.

  def test_with_no_runs_every_claim_is_not_tested(self):
    results = runs.Results(pathlib.Path(self.get_temp_dir()) / 'empty', manifest.FIGURES)
    for number, claim in enumerate(manifest.CLAIMS, 1):
      self.assertNotEmpty(claims.runs_read(results, claim), msg=number)
      verdict, lines = claims.verdict(results, claim)
      self.assertEqual(verdict, 'not tested', msg=(number, lines))

  def test_every_claim_has_a_scenario_and_reads_declared_figures(self):
    self.assertEqual(sorted(list(SCENARIOS) + [6]), list(range(1, len(manifest.CLAIMS) + 1)))
    names = {f.name for f in manifest.FIGURES}
    for claim in manifest.CLAIMS:
      self.assertContainsSubset(claims.figures_read(claim) | set(claim.figures), names)
      for test in claim.holds + claim.partly:
        self.assertIn(test.threshold, claims.THRESHOLDS)
        self.assertIn(test.measure.kind, claims.MEASURES)


if __name__ == '__main__':
  tf.test.main()
