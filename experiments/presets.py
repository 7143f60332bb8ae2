"""The authors' experiment configurations (`docs/faithfulness.md` R14) as named presets.

A preset is a dict of `ExperimentConfig` fields; flags given explicitly override it. Names:
`<folder>_<row>` for the rows the authors' drivers ran, e.g. `cnn_r0` is CNN/main.py row 0.
Every row runs all five of the authors' algorithms (EF21 as they ran it, with the dense
state: `ef21_dense`) plus TFF's FedAvg.
"""

import types

from tff_flare.experiment import config as config_lib

ALL_ALGORITHMS = ('flare', 'ec', 'ef21_dense', 'ec_fedprox', 'fedavg', 'tff_fedavg')


def _row(task, rounds, keep_percent, epochs, tau, tau_decay, **extra):
  return types.MappingProxyType(
      dict(task=task,
           rounds=rounds,
           keep_percent=keep_percent,
           local_epochs=epochs,
           tau=tau,
           tau_decay=tau_decay,
           mask_percentile=50.0,
           algorithms=ALL_ALGORITHMS,
           **extra))


PRESETS = {
    # toy_FC_demo/main.py and FC/main.py, row 0.
    'fc_r0':
        _row('mnist_fc', 1001, 0.001, 1, 0.5, 1.05),
    # FC/main.py rows 1-7 (in its table, not run by the authors): E = 8, 16, 32 at R = 0.001,
    # then E = 1, 4, 8, 16 at R = 0.0001. Row 8 (TAU 0, c 0) is left out: c = 0 divides by 0.
    'fc_r1':
        _row('mnist_fc', 1001, 0.001, 8, 0.5, 1.05),
    'fc_r2':
        _row('mnist_fc', 1001, 0.001, 16, 0.5, 1.05),
    'fc_r3':
        _row('mnist_fc', 1001, 0.001, 32, 0.5, 1.05),
    'fc_r4':
        _row('mnist_fc', 1001, 0.0001, 1, 0.5, 1.05),
    'fc_r5':
        _row('mnist_fc', 1001, 0.0001, 4, 0.5, 1.005),
    'fc_r6':
        _row('mnist_fc', 1001, 0.0001, 8, 0.5, 1.005),
    'fc_r7':
        _row('mnist_fc', 1001, 0.0001, 16, 0.5, 1.005),
    # CNN/main.py rows 0-3 (E = 1, 4, 8, 16), and row 4 (E = 32, R = 0.01; in the table, not run).
    'cnn_r4':
        _row('mnist_cnn', 501, 0.01, 32, 0.05, 1.1),
    'cnn_r0':
        _row('mnist_cnn', 1001, 0.001, 1, 0.05, 1.1),
    'cnn_r1':
        _row('mnist_cnn', 501, 0.001, 4, 0.05, 1.1),
    'cnn_r2':
        _row('mnist_cnn', 501, 0.001, 8, 0.05, 1.1),
    'cnn_r3':
        _row('mnist_cnn', 501, 0.001, 16, 0.05, 1.1),
    # CNN/main_001.py rows 0-7 (R = 0.01 then 0.1; E = 1, 4, 8, 16).
    'cnn001_r0':
        _row('mnist_cnn', 1001, 0.01, 1, 0.05, 1.1),
    'cnn001_r1':
        _row('mnist_cnn', 501, 0.01, 4, 0.05, 1.1),
    'cnn001_r2':
        _row('mnist_cnn', 501, 0.01, 8, 0.05, 1.1),
    'cnn001_r3':
        _row('mnist_cnn', 501, 0.01, 16, 0.05, 1.1),
    'cnn001_r4':
        _row('mnist_cnn', 1001, 0.1, 1, 0.05, 1.1),
    'cnn001_r5':
        _row('mnist_cnn', 501, 0.1, 4, 0.05, 1.1),
    'cnn001_r6':
        _row('mnist_cnn', 501, 0.1, 8, 0.05, 1.1),
    'cnn001_r7':
        _row('mnist_cnn', 501, 0.1, 16, 0.05, 1.1),
    # Client unavailability: 7, 5 or 3 of the 10 clients work each round.
    'fc_unavailable_7':
        _row('mnist_fc', 1001, 0.001, 1, 0.5, 1.05, clients_per_round=7),
    'fc_unavailable_5':
        _row('mnist_fc', 1001, 0.001, 1, 0.5, 1.05, clients_per_round=5),
    'fc_unavailable_3':
        _row('mnist_fc', 1001, 0.001, 1, 0.5, 1.05, clients_per_round=3),
    'cnn_unavailable_7':
        _row('mnist_cnn', 1001, 0.001, 1, 0.05, 1.1, clients_per_round=7),
    'cnn_unavailable_5':
        _row('mnist_cnn', 1001, 0.001, 1, 0.05, 1.1, clients_per_round=5),
    'cnn_unavailable_3':
        _row('mnist_cnn', 1001, 0.001, 1, 0.05, 1.1, clients_per_round=3),
    # VGG_11_16_19 (HEAD selects VGG19; the Dec-2023 version VGG11), row 0; p = 5.
    'vgg19_cifar10_r0':
        _row('cifar10_vgg19', 10001, 0.001, 1, 0.05, 1.01),
    'vgg16_cifar10_r0':
        _row('cifar10_vgg16', 10001, 0.001, 1, 0.05, 1.01),
    'vgg11_cifar10_r0':
        _row('cifar10_vgg11', 10001, 0.001, 1, 0.05, 1.01),
    'vgg19_cifar100_r0':
        _row('cifar100_vgg19', 100000, 0.001, 1, 0.05, 1.01, eval_every=50),
    'vgg11_cifar100_r0':
        _row('cifar100_vgg11', 100000, 0.001, 1, 0.05, 1.01, eval_every=50),
    # GRU/main.py rows 0-2 and main_machine1.py.
    'gru_r0':
        _row('shakespeare_gru', 401, 0.001, 1, 0.05, 1.01),
    'gru_r1':
        _row('shakespeare_gru', 401, 0.001, 1, 0.05, 1.001),
    'gru_r2':
        _row('shakespeare_gru', 401, 0.001, 1, 0.05, 1.01),
    'gru_machine1':
        _row('shakespeare_gru', 3001, 0.001, 1, 0.01, 1.01),
    # Class imbalance (our definition of the setting; see partitions.class_imbalance).
    'cnn_class_imbalance':
        _row('mnist_cnn', 1001, 0.001, 1, 0.05, 1.1, partition='class_imbalance'),
}

# The update-masking study (docs/masking.md): the three mask modes side by side on the small
# CNN, CIFAR-10, 100 clients, 10 per round. Used by experiments/run_masking*.py.
MASKING_STUDY = types.MappingProxyType(
    dict(
        task='cifar10_masking_cnn',
        algorithms=('mask_none', 'mask_independent', 'mask_synchronized'),
        total_clients=100,
        num_clients=100,
        clients_per_round=10,
        partition='iid',
        keep_probability=0.5,
        num_mask_draws=4,
        eval_every=5,
        checkpoint_every=5,
    ))


def describe(name: str) -> str:
  """One line on a preset: its task, R, E, clients a round, rounds, TAU, c, algorithms."""
  row = PRESETS[name]
  per_round = row.get('clients_per_round')
  return (f'{name}: {row["task"]}, R = {row["keep_percent"]} %, E = {row["local_epochs"]}, '
          f'{f"{per_round} clients a round, " if per_round else ""}{row["rounds"]} rounds, '
          f'TAU {row["tau"]}, c {row["tau_decay"]}' +
          (f', partition {row["partition"]}' if 'partition' in row else ''))


def config_from_preset(name: str, output_dir: str, **overrides) -> config_lib.ExperimentConfig:
  """The preset's configuration with `overrides` (explicit flags) applied.

  Raises:
    config_lib.ConfigError: an unknown preset (listing the known ones).
  """
  if name not in PRESETS:
    raise config_lib.ConfigError(f'Unknown preset {name!r}; known presets: '
                                 f'{", ".join(sorted(PRESETS))}.')
  values = dict(PRESETS[name])
  values.update(overrides)
  return config_lib.ExperimentConfig(output_dir=output_dir, **values)
