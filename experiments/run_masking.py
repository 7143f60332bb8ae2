r"""Runs the update-masking study's processes side by side on one cell of its grid; resumable.

  python -m experiments.run_masking --source=imagefolder \
      --data_path=../shared/datasets/cifar10_imagefolder.tar.gz --partition=dirichlet \
      --alpha=0.5 --keep_probability=0.5 --rounds=50 --output_dir=runs/masking/dir05

The experiment binary (`experiments/run_experiment.py`, same flags and outputs) with the
masking study's defaults (`docs/masking.md`): the small CNN on CIFAR-10
(`cifar10_masking_cnn`), 100 clients, 10 sampled per round, and the three processes
`mask_none` (FedAvg), `mask_independent` and `mask_synchronized` trained side by side from
one model on the same clients. Every round's CSV row holds, per process, the survival
measurement (`<process>/train/aggregator/survival/...`: R_ind, R_sync, S, S_max, S/S_max, delta norms,
and with --num_mask_draws the empirical variances). Local training: minibatch SGD with
--batch_size (default 32) for --local_epochs epochs, or full batch with --batch_size=0
(--local_epochs full-batch gradient steps). Partitions: --partition=iid | dirichlet
(--alpha) | quantity_skew (--ratio, largest/smallest client). The grid runner is
`experiments/run_masking_grid.py`.
"""

from absl import flags

from experiments import binary
from experiments import config_flags
from experiments import presets
from experiments import run_experiment

# The experiment binary's flags are this one's: its --help lists them.
flags.adopt_module_key_flags(run_experiment)


def set_study_defaults() -> None:
  """The study's values as the flags' defaults (called by `main`, not at import)."""
  config_flags.set_defaults(presets.MASKING_STUDY)


def main(argv):
  return run_experiment.main(argv)


if __name__ == '__main__':
  set_study_defaults()
  binary.run(main)
