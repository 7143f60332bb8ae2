r"""Figures of one or more runs of `run_experiment` (PNG), drawn by `experiments/charts.py`.

For each run directory: test accuracy and test loss against the round, and test accuracy
against the cumulative bytes uploaded by the clients, one line per algorithm.

  python -m experiments.plot runs/cnn3 --output=runs/cnn3.png

With `--seeds`, the directories are seeds of one experiment (the same configuration, another
`--seed`): one figure, test accuracy against the round and against cumulative bytes uploaded,
every seed thin and the mean over seeds bold, and a markdown table of the mean and the range
(min-max over seeds) at `--table_rounds` and, for each pair of algorithms, at how many
evaluations one is above the other in every seed and from which round on it stays so, printed
and written next to the PNG (`.md`).

  python -m experiments.plot --seeds runs/cnn3_seed0 runs/cnn3_seed1 runs/cnn3_seed2 \
      --output=runs/cnn3_seeds.png --title='MNIST CNN, 3 of 10 clients'
"""

import os
import pathlib

from absl import flags

from experiments import binary
from experiments import charts
from experiments import runs
from tff_flare.experiment import run_files
from tff_flare.experiment import config as config_lib
from tff_flare.simulation import files

_OUTPUT = binary.path_flag(flags.DEFINE_string('output', None, 'PNG file to write (required).'))
_SEEDS = flags.DEFINE_bool('seeds', False, 'The directories are seeds of one experiment.')
_TITLE = flags.DEFINE_string('title', None, 'Figure title (with --seeds).')
_TABLE_ROUNDS = flags.DEFINE_list('table_rounds', ['100', '200', '300', '1000'],
                                  'With --seeds: the rounds of the table (those reached).')

# Fields two seeds of one experiment may differ in (besides what a resume may change).
_SEED_FIELDS = ('seed', 'model_seed', 'output_dir', 'rounds', 'eval_every', 'checkpoint_every',
                'execution', 'workers', 'worker_timeout_s', 'client_threads',
                'allow_nonfinite_rounds', 'client_state_storage', 'data_path', 'data_dir')


def check_seeds_of_one_experiment(run_dirs: list[pathlib.Path]) -> None:
  """Raises `binary.BadInput` unless the runs are distinct, their configurations differ in
  the seed or initial model only, and no two record the same seed and model seed (a copy of
  a run is not a second seed; runs without a recorded configuration are compared where they
  have one)."""
  real = [os.path.realpath(d) for d in run_dirs]
  repeated = sorted({str(d) for d, r in zip(run_dirs, real) if real.count(r) > 1})
  if repeated:
    raise binary.BadInput(f'{", ".join(repeated)} given twice: each seed once.')
  recorded = [(d, c) for d in run_dirs if (c := run_files.config(d)) is not None]
  for run_dir, config in recorded[1:]:
    first_dir, first = recorded[0]
    differ = sorted(k for k in set(first) | set(config)
                    if k not in _SEED_FIELDS and first.get(k) != config.get(k))
    if differ:
      raise binary.BadInput(f'{run_dir} is not a seed of the experiment in {first_dir}: they '
                            f'differ in {", ".join(differ)}.')
  seen: dict[tuple, pathlib.Path] = {}
  for run_dir, config in recorded:
    draw = (config.get('seed'), config.get('model_seed'))
    if draw in seen:
      raise binary.BadInput(f'{run_dir} and {seen[draw]} were run with the same seed '
                            f'{draw[0]} and model seed {draw[1]}: one seed twice (a copy?).')
    seen[draw] = run_dir


def main(argv):
  if len(argv) < 2:
    raise binary.BadInput('Give one or more run directories.')
  if not _OUTPUT.value:
    raise binary.BadInput('--output is required.')
  output = pathlib.Path(_OUTPUT.value)
  if output.suffix != '.png' or output.is_dir():
    raise binary.BadInput(f'--output={output} must name a .png file (not a folder); '
                          'with --seeds its table goes beside it as .md.')
  for directory in argv[1:]:
    config_lib.check_path_form(directory, 'Run directory')
  run_dirs = [pathlib.Path(d) for d in argv[1:]]
  try:
    if not _SEEDS.value and flags.FLAGS[_TABLE_ROUNDS.name].present:  # It would change nothing.
      raise binary.BadInput('--table_rounds is the table of --seeds; without it there is none.')
    if _SEEDS.value:
      try:
        rounds = [int(r) for r in _TABLE_ROUNDS.value]
      except ValueError as e:
        raise binary.BadInput(f'--table_rounds takes round numbers: {e}') from e
      if any(r < 0 for r in rounds):
        raise binary.BadInput(f'--table_rounds takes rounds >= 0, got {min(rounds)}.')
      check_seeds_of_one_experiment(run_dirs)
      seeds = [runs.Seed([str(d)], [run_files.curves(d)], {}) for d in run_dirs]
      curves = charts.group_curves(seeds)
      table = charts.seed_table(curves, rounds) + '\n' + charts.seed_orderings(curves)
      charts.plot_seeds(curves, output, _TITLE.value)
      files.write_file(output.with_suffix('.md'), table)
      print(table)
    else:
      charts.plot_runs(run_dirs, output)
  except run_files.RunFileError as e:
    raise binary.BadInput(str(e)) from e
  except OSError as e:
    raise binary.BadInput(f'Cannot write {output}: {e.strerror or e}.') from e
  print(f'wrote {output}')


if __name__ == '__main__':
  binary.run(main)
