"""scikit-learn's 8x8 handwritten digits as federated client data (the embedded demo task).

1,797 real digit images ship inside scikit-learn (`sklearn.datasets.load_digits`), so the
demo needs no download. They are shuffled with a fixed seed and the last `test_fraction` held
out; the task registry cuts the rest into clients as it does every image task (by default
`num_clients` contiguous, equal slices: the authors' split, `docs/faithfulness.md` R11).
Pixels are scaled from [0, 16] to [0, 1].
"""

import numpy as np

FEATURE_SHAPE = (64,)


def load_arrays(seed: int = 0, test_fraction: float = 0.2):
  """Returns `(x_train, y_train, x_test, y_test)`: float32 [N, 64] in [0, 1], int32 [N, 1]."""
  from sklearn import datasets  # pylint: disable=g-import-not-at-top
  digits = datasets.load_digits()
  order = np.random.default_rng(seed).permutation(len(digits.target))
  x = (digits.data[order] / 16.0).astype(np.float32)
  y = digits.target[order].astype(np.int32)[:, None]
  num_test = int(round(test_fraction * len(y)))
  return x[:-num_test], y[:-num_test], x[-num_test:], y[-num_test:]
