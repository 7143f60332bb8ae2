r"""The papers' figures and tables, one command each (`experiments/manifest.py`).

  python -m experiments.reproduce --list                        # every figure and its status
  python -m experiments.reproduce --figures=sparsity_cnn3 --jobs=2
  python -m experiments.reproduce --figures=sparsity_cnn3 --shard=0/4   # one of 4 machines
  python -m experiments.reproduce --figures=sparsity_cnn3 --dry_run     # print the commands
  python -m experiments.reproduce --summarize_only              # figures, tables, README

Each figure's unfinished runs run `--jobs` at a time, one core each (in-process, one client
thread); finished runs are skipped and interrupted ones resume (`experiments/figures.py`).
`--shard=i/n` keeps every n-th run of the selected figures from the i-th (0 <= i < n), so a
Slurm job array (`--shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`) or a Kubernetes
indexed Job (`--shard=$JOB_COMPLETION_INDEX/N`) spreads a figure over machines; each shard
summarizes what its machine has, and a last `--summarize_only` over the merged results
directories makes the figures. Then every selected figure's PNG, tables and section of
`experiments/results/README.md` are regenerated from its runs' committed files.

Exit status: 0 done; 2 bad flags, an unknown figure, or a run directory holding a run made
with other flags; 1 a run failed (its `log.txt` says why); 130 interrupted (the same
command resumes).
"""

import signal
import sys

from absl import flags

from experiments import binary
from experiments import figures as figures_lib
from experiments import manifest

_FIGURES = flags.DEFINE_list('figures', [], 'Figures to run (default: all).')
_LIST = flags.DEFINE_bool('list', False, 'Print every figure, its runs and their status.')
_JOBS = flags.DEFINE_integer('jobs', 1, 'Runs at a time, one core each.', lower_bound=1)
_SHARD = flags.DEFINE_string('shard', None, 'i/n: every n-th run from the i-th (0 <= i < n).')
_DRY_RUN = flags.DEFINE_bool('dry_run', False, 'Print the commands of the unfinished runs.')
_UNTIL_ROUND = flags.DEFINE_integer(
    'until_round', None, 'Run in pieces: take every run only up to this round this time (a '
    'later call without it, or with more, goes on from its checkpoint).', lower_bound=1)
_SUMMARIZE_ONLY = flags.DEFINE_bool('summarize_only', False,
                                    'Only regenerate the figures, tables and README sections.')


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  # Ctrl-C as KeyboardInterrupt, so that the runs started here are stopped (each resumes).
  signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    selected = figures_lib.select(manifest.FIGURES, _FIGURES.value)
    shard = figures_lib.parse_shard(_SHARD.value)
  except figures_lib.ReproduceError as e:
    raise binary.BadInput(str(e)) from e
  if _LIST.value:
    print(figures_lib.format_list(selected))
    return 0
  runs = figures_lib.shard_runs(selected, shard)
  if _DRY_RUN.value:
    for figure, run in runs:
      done = figures_lib.rounds_done(figure.run_dir(figures_lib.ROOT, run))
      if done < min(run.rounds, _UNTIL_ROUND.value or run.rounds):
        command = figures_lib.command(figure, run, until_round=_UNTIL_ROUND.value)
        print(' '.join(['python'] + command[1:]) + f'   # {done} of {run.rounds} rounds done')
    return 0
  status = 0
  if not _SUMMARIZE_ONLY.value:
    try:
      status = figures_lib.execute(runs, _JOBS.value, until_round=_UNTIL_ROUND.value)
    except figures_lib.ReproduceError as e:
      raise binary.BadInput(str(e)) from e
    except KeyboardInterrupt:
      print('Interrupted; the same command resumes.', file=sys.stderr, flush=True)
      return binary.INTERRUPTED
  figures_lib.summarize(selected)
  return status


if __name__ == '__main__':
  binary.run(main)
