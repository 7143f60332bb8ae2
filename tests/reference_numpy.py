"""Numpy re-statements of the authors' rules (`docs/faithfulness.md`) for hand computations."""

import numpy as np


def authors_topk(x: np.ndarray, keep_percent: float) -> np.ndarray:
  """Spec §1.1 written out: keep |x| > the k'-th largest |x|, k' = rne(n R / 100) + 2."""
  n = x.size
  k = np.float32(keep_percent) / np.float32(100) * np.float32(n)
  cut_rank = int(np.round(k)) + 2
  threshold = np.sort(np.abs(x).ravel())[::-1][cut_rank - 1]
  return np.where(np.abs(x) > threshold, x, 0).astype(x.dtype)


def percentile_mask(a: np.ndarray, t: float) -> np.ndarray:
  """Spec §3.3: 1[|a| > sort(|a|)[rne((n-1) t / 100)]]."""
  magnitudes = np.sort(np.abs(a).ravel())
  index = int(np.clip(np.round((a.size - 1) * t / 100.0), 0, a.size - 1))
  return (np.abs(a) > magnitudes[index]).astype(a.dtype)


def mse_gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """Gradient of mean((x @ w - y)^2) over the batch, w of shape [d, 1]."""
  return (2.0 / len(y)) * x.T @ (x @ w - y)


def flare_client_round(server, accumulator, batches, *, learning_rate, momentum, tau_r,
                       reg_steps, restart, keep_percent, mask_percentile=50.0):
  """One FLARE client round on the linear-regression model; returns (message, accumulator).

  Steps k = 0, 1, ...: the first `reg_steps` add tau_r * m * sign(w - (s + a)) to the
  gradient; with `restart` the momentum is zeroed before step `reg_steps` (the two-model
  switch). SGD with momentum: v <- mu v + g, w <- w - lr v.
  """
  mask = percentile_mask(accumulator, mask_percentile)
  target = server + accumulator
  w = server.copy()
  velocity = np.zeros_like(w)
  for k, (x, y) in enumerate(batches):
    g = mse_gradient(w, x, y)
    if k < reg_steps:
      g = g + tau_r * mask * np.sign(w - target)
    if restart and k == reg_steps:
      velocity = np.zeros_like(w)
    velocity = momentum * velocity + g
    w = w - learning_rate * velocity
  corrected = (w - server) + accumulator
  message = authors_topk(corrected, keep_percent)
  return message, corrected - message


def survival(deltas, weights) -> float:
  """MASKING_SPEC's S = |sum p_k d_k|^2 / sum p_k^2 |d_k|^2 for flat deltas, p = w / sum w."""
  p = np.asarray(weights, np.float64) / np.sum(weights)
  deltas = [np.asarray(d, np.float64).ravel() for d in deltas]
  mean = sum(pk * d for pk, d in zip(p, deltas))
  return float(mean @ mean / sum(pk**2 * (d @ d) for pk, d in zip(p, deltas)))
