"""The results page: the claims, then every figure's section, then the costs, in one file.

`write(figures, claims, results_dir)` draws every figure from its runs (`charts.draw`), judges
the claims (`claims.verdict`) and writes `<results_dir>/README.md`; nothing in the page is typed
by hand but the declarations' words (`experiments/manifest.py`).
"""

import pathlib
from collections.abc import Callable, Sequence

from experiments import charts
from experiments import claims as claims_lib
from experiments import runs as runs_lib
from experiments import schedule
from experiments import spec
from tff_flare.experiment import run_files
from tff_flare.simulation import files

PAGE = 'README.md'
_PAPERS = (('FLARE', 'FLARE (Greidi & Cohen)'), ('Masking', 'Update masking ("How much '
                                                 'regularization survives averaging?")'),
           ('Ours', 'Our own checks'))


def _paper_of(figure: spec.Figure) -> str:
  for key, _ in _PAPERS:
    if figure.paper.startswith(key):
      return key
  return 'Ours'


def _quote(sentence: spec.Sentence) -> str:
  return f'> **{sentence.id}** ({sentence.part}; about: {sentence.setting}): {sentence.words}'


def _claims_section(results: runs_lib.Results, claims: Sequence[spec.Claim]) -> str:
  rows = ['| # | sentence | what the rule asks | verdict | figures |', '|---:|---|---|---|---|']
  details = []
  for number, claim in enumerate(claims, start=1):
    word, tests = claims_lib.verdict(results, claim)
    links = ', '.join(f'[{name}](#{name})' for name in claim.figures)
    rows.append(f'| {number} | {claim.name} | {claim.claim} | **{word}** | {links} |')
    quotes = [_quote(sentence) for sentence in claim.quotes
             ] or ['> Ours: no sentence of the papers; a check of what the runs show.']
    lines = ([f'- runs: {claims_lib.progress_text(results, claim)}; the tests so far:']
             if word == 'in progress' else [])
    lines += [f'- test: {t}' for t in tests]
    lines += [f'- {m.label}: {claims_lib.measure(results, m).text}' for m in claim.shows]
    if claim.note:
      lines.append(f'- {claim.note}')
    details.append(f'**{number}. {claim.name}: {claim.claim}**: {word}.\n\n' +
                   '\n>\n'.join(quotes) + f'\n\nHere: {claim.here}\n\n' + '\n'.join(lines))
  thresholds = ', '.join(f'{name} = {value:g}' for name, value in claims_lib.THRESHOLDS.items())
  return ('## The claims\n\nEach row quotes the sentence it tests (ids as in the papers\' '
          'summaries: F1-F10 FLARE, M1-M6 masking; "ours" rows are checks of our own) and says '
          'where it is tested. Each verdict follows the rule of its row, on finished runs only: '
          '**holds** when every test passes, **partly** when a partial test does, **does not '
          'hold** when neither does; **in progress** while a run the claim reads has not '
          'reached its declared rounds (the tests show the reading so far), **not tested** '
          'without runs (`experiments/claims.py`). A comparative sentence compares FLARE with '
          'the methods it names in every seed, by its final window (the mean of the last '
          f'{claims_lib.WINDOW} evaluations) and by the rounds to a target; "in k of n seeds" '
          'says how many. The papers state no thresholds; ours: '
          f'{thresholds}. One seed is a hint, not an effect.\n\n' + '\n'.join(rows) + '\n\n' +
          '\n\n'.join(details) + '\n')


def _figure_section(figure: spec.Figure, results: runs_lib.Results, folder: pathlib.Path) -> str:
  drawn = charts.draw(figure, results, folder)
  image = (f'![{figure.title}]({figure.name}/{figure.image})\n\n' if figure.image and
           (folder / figure.image).exists() else '')
  count = len(figure.runs)
  own = (f'`python -m experiments.reproduce --figures={figure.name}` ({count} run'
         f'{"s" if count != 1 else ""}; `--dry_run` prints each command)')
  reads = (f'; it also shows runs of {", ".join(sorted({r.split("/")[0] for r in figure.reads}))}'
           if figure.reads else '')
  differs = f'*Setting here:* {figure.differs}\n\n' if figure.differs else ''
  diagnosed = ''.join(f'Diagnostic: {line}.\n\n' for line in charts.diagnostics(results, figure))
  return (f'<a id="{figure.name}"></a>\n### {figure.title}\n\n*{figure.paper}.* '
          f'{figure.reading}\n\n{differs}{image}{drawn}\n{diagnosed}Reproduce: {own}{reads}.\n\n'
          f'Code: {_code_line(figure, results)}.\n')


def _undrawn_section(figure: spec.Figure) -> str:
  """A declared figure no run of which has trained a round: what it is and how to run it."""
  differs = f'*Setting here:* {figure.differs}\n\n' if figure.differs else ''
  count = len(figure.runs)
  return (f'<a id="{figure.name}"></a>\n### {figure.title}\n\n*{figure.paper}.* Not run '
          f'yet.\n\n{differs}Reproduce: `python -m experiments.reproduce '
          f'--figures={figure.name}` ({count} run{"s" if count != 1 else ""}).\n')


def _code_line(figure: spec.Figure, results: runs_lib.Results) -> str:
  """The commits the figure's own runs were made with (`run_files.code`), each with its runs."""
  by_commit: dict[str, list[str]] = {}
  unrecorded = []
  for run in figure.runs:
    path = results.path(f'{figure.name}/{run.name}')
    if not (path / 'config.json').exists():
      continue
    try:
      pieces = run_files.code(path)
    except run_files.RunFileError:
      pieces = []
    if not pieces:
      unrecorded.append(run.name)
    for piece in pieces:
      commit = (piece.get('commit') or 'no git checkout')[:10]
      key = commit + (' with uncommitted changes' if piece.get('dirty') else '')
      by_commit.setdefault(
          key, []).append(run.name +
                          (f' from round {piece["from_round"]}' if piece.get('from_round') else ''))
  parts = [f'`{key}` ({", ".join(names)})' for key, names in by_commit.items()]
  if unrecorded:
    parts.append(f'not recorded ({len(unrecorded)} run{"s" if len(unrecorded) != 1 else ""} '
                 'made before runs recorded their commit)')
  return '; '.join(parts) or 'no runs'


def costs_table(figures: Sequence[spec.Figure], results_dir: pathlib.Path) -> str:
  """One row per figure: runs finished, rounds done / planned, hours done, left and from
  scratch (measured from each run's own rounds, else estimated from runs of the same
  configuration, else unknown)."""
  statuses = schedule.status(figures, results_dir)
  estimates = schedule.costs(statuses)
  rows = [
      '| figure | runs finished | rounds done / planned | hours left | hours from scratch |',
      '|---|---:|---:|---:|---:|'
  ]
  for figure in figures:
    mine = [s for s in statuses if s.figure is figure]
    if not mine:
      continue
    cost = [estimates[(figure.name, s.run.name)] for s in mine]
    label = '' if all(c.measured for c in cost) else ' (estimated)'
    rows.append(f'| [{figure.name}](#{figure.name}) | {sum(s.finished for s in mine)} of '
                f'{len(mine)} | {sum(min(s.done, s.run.rounds) for s in mine):,} / '
                f'{sum(s.run.rounds for s in mine):,} | {schedule.hours(sum(c.left for c in cost))}'
                f' | {schedule.hours(sum(c.from_scratch for c in cost))}{label} |')
  return ('## Costs\n\nOn the machine the runs were made on (one core a run, in-process; the '
          'seconds a round each run measured, `reproduce --list` per run):\n\n' + '\n'.join(rows) +
          '\n')


def write(figures: Sequence[spec.Figure],
          claims: Sequence[spec.Claim],
          results_dir: pathlib.Path,
          log: Callable[[str], object] = print) -> pathlib.Path:
  """Draws every figure with runs, judges the claims and writes the page; returns its path."""
  results_dir = pathlib.Path(results_dir)
  results = runs_lib.Results(results_dir, figures)
  sections = []
  for key, title in _PAPERS:
    parts = []
    for figure in figures:
      if _paper_of(figure) != key:
        continue
      if not any(results.curves(ref) for ref in results.figure_runs(figure.name)):
        log(f'{figure.name}: no run has rounds yet; not drawn')
        parts.append(_undrawn_section(figure))
        continue
      files.check_no_link(results_dir / figure.name, within=results_dir)
      parts.append(_figure_section(figure, results, results_dir / figure.name))
      log(f'{figure.name}: drawn in {results_dir / figure.name}')
    if parts:
      sections.append(f'## {title}\n\n' + '\n'.join(parts))
  page = ('# Results: the papers\' figures and claims\n\nGenerated from the runs in this folder '
          'by `python -m experiments.reproduce --summarize_only`; every number is computed '
          'from the runs\' files. A figure\'s runs are in its folder, one directory a run '
          '(`metrics.csv`, `config.json`, `summary.json`, `command.json`).\n\n' +
          _claims_section(results, claims) + '\n' + '\n'.join(sections) + '\n' +
          costs_table(figures, results_dir))
  path = results_dir / PAGE
  files.write_file(path, page)
  return path
