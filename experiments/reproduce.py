r"""The papers' figures and claims, remade from their runs (`experiments/manifest.py`).

  python -m experiments.reproduce --list                     # every figure, its runs, costs
  python -m experiments.reproduce --figures=sparsity_cnn3 --jobs=2
  python -m experiments.reproduce --figures=sparsity_cnn3 --dry_run    # print the commands
  python -m experiments.reproduce --figures=sparsity_cnn3 --results_dir=/tmp/mine
  python -m experiments.reproduce --summarize_only           # the figures and the results page

A figure's runs (its own, and those of other figures it shows) run `--jobs` at a time, one
core each (in-process, one client thread); finished runs are skipped and interrupted ones
resume (`experiments/schedule.py`).
Results go to `--results_dir` (default: the committed results, `experiments/results/`): a
fresh folder remakes a figure from scratch without touching the repository's files. The runs
read their data from `--data_dir`. `--shard=i/n` keeps every n-th run of the selected figures
from the i-th (0 <= i < n), so a Slurm job array
(`--shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`) or a Kubernetes indexed Job spreads
a figure over machines; a last `--summarize_only` over the merged results directories makes
the figures. Then every figure with runs is drawn and the results page (`README.md` in the
results directory: the claims, every figure, the costs) is written again.

Exit status: 0 done; 2 bad flags, an unknown figure, or a run directory holding a run made
with other flags; 1 a run failed (its `log.txt` says why); 130 interrupted (the same command
resumes).
"""

import math
import pathlib
import signal
import sys

from absl import flags

from experiments import binary
from experiments import manifest
from experiments import optimum
from experiments import report
from experiments import schedule
from experiments import spec
from tff_flare.experiment import run_files
from tff_flare.tasks import data_sources

_FIGURES = flags.DEFINE_list('figures', [], 'Figures to run (default: all; --list names them).')
_RESULTS_DIR = binary.path_flag(
    flags.DEFINE_string(
        'results_dir', str(schedule.RESULTS), 'Where the runs and figures go (a fresh folder '
        'remakes them from scratch).'))
_DATA_DIR = binary.path_flag(
    flags.DEFINE_string(
        'data_dir', binary.DEFAULT_DATA_DIR, 'The data directory the runs read (`python -m '
        'experiments.get_data` fills it).'))
_LIST = flags.DEFINE_bool('list', False, 'Print every figure, its runs, their status and costs.')
_JOBS = flags.DEFINE_integer('jobs',
                             1,
                             'Runs at a time, one core each.',
                             lower_bound=1,
                             upper_bound=1024)
_SHARD = flags.DEFINE_string('shard', None, 'i/n: every n-th run from the i-th (0 <= i < n).')
_DRY_RUN = flags.DEFINE_bool(
    'dry_run', False, 'Print the command of every run of the '
    'selected figures (and the rounds each has done).')
_UNTIL_ROUND = flags.DEFINE_integer(
    'until_round',
    None, 'Run in pieces: take every run only up to this round this time (a '
    'later call without it, or with more, goes on from its checkpoint).',
    lower_bound=1,
    upper_bound=2**31 - 1)
_MEMORY_BUDGET = flags.DEFINE_float(
    'memory_budget_gib',
    None, 'GiB the runs may use together (default: what this process '
    "may use: its cgroup's limit, else the machine's available memory); a run is started "
    'beside others only when their peaks fit together.',
    lower_bound=0.001,
    upper_bound=2**20)
flags.register_validator('memory_budget_gib', lambda v: v is None or math.isfinite(v),
                         '--memory_budget_gib must be a finite number of GiB.')
_SUMMARIZE_ONLY = flags.DEFINE_bool('summarize_only', False,
                                    'Only draw the figures and write the results page.')


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  # Ctrl-C as KeyboardInterrupt, so that the runs started here are stopped (each resumes).
  signal.signal(signal.SIGINT, signal.default_int_handler)
  results = pathlib.Path(_RESULTS_DIR.value)
  if not flags.FLAGS['results_dir'].present and not results.is_dir():
    results = schedule.REPOSITORY / schedule.RESULTS  # Run from elsewhere: the committed ones.
  if results.exists() and not results.is_dir():
    raise binary.BadInput(f'--results_dir={results} is not a directory.')
  if _SUMMARIZE_ONLY.value and not results.is_dir():
    raise binary.BadInput(f'--results_dir={results} does not exist: no runs to summarize.')
  try:
    selected = schedule.select(manifest.FIGURES, _FIGURES.value)
    shard = schedule.parse_shard(_SHARD.value)
  except schedule.ReproduceError as e:
    raise binary.BadInput(str(e)) from e
  if _LIST.value:
    print(schedule.format_list(selected, results))
    return 0
  try:
    runs = schedule.shard_runs(schedule.runs_shown(selected, manifest.FIGURES), shard)
  except schedule.ReproduceError as e:
    raise binary.BadInput(str(e)) from e
  if _DRY_RUN.value:
    for figure, run in runs:
      run_dir = results / figure.name / run.name
      command = schedule.command(run, run_dir, _DATA_DIR.value, until_round=_UNTIL_ROUND.value)
      print(f'{schedule.printable(command)}   # {run_files.rounds_done(run_dir)} of '
            f'{run.rounds} rounds done')
    return 0
  status = 0
  if not _SUMMARIZE_ONLY.value:
    try:
      status = schedule.execute(runs,
                                results,
                                _DATA_DIR.value,
                                _JOBS.value,
                                until_round=_UNTIL_ROUND.value,
                                memory_budget_gib=_MEMORY_BUDGET.value)
    except schedule.ReproduceError as e:
      raise binary.BadInput(str(e)) from e
    except KeyboardInterrupt:
      print('Interrupted; the same command resumes.', file=sys.stderr, flush=True)
      return binary.INTERRUPTED
    for figure in selected:  # f* of a convex study, once its data is there.
      folder = results / figure.name
      if optimum.needs_optimum(figure) and not (folder / spec.OPTIMUM_FILE).exists():
        print(f'{figure.name}: f* by full-batch L-BFGS ...', flush=True)
        try:
          found = optimum.write_optimum(figure, folder, _DATA_DIR.value)
        except (ValueError, data_sources.DataSourceError) as e:
          raise binary.BadInput(f'f* of {figure.name}: {binary.one_line(e)}') from e
        print(
            f'{figure.name}: f* = {found["f_star"]:.6f} ({found["iterations"]} iterations, '
            f'{found["seconds"]} s)',
            flush=True)
  path = report.write(manifest.FIGURES, manifest.CLAIMS, results)
  print(f'The results page: {path}')
  return status


if __name__ == '__main__':
  binary.run(main)
