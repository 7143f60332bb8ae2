"""Tests of `experiments.claims`: every claim of the manifest on synthetic runs, where its rule
holds and where it does not, and the verdict's order."""

import dataclasses
import functools
import json
import os
import pathlib
import re
import tempfile
from collections.abc import Callable

from absl.testing import parameterized
import tensorflow as tf

from experiments import claims
from experiments import manifest
from experiments import presets
from experiments import runs
from experiments import spec
from tests.experiments import synthetic_runs
from tff_flare.experiment import config as config_lib

PAPER_CLAIMS = pathlib.Path(
    os.environ.get('TFF_FLARE_SHARED',
                   pathlib.Path(__file__).resolve().parents[3] / 'shared')) / 'PAPER_CLAIMS.md'

# A scenario: (figure name, the run's recorded configuration, algorithm) -> the algorithm's
# accuracy(round), or with `loss` its test loss(round); `survival` the masking cells' S/S_max.


@dataclasses.dataclass(frozen=True)
class Scenario:
  accuracy: Callable[[str, dict, str, int], float]
  loss: Callable[[str, dict, str, int], float] | None = None
  survival: Callable[[dict], float] | None = None


def _config(run: spec.Run) -> dict:
  """What a run of these flags records: the preset's values, then the flags'."""
  flags = {k: v for k, v in run.flags.items() if k not in ('preset', 'algorithms')}
  values = dict(presets.PRESETS.get(str(run.flags.get('preset')), {}))
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
      algorithms = str(run.flags['algorithms']).split(',')
      every = int(str(run.flags.get('eval_every', 10)))
      evals = sorted(set(range(0, run.rounds + 1, every)) | {run.rounds})
      curve = lambda a, c=config, n=name: (lambda r: scenario.accuracy(n, c, a, r))
      loss = None
      if scenario.loss is not None:
        loss = {a: functools.partial(scenario.loss, name, config, a) for a in algorithms}
      extra: dict[str, Callable[[int], float]] = {}
      if run.binary == spec.RUN_MASKING:
        assert scenario.survival is not None
        survival = scenario.survival(config)

        def survival_at(_: int, value: float = survival) -> float:
          return value

        def s_max(_: int) -> float:
          return 10.0

        column: Callable[[int], float] = survival_at
        columns = (('survival', column), ('survival_normalized', column), ('s_max', s_max))
        extra = {f'{a}/train/survival/{c}': fn for a in algorithms for c, fn in columns}
      synthetic_runs.write_run(base / name / run.name, {a: curve(a) for a in algorithms},
                               config,
                               run.rounds,
                               evals,
                               loss=loss,
                               density=config['keep_percent'] / 100,
                               extra=extra)
    if any(isinstance(d, spec.SparsityScaling) for d in by_name[name].draw):
      (base / name / spec.OPTIMUM_FILE).write_text(json.dumps(dict(f_star=0.0)))


def _claim(name: str) -> spec.Claim:
  return next(c for c in manifest.CLAIMS if c.name == name)


def _flat(value):
  return lambda *args: value


def _scaling_loss(slow_exponent: dict):
  """Losses (f* = 0) within g of f* at round (1/g - 1) * (0.1 / delta) ** exponent; the TAU
  runs' FLARE monotone at and below the study's TAU, climbing above it."""

  def loss(name, config, algorithm, round_num):
    del name
    if config['tau'] > manifest.SCALING_TAU:
      return 1.0 / (1.0 + round_num) + 0.01 * round_num
    slowdown = (0.1 / (config['keep_percent'] / 100))**slow_exponent[algorithm]
    return 1.0 / (1.0 + round_num / slowdown)

  return loss


def _by(default: float, **values):
  """accuracy by algorithm (a constant each)."""
  return lambda name, config, algorithm, r: values.get(algorithm, default)


def _ramps(default: tuple[float, float], **ramps: tuple[float, float]):
  """accuracy by algorithm: (level, rounds) climbs linearly from 0 to `level` in `rounds`."""

  def accuracy(name, config, algorithm, r):
    level, rounds = ramps.get(algorithm, default)
    return min(level, level * r / rounds)

  return accuracy


# FLARE ahead of the others at the end and first to their level; and the reverse.
_AHEAD = Scenario(_ramps((0.4, 100), flare=(0.8, 20), fedavg=(0.82, 20)))
_BEHIND = Scenario(_ramps((0.4, 100), flare=(0.3, 100), ec=(0.9, 20), fedavg=(0.92, 20)))

SCENARIOS = {
    # EC near FedAvg at R = 0.1 % on the fixed CNN, a third of it at R = 0.0001 %.
    'F1': (Scenario(lambda n, c, a, r: (0.97 if a == 'fedavg' else 0.95
                                        if c['keep_percent'] >= 0.1 else 0.3)),
           Scenario(_by(0.5, fedavg=0.97))),
    'F2': (Scenario(_by(0.5, flare=0.9, fedavg=0.92)),
           Scenario(_by(0.5, flare=0.4, ec=0.6, ef21_dense=0.6, fedavg=0.92))),
    'F3 (CNN)': (Scenario(_ramps((0.5, 200), flare=(0.9, 50), fedavg=(0.92, 50))),
                 Scenario(_ramps((0.5, 50), flare=(0.52, 200), ec_ffl=(0.55, 50),
                                 fedavg=(0.92, 50)))),
    'F3 (FC)': (Scenario(_ramps((0.5, 200), flare=(0.9, 50), fedavg=(0.92, 50))),
                Scenario(_ramps((0.5, 50), flare=(0.52, 200), ec_ffl=(0.55, 50),
                                fedavg=(0.92, 50)))),
    'F4': (Scenario(_ramps((0.2, 40), flare=(0.5, 40),
                           fedavg=(0.6, 40))), Scenario(_ramps((0.2, 40), ec=(0.6, 20)))),
    # Constant losses: FLARE on FedAvg's curve and below EC's; then above both.
    'F5': (Scenario(_flat(0.3), loss=lambda n, c, a, r: {
        'fedavg': 1.95,
        'flare': 2.0
    }.get(a, 3.0)),
           Scenario(_flat(0.3), loss=lambda n, c, a, r: {
               'fedavg': 1.95,
               'flare': 3.0
           }.get(a, 2.5))),
    'F6': (_AHEAD, _BEHIND),
    'F7': (_AHEAD, _BEHIND),
    'F9': (Scenario(_flat(0.5), loss=_scaling_loss(dict(flare=0.5, ec=1.0))),
           Scenario(_flat(0.5), loss=_scaling_loss(dict(flare=1.0, ec=0.5)))),
    'M3, M4': (Scenario(_flat(0.6),
                        survival=lambda c: 0.1), Scenario(_flat(0.6), survival=lambda c: 0.5)),
    'M5': (Scenario(_flat(0.3), survival=lambda c: 0.9), Scenario(_flat(0.3),
                                                                  survival=lambda c: 0.1)),
    'M6': (Scenario(_flat(0.3), survival=lambda c: 0.5),
           Scenario(lambda n, c, a, r: 0.7
                    if c['batch_size'] == 0 else 0.3, survival=lambda c: 0.5)),
    'ours: fewer rounds':
        (Scenario(lambda n, c, a, r: min(0.8, r / (100 if a == 'flare' else 500))),
         Scenario(lambda n, c, a, r: min(0.8, r / (500 if a == 'flare' else 100)))),
    'ours: the plateau':
        (Scenario(_by(0.3, flare=0.6)),
         Scenario(lambda n, c, a, r: 0.9 if a == 'flare' and c['double_softmax'] is False else 0.5)
        ),
    'ours: the lead at sparse R': (Scenario(_by(0.8, flare=0.9)), Scenario(_by(0.9, flare=0.8))),
}


class ClaimRulesTest(parameterized.TestCase, tf.test.TestCase):

  def _verdict(self, name: str, scenario: Scenario) -> tuple[str, list[str]]:
    claim = _claim(name)
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write(base, claims.figures_read(claim) | set(claim.figures), scenario)
    return claims.verdict(runs.Results(base, manifest.FIGURES), claim)

  @parameterized.parameters(sorted(SCENARIOS))
  def test_the_rule_holds_where_it_should_and_not_where_it_should_not(self, name):
    holding, failing = SCENARIOS[name]
    verdict, lines = self._verdict(name, holding)
    self.assertEqual(verdict, 'holds', str(lines))
    verdict, lines = self._verdict(name, failing)
    self.assertEqual(verdict, 'does not hold', str(lines))

  def test_local_epochs_hold_partly_without_the_epochs_not_run(self):
    # E = 16 and 32 have no runs: FLARE ahead at E = 4 and 8 is "partly", never "holds".
    verdict, lines = self._verdict('F8', _AHEAD)
    self.assertEqual(verdict, 'partly', str(lines))
    verdict, lines = self._verdict('F8', _BEHIND)
    self.assertEqual(verdict, 'does not hold', str(lines))

  def test_a_comparison_that_holds_in_some_seeds_says_how_many(self):
    # FLARE above EC and EF21 at the end in seed 0 only, first to the target in every seed.
    verdict, lines = self._verdict(
        'F7',
        Scenario(lambda n, c, a, r: _ramps((0.4, 100), flare=(0.8 if c['seed'] == 0 else 0.35, 20))
                 (n, c, a, r)))
    self.assertEqual(verdict, 'partly', str(lines))
    self.assertIn('ahead by more than ZERO in 1 of 3 seeds', lines[0])
    self.assertIn('FLARE first in 3 of 3 seeds', lines[1])

  def test_no_method_is_first_to_a_target_met_at_the_first_evaluation(self):
    # EC and EF21 at chance from the start: the target (90 % of the lowest final window) is
    # below where they start, so "first to it" means nothing.
    verdict, lines = self._verdict(
        'F7', Scenario(lambda n, c, a, r: min(0.8, 0.04 * r) if a == 'flare' else 0.1))
    self.assertEqual(verdict, 'partly', str(lines))  # Ahead at the end; first: no number.
    self.assertIn(
        "EC, EF21 (authors' dense state) meet the target 0.090 at the first evaluation, so "
        'none can be first (== ALL = 1: no number)', ' '.join(lines))

  def test_partly_and_not_tested(self):
    # F2: FLARE far above EC but far below FedAvg: partly.
    verdict, _ = self._verdict('F2', Scenario(_by(0.3, flare=0.6, fedavg=0.95)))
    self.assertEqual(verdict, 'partly')
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    verdict, lines = claims.verdict(runs.Results(base, manifest.FIGURES), _claim('F4'))
    self.assertEqual(verdict, 'not tested')
    self.assertIn('no number', lines[0])

  def test_a_claim_with_an_unfinished_run_is_in_progress_never_a_verdict(self):
    claim = _claim('F2')
    for scenario in SCENARIOS['F2']:
      base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
      _write(base, claims.figures_read(claim), scenario)
      results = runs.Results(base, manifest.FIGURES)
      ref = claims.runs_read(results, claim)[-1]
      declared = results.run(ref).rounds
      summary = base / ref / 'summary.json'
      summary.write_text(json.dumps(dict(json.loads(summary.read_text()), rounds=declared // 2)))
      verdict, lines = claims.verdict(runs.Results(base, manifest.FIGURES), claim)
      self.assertEqual(verdict, 'in progress', str(lines))
      self.assertIn(f'{ref} round {declared // 2} of {declared}',
                    claims.progress_text(results, claim))
      self.assertNotEmpty(lines)  # The reading so far.

  def _f7_with_one_run_rewritten(self, drop=(), last_evaluation=True):
    """F7's runs, finished and ahead, then its first run rewritten as a run of every declared
    round without the algorithms `drop`, with (or without, nor a summary) the evaluation at
    its last round: `(results, that run, its declared rounds)`."""
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write(base, claims.figures_read(_claim('F7')), _AHEAD)
    ref = claims.runs_read(runs.Results(base, manifest.FIGURES), _claim('F7'))[0]
    declared = runs.Results(base, manifest.FIGURES).run(ref).rounds
    config = json.loads((base / ref / 'config.json').read_text())['config']
    kept = [a for a in config.pop('algorithms') if a not in drop]
    (base / ref / 'summary.json').unlink()
    synthetic_runs.write_run(base / ref, {a: (lambda r: 0.5) for a in kept},
                             config,
                             declared,
                             range(0, declared + last_evaluation, 10),
                             summary=last_evaluation)
    return runs.Results(base, manifest.FIGURES), ref, declared

  def test_a_seed_without_a_method_the_sentence_names_gives_no_verdict(self):
    # Every run finished, but one seed never ran EF21: no comparison, so no verdict.
    results, ref, _ = self._f7_with_one_run_rewritten(drop=('ef21_dense',))
    verdict, lines = claims.verdict(results, _claim('F7'))
    self.assertEqual(verdict, 'not tested', str(lines))
    self.assertIn(f'{ref} has no EF21', lines[0])

  def test_a_run_stopped_for_good_before_its_last_evaluation_is_not_finished(self):
    # A run committed as it stopped (no summary, no checkpoint) that trained every declared
    # round but did not evaluate the last one: the claim stays in progress.
    results, ref, declared = self._f7_with_one_run_rewritten(last_evaluation=False)
    verdict, lines = claims.verdict(results, _claim('F7'))
    self.assertEqual(verdict, 'in progress', str(lines))
    self.assertIn(f'{ref} round {declared - 10} of {declared}',
                  claims.progress_text(results, _claim('F7')))

  def test_with_no_runs_every_claim_is_not_tested(self):
    results = runs.Results(pathlib.Path(self.get_temp_dir()) / 'empty', manifest.FIGURES)
    for claim in manifest.CLAIMS:
      self.assertNotEmpty(claims.runs_read(results, claim), msg=claim.name)
      verdict, lines = claims.verdict(results, claim)
      self.assertEqual(verdict, 'not tested', msg=(claim.name, lines))

  def test_every_claim_has_a_scenario_and_reads_declared_figures(self):
    names = [c.name for c in manifest.CLAIMS]
    self.assertLen(set(names), len(names))
    self.assertCountEqual(list(SCENARIOS) + ['F8'], names)
    figures = {f.name for f in manifest.FIGURES}
    for claim in manifest.CLAIMS:
      self.assertContainsSubset(claims.figures_read(claim) | set(claim.figures), figures)
      self.assertEqual(claim.name.startswith('ours'), not claim.quotes, claim.name)
      for test in claim.holds + claim.partly:
        self.assertIn(test.threshold, claims.THRESHOLDS)
        self.assertIn(test.measure.kind, claims.MEASURES)

  def test_the_quoted_sentences_are_the_papers_words(self):
    """Each sentence as `PAPER_CLAIMS.md` gives it (skipped without ../shared, unless
    TFF_FLARE_REQUIRE_SHARED=1)."""
    if not PAPER_CLAIMS.exists():
      if os.environ.get('TFF_FLARE_REQUIRE_SHARED') == '1':
        self.fail(f'{PAPER_CLAIMS} is missing.')
      self.skipTest(f'{PAPER_CLAIMS} is missing')
    rows = {}
    for line in PAPER_CLAIMS.read_text().splitlines():
      match = re.match(r'\| ([FM]\d+) \| (.*?) \| (.*) \| (.*?) \|$', line)
      if match:
        rows[match.group(1)] = match.groups()[1:]
    self.assertLen(rows, 16)
    self.assertCountEqual(manifest.SENTENCES, rows)
    for key, sentence in manifest.SENTENCES.items():
      self.assertEqual((sentence.part, sentence.words, sentence.setting), rows[key], key)


if __name__ == '__main__':
  tf.test.main()
