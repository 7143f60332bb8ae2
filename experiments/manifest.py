"""The papers' figures and tables as runs (`experiments/reproduce.py` runs them).

Every figure is a `figures.Figure`: its runs (the commands, by their flags) and a summary
that makes its PNG, its tables and its section of `experiments/results/README.md` from what
the runs wrote. Runs use the authors' MNIST offline (`../shared/datasets/mnist.npz`, the
Keras arrays) and CIFAR-10 (`../shared/datasets/cifar10_imagefolder.tar.gz`).

Figures (the issue's order of importance):
  fixed_cnn_learning_rate   the fixed CNN's learning rate (FedAvg, FLARE; 4 rates, 50 rounds)
  sparsity_cnn3             accuracy against R (0.0001 ... 0.1 %), CNN 3 of 10, 3 seeds
  initialization_cnn3       3 initial models of the CNN, and the fixed CNN, at R = 0.001 %
  local_epochs_cnn3         E = 4 and 8 at R = 0.001 %, CNN 3 of 10
  class_imbalance_cnn       the CNN on class-imbalanced clients (our definition)
  masking_grid_100rounds    the masking grid's other 8 cells to 100 rounds
  masking_batch_sweep       survival against accuracy from batch 32 to the full batch (IID)
  fc3_1000rounds            the FC, 3 of 10, to the authors' 1,000 rounds (a process per algorithm,
                            one initial model: model seed 0); and R = 0.0001 % to 300
"""

import collections
import csv
import pathlib
import statistics

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments import claims  # pylint: disable=g-bad-import-order,wrong-import-position
from experiments import figures  # pylint: disable=wrong-import-position
from experiments import masking_tables  # pylint: disable=wrong-import-position
from experiments import plot  # pylint: disable=wrong-import-position

MNIST = dict(source='npz', data_path='../shared/datasets/mnist.npz')
CIFAR10 = dict(source='imagefolder', data_path='../shared/datasets/cifar10_imagefolder.tar.gz')
CNN3 = dict(preset='cnn_unavailable_3', **MNIST)
SEEDS = (0, 1, 2)
# The committed runs of `cnn_unavailable_3` at R = 0.001 % (commit c9abb2b; EF21 with the
# dense state was then called `ef21`).
CNN3_SEEDS = {f'seed{s}': f'experiments/results/mnist_cnn_3of10_seeds/seed{s}' for s in SEEDS}
CNN3_1001 = {f'rounds1001_seed{s}': f'experiments/results/mnist_cnn_3of10_seeds/rounds1001_seed{s}'
             for s in (0, 1)}


def _run_curves(figure: figures.Figure, folder: pathlib.Path) -> dict:
  """`{run name: curves}` of the figure's runs with rounds (and its external runs)."""
  result = collections.OrderedDict()
  for run in figure.runs:
    if (folder / run.name / 'metrics.csv').exists():
      result[run.name] = plot.read_run_curves(folder / run.name)
  for name, path in figure.external.items():
    result[name] = plot.read_run_curves(figures.ROOT / path)
  return result


def _cell(values) -> str:
  values = [v for v in values if v is not None]
  if not values:
    return '-'
  if len(values) == 1:
    return f'{values[0]:.4f} (1)'
  return f'{statistics.mean(values):.4f} [{min(values):.4f}, {max(values):.4f}] ({len(values)})'


def _rounds_recorded(run_dir: pathlib.Path) -> int:
  """The last round in a run's committed `metrics.csv` (0 without one)."""
  path = run_dir / 'metrics.csv'
  if not path.exists():
    return 0
  with open(path, newline='') as f:
    return max((int(row['round']) for row in csv.DictReader(f)), default=0)


def _commands(figure: figures.Figure) -> str:
  """Each run's command, with the rounds its metrics hold of those planned (runs go in
  pieces; the command resumes from the run's checkpoints where they are)."""
  lines = [' '.join(['python'] + figures.command(figure, run)[1:]) +
           f'  # {_rounds_recorded(figure.run_dir(figures.ROOT, run))} of {run.rounds} '
           'rounds recorded' for run in figure.runs]
  return ('Commands (`python -m experiments.reproduce --figures=' + figure.name +
          '` runs them, one core each, and resumes the unfinished):\n\n```\n' +
          '\n'.join(lines) + '\n```\n')


# ---------------------------------------------------------------------------------------------
# The fixed CNN's learning rate.

_FIXED_RATES = (0.01, 0.03, 0.1, 0.215)


def _summarize_fixed_rate(figure, folder) -> str:
  runs = _run_curves(figure, folder)
  fig, ax = plt.subplots(figsize=(7, 4.5))
  lines = ['| learning rate | ' + ' | '.join(plot.PAPER_NAMES[a] for a in ('fedavg', 'flare'))
           + ' |', '|---:|---:|---:|']
  for name, curves in runs.items():
    rate = name.split('_', 1)[1]
    cells = []
    for algorithm, style in (('fedavg', '-'), ('flare', '--')):
      curve = curves[algorithm]
      ax.plot(curve['round'], curve['accuracy'], style, label=f'{plot.PAPER_NAMES[algorithm]}, lr {rate}')
      cells.append(f'{curve["accuracy"][-1]:.4f}')
    lines.append(f'| {rate} | ' + ' | '.join(cells) + ' |')
  ax.set_xlabel('round')
  ax.set_ylabel('test accuracy')
  ax.set_title('Fixed CNN (one softmax), 3 of 10 clients: learning rate')
  ax.legend(fontsize=7)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(folder / 'learning_rate.png', dpi=100)
  plt.close(fig)
  table = '\n'.join(lines)
  (folder / 'learning_rate.md').write_text(table + '\n')
  return (f'### {figure.title}\n\nTest accuracy after the last round '
          f'(`learning_rate.png`):\n\n{table}\n\n{_commands(figure)}')


FIXED_CNN_LEARNING_RATE = figures.Figure(
    name='fixed_cnn_learning_rate',
    title='The fixed CNN (no double softmax): which learning rate trains it',
    runs=tuple(figures.Run(f'lr_{rate}', dict(
        CNN3, algorithms='flare,fedavg', seed=0, double_softmax=False, learning_rate=rate),
        rounds=50) for rate in _FIXED_RATES),
    summarize=_summarize_fixed_rate)

# ---------------------------------------------------------------------------------------------
# Accuracy against sparsity.

_SPARSITIES = (0.0001, 0.01, 0.1)  # R = 0.001 % is committed (CNN3_SEEDS, CNN3_1001).


def _sparsity_runs():
  runs = []
  for keep_percent in _SPARSITIES:
    for seed in SEEDS:
      if seed == 0:  # Seed 0 to the authors' 1,001 rounds for FLARE and EC.
        runs.append(figures.Run(f'R{keep_percent}_seed0', dict(
            CNN3, algorithms='flare,ec', seed=0, keep_percent=keep_percent), rounds=1001,
            cost_key=f'flare,ec R{keep_percent}'))
        runs.append(figures.Run(f'R{keep_percent}_seed0_ef21', dict(
            CNN3, algorithms='ef21_dense', seed=0, keep_percent=keep_percent), rounds=300))
      else:
        runs.append(figures.Run(f'R{keep_percent}_seed{seed}', dict(
            CNN3, algorithms='flare,ec,ef21_dense', seed=seed, keep_percent=keep_percent),
            rounds=300))
  return tuple(runs)


def _keep_percent_of(name: str) -> float:
  if name.startswith('R'):
    return float(name[1:].split('_')[0])
  return 0.001


def _summarize_sparsity(figure, folder) -> str:
  runs = _run_curves(figure, folder)
  points = collections.defaultdict(lambda: collections.defaultdict(list))
  fedavg = collections.defaultdict(list)
  for name, curves in runs.items():
    keep_percent = _keep_percent_of(name)
    # The 1,001-round runs repeat seeds of the 300-round ones: they count at round 1,000 only.
    table_rounds = (1000,) if name in CNN3_1001 else (100, 300, 1000)
    for algorithm, curve in curves.items():
      if algorithm == 'fedavg':
        for r in table_rounds:
          if plot.accuracy_at(curve, r) is not None:
            fedavg[r].append(plot.accuracy_at(curve, r))
        continue
      for r in table_rounds:
        if plot.accuracy_at(curve, r) is not None:
          points[(algorithm, r)][keep_percent].append(plot.accuracy_at(curve, r))
  algorithms = ('flare', 'ec', 'ef21_dense')
  fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), sharey=True)
  for ax, r in zip(axes, (100, 300, 1000)):
    for algorithm in algorithms:
      by_r = points.get((algorithm, r), {})
      xs = sorted(by_r)
      if not xs:
        continue
      means = [statistics.mean(by_r[x]) for x in xs]
      color = plot._COLORS.get(algorithm)  # pylint: disable=protected-access
      ax.plot(xs, means, 'o-', color=color, label=plot.PAPER_NAMES[algorithm])
      ax.fill_between(xs, [min(by_r[x]) for x in xs], [max(by_r[x]) for x in xs],
                      color=color, alpha=0.2)
    if fedavg.get(r):
      ax.axhspan(min(fedavg[r]), max(fedavg[r]), color='gray', alpha=0.25,
                 label=f'FedAvg ({len(fedavg[r])} seeds; no R)')
    ax.set_xscale('log')
    ax.set_xlabel('R, % of each tensor sent (log scale)')
    ax.set_title(f'after {r} rounds')
    ax.grid(alpha=0.3)
  axes[0].set_ylabel('test accuracy (mean; band: min-max over seeds)')
  axes[0].legend(fontsize=8)
  fig.suptitle('MNIST CNN, 3 of 10 clients: accuracy against sparsity')
  fig.tight_layout()
  fig.savefig(folder / 'accuracy_vs_sparsity.png', dpi=100)
  plt.close(fig)
  lines = ['| R (%) | algorithm | round 100 | round 300 | round 1000 |',
           '|---:|---|---:|---:|---:|']
  for keep_percent in sorted({k for (_, _), by_r in points.items() for k in by_r}):
    for algorithm in algorithms:
      cells = [_cell(points.get((algorithm, r), {}).get(keep_percent, [])) for r in
               (100, 300, 1000)]
      lines.append(f'| {keep_percent} | {plot.PAPER_NAMES[algorithm]} | ' + ' | '.join(cells) +
                   ' |')
  lines.append('| - | FedAvg | ' + ' | '.join(_cell(fedavg.get(r, [])) for r in (100, 300, 1000))
               + ' |')
  table = '\n'.join(lines)
  (folder / 'accuracy_vs_sparsity.md').write_text(table + '\n')
  return (f'### {figure.title}\n\nTest accuracy, mean [min, max] (seeds), at rounds 100, 300 '
          f'and 1,000 (`accuracy_vs_sparsity.png`; R = 0.001 % from the committed '
          f'`mnist_cnn_3of10_seeds/` runs, FedAvg from their seeds):\n\n{table}\n\n'
          f'{_commands(figure)}')


SPARSITY_CNN3 = figures.Figure(
    name='sparsity_cnn3',
    title='Accuracy against sparsity R: MNIST CNN, 3 of 10 clients',
    runs=_sparsity_runs(), summarize=_summarize_sparsity,
    external=dict(**CNN3_SEEDS, **CNN3_1001))

# Accuracy against sparsity on the fixed CNN (one softmax): R = 0.001 % and FedAvg are the
# initialization figure's `fixed_cnn_seed{s}` runs.
SPARSITY_FIXED_CNN3 = figures.Figure(
    name='sparsity_fixed_cnn3',
    title='Accuracy against sparsity R: the fixed CNN (one softmax), 3 of 10 clients',
    runs=tuple(figures.Run(f'R{keep_percent}_seed{seed}', dict(
        CNN3, algorithms='flare,ec', seed=seed, keep_percent=keep_percent,
        double_softmax=False), rounds=300)
        for seed in SEEDS for keep_percent in (0.1, 0.01, 0.0001)),
    summarize=None)

# How the gap scales with sparsity: a convex model (multinomial logistic regression on MNIST,
# 10 IID clients of 6,000 images, all every round, 10 local steps of 600), evaluated every
# round on the clients' own training examples (the objective they minimise).
SCALING_KEEP_PERCENTS = (10, 3, 1, 0.3, 0.1, 0.03, 0.01, 0.001)
_LOGREG = dict(task='mnist_logreg', **MNIST, eval_data='train', eval_every=1)
SPARSITY_SCALING_LOGREG = figures.Figure(
    name='sparsity_scaling_logreg',
    title='How the gap scales with sparsity: logistic regression on MNIST (convex)',
    runs=tuple(
        [figures.Run(f'fedavg_seed{seed}', dict(_LOGREG, algorithms='fedavg', seed=seed),
                     rounds=300) for seed in SEEDS] +
        [figures.Run(f'R{keep_percent}_seed{seed}', dict(
            _LOGREG, algorithms='flare,ec', seed=seed, keep_percent=keep_percent, tau=0.5,
            tau_decay=1.05), rounds=300)
         for seed in SEEDS for keep_percent in SCALING_KEEP_PERCENTS]),
    summarize=None)

# ---------------------------------------------------------------------------------------------
# Initialization: other initial models of the CNN, and the fixed CNN.

_MODEL_SEEDS = (1, 2, 3)  # 0 is the authors' GlorotNormal(seed=0).


def _summarize_seed_groups(groups: dict, figure, folder, table_rounds) -> str:
  """One seeds figure and table (plot --seeds) per group of runs, over the algorithms every
  run of the group holds (an external run with more, say EF21, adds none). A group is
  `(run names, title)` or `(run names, title, unit)`, `unit` naming what its runs vary
  (default 'seeds': the client stream). A tuple among the run names is one seed made of
  several runs, one algorithm each (same seed, same initial model: their curves are merged;
  the ones with no metrics yet are left out)."""
  runs = _run_curves(figure, folder)
  parts = [f'### {figure.title}\n']
  for group, (names, title, *unit) in groups.items():
    unit = unit[0] if unit else 'seeds'
    seeds = collections.OrderedDict()
    for name in names:
      if isinstance(name, tuple):
        merged = plot.merge_curves(runs.get(part, {}) for part in name)
        if merged:
          seeds[' + '.join(n for n in name if n in runs)] = merged
      elif name in runs:
        seeds[name] = runs[name]
    if not seeds:
      continue
    shared = set.intersection(*(set(curves) for curves in seeds.values()))
    curves = collections.OrderedDict()
    for per_run in seeds.values():
      for algorithm, curve in per_run.items():
        if algorithm in shared:
          curves.setdefault(algorithm, []).append(curve)
    plot.plot_seeds(curves, str(folder / f'{group}.png'), title)
    table = plot.seed_table(curves, table_rounds, unit) + '\n' + plot.seed_orderings(curves)
    (folder / f'{group}.md').write_text(table)
    parts.append(f'**{title}** ({", ".join(seeds)}; `{group}.png`):\n\n{table}')
  parts.append(_commands(figure))
  return '\n'.join(parts)


INITIALIZATION_CNN3 = figures.Figure(
    name='initialization_cnn3',
    title='Initialization: other initial CNNs, and the fixed CNN (R = 0.001 %, 3 of 10)',
    runs=tuple(
        [figures.Run(f'model_seed{m}', dict(CNN3, algorithms='flare,ec,fedavg', seed=0,
                                            model_seed=m), rounds=300) for m in _MODEL_SEEDS] +
        [figures.Run(f'fixed_cnn_seed{s}', dict(CNN3, algorithms='flare,ec,fedavg', seed=s,
                                                double_softmax=False), rounds=300)
         for s in SEEDS]),
    summarize=lambda figure, folder: _summarize_seed_groups(collections.OrderedDict(
        model_seeds=([f'model_seed{m}' for m in _MODEL_SEEDS] + ['seed0'],
                     "CNN, 4 initial models (model seed 0 = the authors'), one client stream",
                     'initial models'),
        fixed_cnn=([f'fixed_cnn_seed{s}' for s in SEEDS],
                   'Fixed CNN (one softmax), 3 client streams')), figure, folder,
        [100, 200, 300]),
    external=dict(seed0=CNN3_SEEDS['seed0']))

# ---------------------------------------------------------------------------------------------
# Local epochs and class imbalance.

# Seeds 1 and 2 (the client streams of `mnist_cnn_3of10_seeds/seed{1,2}`) at E = 4 beside seed 0.
_EPOCH_RUNS = {4: SEEDS, 8: (0,)}

LOCAL_EPOCHS_CNN3 = figures.Figure(
    name='local_epochs_cnn3',
    title='Local epochs E = 1, 4, 8 at R = 0.001 %: MNIST CNN, 3 of 10 clients',
    runs=tuple(figures.Run(f'E{e}_seed{s}', dict(CNN3, algorithms='flare,ec,fedavg', seed=s,
                                                 local_epochs=e), rounds=300)
               for s in SEEDS for e, seeds in _EPOCH_RUNS.items() if s in seeds),
    summarize=lambda figure, folder: _summarize_seed_groups(collections.OrderedDict(
        (f'E{e}', ([f'E{e}_seed{s}' for s in SEEDS], f'E = {e}')) for e in (1, 4, 8)),
        figure, folder, [100, 200, 300]),
    external={f'E1_seed{s}': CNN3_SEEDS[f'seed{s}'] for s in SEEDS})

CLASS_IMBALANCE_CNN = figures.Figure(
    name='class_imbalance_cnn',
    title='Class imbalance (our definition: 80 % one class per client): MNIST CNN, 10 clients',
    runs=tuple(figures.Run(f'seed{s}', dict(preset='cnn_class_imbalance', **MNIST,
                                            algorithms='flare,ec,ef21_dense,fedavg', seed=s),
                           rounds=300) for s in SEEDS),
    summarize=lambda figure, folder: _summarize_seed_groups(collections.OrderedDict(
        curves=([f'seed{s}' for s in SEEDS], 'Class imbalance')), figure, folder,
        [100, 200, 300]))

# ---------------------------------------------------------------------------------------------
# Update masking.

_MASKING = dict(CIFAR10, algorithms='mask_none', eval_every=5, num_mask_draws=2,
                momentum=0.9, keep_probability=0.5, seed=0)
_MINIBATCH = dict(batch_size=32, local_epochs=1, learning_rate=0.02)
_FULLBATCH = dict(batch_size=0, local_epochs=2, learning_rate=0.05)
_DONE_CELLS = ('minibatch_iid', 'minibatch_dir0.1', 'minibatch_qskew100', 'fullbatch_iid')


def _masking_cell(local: str, partition: str) -> figures.Run:
  flags = dict(_MASKING, **(_MINIBATCH if local == 'minibatch' else _FULLBATCH),
               **masking_tables.partition_flags(partition))
  return figures.Run(f'{local}_{partition}', flags, rounds=100,
                     binary='experiments.run_masking')


def _summarize_masking(figure, folder) -> str:
  cells = [folder / run.name for run in figure.runs if (folder / run.name / 'summary.json').exists()]
  cells += [figures.ROOT / path for path in figure.external.values()]
  table = masking_tables.write_table(cells, folder)
  return (f'### {figure.title}\n\n{table}\n`survival_vs_accuracy.png`, `survival_curves.png`; '
          f'the cells already at 100 rounds are those of `masking_100rounds/`.\n\n'
          f'{_commands(figure)}')


MASKING_GRID_100ROUNDS = figures.Figure(
    name='masking_grid_100rounds',
    title='Update masking, the whole grid at 100 rounds (mask_none: S measured on the deltas)',
    runs=tuple(_masking_cell(local, partition)
               for local in ('minibatch', 'fullbatch')
               for partition in ('iid', 'dir100', 'dir1', 'dir0.5', 'dir0.1', 'qskew100')
               if f'{local}_{partition}' not in _DONE_CELLS),
    summarize=_summarize_masking,
    external={cell: f'experiments/results/masking_100rounds/cells/{cell}' for cell in _DONE_CELLS})

MASKING_BATCH_SWEEP = figures.Figure(
    name='masking_batch_sweep',
    title='Update masking on IID data: batch 32 to the full batch (one epoch, lr 0.02)',
    runs=tuple(figures.Run(f'batch{batch}', dict(_MASKING, batch_size=batch, local_epochs=1,
                                                  learning_rate=0.02, partition='iid'),
                           rounds=100, binary='experiments.run_masking')
               for batch in (32, 64, 128, 256, 0)),
    summarize=_summarize_masking)

# ---------------------------------------------------------------------------------------------
# The FC to 1,000 rounds.

# One process per algorithm, all from one initial model (model seed 0; the authors' FC is
# unseeded, so separate processes would otherwise start from different models): the four
# runs go on two cores at once, and each can be finished in a session of its own.
_FC3_ALGORITHMS = ('flare', 'ec', 'ef21_dense', 'fedavg')
_FC3_R0_001 = tuple(f'R0.001_model_seed0_{a}' for a in _FC3_ALGORITHMS)
# A checkpoint of an FC run (1.4 GB of client states beside the 139 MB model) takes seconds:
# EF21 and FedAvg, run after FLARE and EC, write one every 50 rounds (the numbers are the same:
# resuming is exact, tests/experiment/test_runner.py).
_FC3_CHECKPOINTS = {'ef21_dense': dict(checkpoint_every=50), 'fedavg': dict(checkpoint_every=50)}

FC3_1000ROUNDS = figures.Figure(
    name='fc3_1000rounds',
    title='MNIST FC, 3 of 10 clients: to the authors\' 1,000 rounds, and R = 0.0001 %',
    runs=tuple(figures.Run(name, dict(preset='fc_unavailable_3', **MNIST, algorithms=algorithm,
                                      seed=0, model_seed=0, **_FC3_CHECKPOINTS.get(algorithm, {})),
                           rounds=1001)
               for name, algorithm in zip(_FC3_R0_001, _FC3_ALGORITHMS)) +
         (figures.Run('R0.0001', dict(preset='fc_unavailable_3', **MNIST,
                                      algorithms='flare,ec,ef21_dense', seed=0,
                                      keep_percent=0.0001, client_state_storage='disk'),
                      rounds=300),),
    summarize=lambda figure, folder: _summarize_seed_groups(collections.OrderedDict(
        R0_001=([_FC3_R0_001], 'FC, R = 0.001 %, model seed 0, one process per algorithm'),
        R0_001_unseeded=(['R0.001_unseeded'], 'FC, R = 0.001 %, unseeded initial model, '
                         'the four algorithms in one process (stopped at round 450)'),
        R0_0001=(['R0.0001'], 'FC, R = 0.0001 %')),
        figure, folder, [100, 200, 300, 400, 500, 700, 1000]),
    external={'R0.001_unseeded': 'experiments/results/fc3_1000rounds/R0.001_unseeded'})

# ---------------------------------------------------------------------------------------------
# The figures committed before this manifest, regenerated from their committed runs (made by
# the commands in their folders' READMEs; `reproduce` does not run them again).


def _seed_figure(folder: pathlib.Path, out: str, title: str, runs: dict, table_rounds,
                 rename=None) -> str:
  curves = collections.OrderedDict()
  for path in runs.values():
    for algorithm, curve in plot.read_run_curves(figures.ROOT / path, rename).items():
      curves.setdefault(algorithm, []).append(curve)
  plot.plot_seeds(curves, str(folder / f'{out}.png'), title)
  table = plot.seed_table(curves, table_rounds) + '\n' + plot.seed_orderings(curves)
  (folder / f'{out}.md').write_text(table)
  return table


def _committed_seeds(name, title, groups):
  """A figure of committed seed runs: `groups` = {output: (title, runs, rounds, rename)}."""

  def summarize(figure, folder):
    parts = [f'### {figure.title}\n', 'Regenerated from the committed runs (their commands: '
             f'`{figure.name}/README.md`):\n']
    for out, (group_title, runs, rounds, rename) in groups.items():
      table = _seed_figure(folder, out, group_title, runs, rounds, rename)
      parts.append(f'**{group_title}** (`{out}.png`):\n\n{table}')
    return '\n'.join(parts)

  every = {f'{out}/{k}': v for out, (_, runs, _, _) in groups.items() for k, v in runs.items()}
  return figures.Figure(name=name, title=title, runs=(), summarize=summarize, external=every)


_RESULTS = 'experiments/results'
MNIST_CNN_3OF10_SEEDS = _committed_seeds(
    'mnist_cnn_3of10_seeds', 'MNIST CNN, 3 of 10 clients: seeds (committed)', {
        'seeds_300': ('MNIST CNN, 3 of 10 clients a round', CNN3_SEEDS,
                      [50, 100, 150, 200, 250, 300], None),
        'seeds_1001': ('MNIST CNN, 3 of 10 clients a round, to 1,000 rounds', CNN3_1001,
                       [100, 200, 300, 500, 700, 900, 1000], None),
        'ef21_as_defined': ('EF21 as defined (sparse corrections, the server mean over all '
                            'clients), 3 of 10 clients',
                            {f'ef21_as_defined_seed{s}':
                             f'{_RESULTS}/mnist_cnn_3of10_seeds/ef21_as_defined_seed{s}'
                             for s in SEEDS}, [100, 200, 300], {}),
    })
MNIST_CNN_5OF10_SEEDS, MNIST_CNN_7OF10_SEEDS = (_committed_seeds(
    f'mnist_cnn_{m}of10_seeds', f'MNIST CNN, {m} of 10 clients: seeds (committed)', {
        'seeds': (f'MNIST CNN, {m} of 10 clients a round',
                  {f'seed{s}': f'{_RESULTS}/mnist_cnn_{m}of10_seeds/seed{s}' for s in SEEDS},
                  rounds, None)}) for m, rounds in ((5, [50, 100, 150, 200]),
                                                    (7, [50, 100, 150])))


def _committed_grid(name, title, cells):
  def summarize(figure, folder):
    table = masking_tables.write_table([figures.ROOT / p for p in figure.external.values()],
                                       folder)
    return (f'### {figure.title}\n\nRegenerated from the committed cells (their commands: '
            f'`{figure.name}/README.md`):\n\n{table}')

  return figures.Figure(name=name, title=title, runs=(), summarize=summarize,
                        external={c: f'{_RESULTS}/{name}/cells/{c}' for c in cells})


MASKING_GRID = _committed_grid(
    'masking', 'Update masking, the whole grid at 8 (minibatch) / 5 (full batch) rounds '
    '(committed)', [f'{local}_{partition}' for local in ('minibatch', 'fullbatch')
                    for partition in ('iid', 'dir100', 'dir1', 'dir0.5', 'dir0.1',
                                      'qskew100')])
MASKING_100ROUNDS = _committed_grid(
    'masking_100rounds', 'Update masking, four cells at 100 rounds (committed)', _DONE_CELLS)

# The claims table of the results page, computed from the runs above (`experiments/claims.py`).
CLAIMS = figures.Figure(name='claims', title="The papers' claims", runs=(),
                        summarize=claims.summarize, external=claims.EXTERNAL,
                        directory=str(figures.RESULTS))

FIGURES = (CLAIMS, FIXED_CNN_LEARNING_RATE, SPARSITY_CNN3, SPARSITY_FIXED_CNN3, SPARSITY_SCALING_LOGREG, INITIALIZATION_CNN3, LOCAL_EPOCHS_CNN3,
           CLASS_IMBALANCE_CNN, MASKING_GRID_100ROUNDS, MASKING_BATCH_SWEEP, FC3_1000ROUNDS,
           MNIST_CNN_3OF10_SEEDS, MNIST_CNN_5OF10_SEEDS, MNIST_CNN_7OF10_SEEDS, MASKING_GRID,
           MASKING_100ROUNDS)
