"""Numpy re-statements of the authors' rules (`docs/faithfulness.md`) for hand computations."""

import numpy as np


def authors_topk(x: np.ndarray, keep_percent: float) -> np.ndarray:
  """Spec §1.1 written out: keep |x| > the k'-th largest |x|, k' = rne(n R / 100) + 2."""
  n = x.size
  k = np.float32(keep_percent) / np.float32(100) * np.float32(n)
  cut_rank = int(np.round(k)) + 2
  threshold = np.sort(np.abs(x).ravel())[::-1][cut_rank - 1]
  return np.where(np.abs(x) > threshold, x, 0).astype(x.dtype)


def global_topk(tensors: list[np.ndarray], keep_percent: float) -> list[np.ndarray]:
  """One top-k over all entries of `tensors`: the k = max(1, rne(R/100 d)) largest |x| of the
  d entries kept (a stable sort: ties go to the earlier entry), the rest zero."""
  flat = np.concatenate([t.ravel() for t in tensors])
  k = max(1, int(np.round(keep_percent / 100.0 * flat.size)))
  keep = np.argsort(-np.abs(flat), kind='stable')[:k]
  sent = np.zeros_like(flat)
  sent[keep] = flat[keep]
  return [
      piece.reshape(t.shape)
      for piece, t in zip(np.split(sent,
                                   np.cumsum([t.size for t in tensors])[:-1]), tensors)
  ]


def percentile_mask(a: np.ndarray, t: float) -> np.ndarray:
  """Spec §3.3: 1[|a| > sort(|a|)[rne((n-1) t / 100)]]."""
  magnitudes = np.sort(np.abs(a).ravel())
  index = int(np.clip(np.round((a.size - 1) * t / 100.0), 0, a.size - 1))
  return (np.abs(a) > magnitudes[index]).astype(a.dtype)


def mse_gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """Gradient of mean((x @ w - y)^2) over the batch, w of shape [d, 1]."""
  return (2.0 / len(y)) * x.T @ (x @ w - y)


def flare_client_round(server,
                       accumulator,
                       batches,
                       *,
                       learning_rate,
                       momentum,
                       tau_r,
                       reg_steps,
                       restart,
                       keep_percent,
                       mask_percentile=50.0):
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


# --- Whole rounds of every algorithm on a one-layer softmax classifier --------------------
# (tiny_models.softmax_model_fn: logits = x W + b, sparse cross-entropy from logits, a
# [features, classes] kernel and a [classes] bias), written out from the spec, for the
# hand computations of tests/algorithms/: two or more rounds, clients that sit out.


def softmax_gradients(weights, x, y):
  """Gradients of the batch-mean cross-entropy of softmax(x W + b) for labels y [B, 1]."""
  kernel, bias = weights
  logits = x.astype(np.float64) @ kernel + bias
  logits -= logits.max(axis=1, keepdims=True)
  p = np.exp(logits)
  p /= p.sum(axis=1, keepdims=True)
  p[np.arange(len(y)), y[:, 0]] -= 1.0
  p /= len(y)
  return [x.T @ p, p.sum(axis=0)]


def local_delta(server,
                batches,
                *,
                learning_rate,
                momentum,
                penalty=None,
                penalized_steps=None,
                restart=False):
  """`w - s` after one step per batch, SGD with momentum (TFF's: v <- mu v + g, w <- w - lr v).

  `penalty(w) -> [gradients]` is added on the first `penalized_steps` steps (all when None);
  with `restart` the momentum is zeroed before step `penalized_steps` (the two-model switch).
  """
  w = [np.array(s, np.float64) for s in server]
  velocity = [np.zeros_like(t) for t in w]
  for k, (x, y) in enumerate(batches):
    g = softmax_gradients(w, x, y)
    if penalty is not None and (penalized_steps is None or k < penalized_steps):
      g = [gi + pi for gi, pi in zip(g, penalty(w))]
    if restart and k == penalized_steps:
      velocity = [np.zeros_like(t) for t in w]
    velocity = [momentum * v + gi for v, gi in zip(velocity, g)]
    w = [wi - learning_rate * v for wi, v in zip(w, velocity)]
  return [wi - s for wi, s in zip(w, server)]


def authors_topk_capped(x: np.ndarray, keep_percent: float) -> np.ndarray:
  """`authors_topk` with the cut rank capped at the tensor size (what a tensor R' does)."""
  n = x.size
  k = np.float32(keep_percent) / np.float32(100) * np.float32(n)
  cut_rank = min(int(np.round(k)) + 2, n)
  threshold = np.sort(np.abs(x).ravel())[::-1][cut_rank - 1]
  return np.where(np.abs(x) > threshold, x, 0)


def simulate(algorithm: str,
             initial,
             clients,
             participation,
             *,
             learning_rate,
             momentum,
             keep_percent,
             tau=0.0,
             tau_decay=1.0,
             reg_steps=1,
             total_clients=None,
             epochs=1,
             test_losses=None,
             topk_rule='authors'):
  """The server model after `len(participation)` rounds of `algorithm`, and the states.

  Args:
    algorithm: 'fedavg', 'ec', 'ec_fedprox', 'flare', 'ef21' (as defined), 'ef21_dense' (the
      authors' dense state), 'ec_ffl'.
    initial: the initial [kernel, bias].
    clients: `{client_id: [(x, y), ...]}`, one epoch of batches each.
    participation: per round, the ids of the clients that train (the others sit out and keep
      their states).
    epochs: local epochs E (the batches are repeated).
    test_losses: for 'ec_ffl', the test loss recorded before each round (the first is L_ref).
    topk_rule: 'authors' (per tensor) or 'global' (`global_topk`; EC, EC+FedProx, FLARE).

  Returns:
    `(server weights, {client_id: state}, per-round notes)`; a note holds the round's R' and
    E' for EC-FFL and the entries each client sent.
  """
  server = [np.array(t, np.float64) for t in initial]
  zeros = lambda: [np.zeros_like(t) for t in server]  # pylint: disable=unnecessary-lambda-assignment
  states = {cid: zeros() for cid in clients}
  running = zeros()  # EF21's G.
  notes = []
  reference_loss = None
  for r, present in enumerate(participation):
    tau_r = tau / tau_decay**(r + 1)
    keep, local_epochs = keep_percent, epochs
    if algorithm == 'ec_ffl':
      reference_loss = test_losses[0] if reference_loss is None else reference_loss
      cube_root = (reference_loss / test_losses[r])**(1.0 / 3.0)
      keep = float(np.float32(keep_percent * cube_root))
      local_epochs = max(1, int(np.round(epochs / cube_root)))
    messages, sent = [], {}
    for cid in present:
      batches = clients[cid] * local_epochs
      state = states[cid]
      common = dict(learning_rate=learning_rate, momentum=momentum)
      if algorithm == 'flare':
        masks = [percentile_mask(a, 50.0) for a in state]
        targets = [s + a for s, a in zip(server, state)]
        delta = local_delta(
            server,
            batches,
            penalized_steps=reg_steps,
            restart=True,
            penalty=lambda w: [tau_r * m * np.sign(wi - t) for wi, m, t in zip(w, masks, targets)],
            **common)
      elif algorithm == 'ec_fedprox':
        delta = local_delta(server,
                            batches,
                            penalty=lambda w: [2.0 * tau_r * (wi - s) for wi, s in zip(w, server)],
                            **common)
      else:
        delta = local_delta(server, batches, **common)
      if algorithm in ('ec', 'ec_fedprox', 'flare', 'ec_ffl'):
        corrected = [d + a for d, a in zip(delta, state)]
        topk = authors_topk_capped if algorithm == 'ec_ffl' else authors_topk
        if topk_rule == 'global':
          message = [
              m.astype(np.float64)
              for m in global_topk([u.astype(np.float32) for u in corrected], keep)
          ]
        else:
          message = [topk(u.astype(np.float32), keep).astype(np.float64) for u in corrected]
        states[cid] = [u - m for u, m in zip(corrected, message)]
      elif algorithm in ('ef21', 'ef21_dense'):
        correction = [
            authors_topk((d - g).astype(np.float32), keep).astype(np.float64)
            for d, g in zip(delta, state)
        ]
        states[cid] = [g + c for g, c in zip(state, correction)]
        message = states[cid] if algorithm == 'ef21_dense' else correction
      else:
        message = delta
      messages.append(message)
      sent[cid] = int(sum(np.count_nonzero(m) for m in message))
    if algorithm == 'ef21':
      running = [g + sum(m[j] for m in messages) / total_clients for j, g in enumerate(running)]
      server = [s + g for s, g in zip(server, running)]
    else:
      server = [s + sum(m[j] for m in messages) / len(messages) for j, s in enumerate(server)]
    notes.append(dict(keep_percent=keep, local_epochs=local_epochs, sent=sent))
  return server, states, notes
