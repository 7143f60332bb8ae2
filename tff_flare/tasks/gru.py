"""Keras's GRU layer (`reset_after=False`) computed a whole sequence at a time.

`GRU` is `tf.keras.layers.GRU` with the same constructor, variables (names, shapes,
initializers), stateful behaviour (`states`, `reset_states`) and function; only the way
a sequence is computed differs, where the configuration is the authors' (`reset_after=False`,
tanh / sigmoid, a bias, no dropout, no mask, batch-major, forwards). Anything else falls
back to Keras's own `call`.

Keras runs such a GRU one time step at a time through `backend.rnn`: per step three input
matmuls, three recurrent matmuls, and in the backward pass three outer products of the
recurrent kernel's size (1024 x 1024 each for the authors' GRU) accumulated step after
step. On a CPU that is ~4 % of the matmul rate (`benchmarks.floor`). Here, with
`h_{t-1}` the state, `x_t` the input, `W` the kernel, `U` the recurrent kernel, `b` the bias
(each `[z | r | h]`, as Keras lays them out), and `sigma` the sigmoid:

  forward   P = X W + b                          (one matmul for all steps)
            [a_z, a_r]_t = P_zr,t + h_{t-1} U_zr   (per step)
            z_t, r_t = sigma(a_z), sigma(a_r)
            hh_t = tanh(P_h,t + (r_t * h_{t-1}) U_h)
            h_t = z_t * h_{t-1} + (1 - z_t) * hh_t
  backward  per step (from the last): the gate gradients, and
            dh_{t-1} = dh_t z_t + d(r h)_t * r_t + [da_z, da_r]_t U_zr^T, d(r h) = da_h U_h^T
            then one matmul each for dU_zr = H_prev^T DA_zr, dU_h = (R*H_prev)^T DA_h,
            dW = X^T DP, dX = DP W^T, db = sum DP.

The same arithmetic as Keras's cell up to the order of float additions
(`tests/tasks/test_gru.py` compares outputs, gradients, carried states and `reset_states`).

The per-step matmuls have a few rows (the batch, 8 for the authors) against a 1024-row
kernel, and which layout of the kernel runs them fast depends on the CPU, by several times:
as it is (`matmul(h, U)`, 'plain') or transposed once before the loop (`matmul(h, U_t,
transpose_b=True)`, 'transposed'). On the authors' shapes the transposed one was 2.5x faster
on the 200 GFLOP/s machines of `docs/performance.md`, the plain one 6.8x faster on a 2-core
AMD EPYC (AVX2, 89 GFLOP/s). `few_row_layout` measures both once per process, at the first
trace of a layer, and keeps the faster ('plain' unless the other is 1.5x faster, so that
timing noise does not flip it); `TFF_FLARE_GRU_LAYOUT=plain|transposed` fixes it. The two
give the same function, bit for bit on the EPYC (outputs and gradients of the authors'
shapes); another CPU's kernels may order their float sums differently.
"""

import os
import threading
import time
from typing import Any

import numpy as np
import tensorflow as tf

PLAIN, TRANSPOSED = 'plain', 'transposed'
LAYOUT_ENV = 'TFF_FLARE_GRU_LAYOUT'
_layouts: dict[tuple[int, int], str] = {}
_layouts_lock = threading.Lock()


def _time_layouts(rows: int, units: int) -> dict[str, float]:
  """Seconds of 20 few-row recurrent steps in each layout (the fastest of 3 tries, eager)."""
  rng = np.random.default_rng(0)
  h = tf.constant(rng.normal(size=(rows, units)), tf.float32)
  kernel = tf.constant(rng.normal(size=(units, 3 * units)) / np.sqrt(units), tf.float32)
  seconds = {}
  for layout in (PLAIN, TRANSPOSED):
    right = _right_operand(kernel, layout)

    def steps(x, right=right, layout=layout):
      for _ in range(20):
        x = tf.tanh(_times(x, right, layout)[:, :units])
      return x

    run = tf.function(steps)
    run(h).numpy()  # Traced and warmed.
    tries = []
    for _ in range(3):
      start = time.perf_counter()
      run(h).numpy()
      tries.append(time.perf_counter() - start)
    seconds[layout] = min(tries)
  return seconds


def fixed_layout() -> str | None:
  """The layout `$TFF_FLARE_GRU_LAYOUT` fixes, or None.

  Raises:
    ValueError: a value other than 'plain' and 'transposed'.
  """
  fixed = os.environ.get(LAYOUT_ENV)
  if fixed and fixed not in (PLAIN, TRANSPOSED):
    raise ValueError(f'{LAYOUT_ENV}={fixed!r}: use {PLAIN!r} or {TRANSPOSED!r}.')
  return fixed or None


def few_row_layout(rows: int, units: int) -> str:
  """The kernel layout of the per-step matmuls for a `[rows, units]` state: `$TFF_FLARE_GRU_LAYOUT`
  where set (`fixed_layout`), else the faster here, measured once per shape and process
  (module docstring)."""
  fixed = fixed_layout()
  if fixed:
    return fixed
  with _layouts_lock:
    if (rows, units) not in _layouts:
      seconds: dict[str, float] = {}
      # Timed eagerly, in a thread of its own: the layer is traced inside graphs.
      measure = threading.Thread(target=lambda: seconds.update(_time_layouts(rows, units)))
      measure.start()
      measure.join()
      faster = len(seconds) == 2 and seconds[TRANSPOSED] * 1.5 < seconds[PLAIN]
      _layouts[rows, units] = TRANSPOSED if faster else PLAIN  # PLAIN if the timing failed.
    return _layouts[rows, units]


def _right_operand(matrix, layout: str):
  """`matrix` ready for `_times(a, ., layout)` = `a @ matrix` (made once, before a loop)."""
  return matrix if layout == PLAIN else tf.transpose(matrix)


def _right_operand_transposed(matrix, layout: str):
  """`matrix` ready for `_times(a, ., layout)` = `a @ matrix^T`."""
  return tf.transpose(matrix) if layout == PLAIN else matrix


def _times(a, right, layout: str):
  return tf.matmul(a, right, transpose_b=layout == TRANSPOSED)


def _sequence_forward(inputs, initial_state, kernel, recurrent_kernel, bias, layout: str):
  """`(outputs [B, T, H], final state [B, H], saved)` for the backward pass."""
  units = recurrent_kernel.shape[0]
  batch = inputs.shape[0] or tf.shape(inputs)[0]
  steps = inputs.shape[1] or tf.shape(inputs)[1]
  projected = tf.reshape(
      tf.matmul(tf.reshape(inputs, [-1, inputs.shape[-1]]), kernel) + bias,
      [batch, steps, 3 * units])
  projected = tf.transpose(projected, [1, 0, 2])  # [T, B, 3H]: a step is one row block.
  # Laid out once, before the loop (`few_row_layout`).
  recurrent_zr = _right_operand(recurrent_kernel[:, :2 * units], layout)
  recurrent_h = _right_operand(recurrent_kernel[:, 2 * units:], layout)

  def step(t, h, previous, gates_z, gates_r, candidates):
    p = projected[t]
    zr = tf.sigmoid(p[:, :2 * units] + _times(h, recurrent_zr, layout))
    z, r = zr[:, :units], zr[:, units:]
    hh = tf.tanh(p[:, 2 * units:] + _times(r * h, recurrent_h, layout))
    new_h = z * h + (1.0 - z) * hh
    return (t + 1, new_h, previous.write(t, h), gates_z.write(t, z), gates_r.write(t, r),
            candidates.write(t, hh))

  arrays = [
      tf.TensorArray(inputs.dtype, size=steps, element_shape=initial_state.shape) for _ in range(4)
  ]
  _, final, previous, gates_z, gates_r, candidates = tf.while_loop(
      lambda t, *_: t < steps,
      step, [tf.constant(0), initial_state] + arrays,
      parallel_iterations=1)
  previous, z, r, hh = (a.stack() for a in (previous, gates_z, gates_r, candidates))
  h_all = z * previous + (1.0 - z) * hh  # [T, B, H]: the outputs, as each step made them.
  outputs = tf.transpose(h_all, [1, 0, 2])
  outputs.set_shape(inputs.shape[:2].concatenate([units]))
  return outputs, final, (previous, z, r, hh)


def _sequence_backward(d_outputs, d_final, inputs, kernel, recurrent_kernel, saved, layout: str):
  """Gradients of `_sequence_forward` for its five inputs."""
  previous, z, r, hh = saved  # [T, B, H] each.
  units = recurrent_kernel.shape[0]
  steps = previous.shape[0] or tf.shape(previous)[0]
  d_outputs = tf.transpose(d_outputs, [1, 0, 2])
  # For `a @ U^T`, laid out once before the loop.
  recurrent_zr_t = _right_operand_transposed(recurrent_kernel[:, :2 * units], layout)
  recurrent_h_t = _right_operand_transposed(recurrent_kernel[:, 2 * units:], layout)

  def step(t, dh_next, d_zr, d_h):
    i = steps - 1 - t
    dh = d_outputs[i] + dh_next
    h, z_i, r_i, hh_i = previous[i], z[i], r[i], hh[i]
    da_h = dh * (1.0 - z_i) * (1.0 - tf.square(hh_i))
    d_rh = _times(da_h, recurrent_h_t, layout)
    da_z = dh * (h - hh_i) * z_i * (1.0 - z_i)
    da_r = d_rh * h * r_i * (1.0 - r_i)
    da_zr = tf.concat([da_z, da_r], axis=1)
    dh_previous = dh * z_i + d_rh * r_i + _times(da_zr, recurrent_zr_t, layout)
    return t + 1, dh_previous, d_zr.write(i, da_zr), d_h.write(i, da_h)

  shape = previous.shape[1:]
  _, d_initial, d_zr, d_h = tf.while_loop(
      lambda t, *_: t < steps,
      step, [
          tf.constant(0), d_final,
          tf.TensorArray(previous.dtype, size=steps, element_shape=[shape[0], 2 * units]),
          tf.TensorArray(previous.dtype, size=steps, element_shape=shape)
      ],
      parallel_iterations=1)
  d_zr, d_h = d_zr.stack(), d_h.stack()  # [T, B, 2H], [T, B, H]
  flat = lambda t: tf.reshape(t, [-1, t.shape[-1]])
  d_recurrent = tf.concat([
      tf.matmul(flat(previous), flat(d_zr), transpose_a=True),
      tf.matmul(flat(r * previous), flat(d_h), transpose_a=True)
  ],
                          axis=1)
  d_projected = tf.concat([d_zr, d_h], axis=2)  # [T, B, 3H]
  d_projected_flat = tf.reshape(tf.transpose(d_projected, [1, 0, 2]), [-1, 3 * units])
  flat_inputs = tf.reshape(inputs, [-1, inputs.shape[-1]])
  d_kernel = tf.matmul(flat_inputs, d_projected_flat, transpose_a=True)
  d_bias = tf.reduce_sum(d_projected_flat, axis=0)
  d_inputs = tf.reshape(tf.matmul(d_projected_flat, kernel, transpose_b=True), tf.shape(inputs))
  return d_inputs, d_initial, d_kernel, d_recurrent, d_bias


def gru_sequence(inputs, initial_state, kernel, recurrent_kernel, bias, layout: str | None = None):
  """Runs a `reset_after=False` GRU over a sequence.

  Args:
    inputs: float [B, T, D].
    initial_state: float [B, H].
    kernel: [D, 3H]; recurrent_kernel: [H, 3H]; bias: [3H] (gates z, r, h in that order).
    layout: the per-step matmuls' kernel layout, `PLAIN` or `TRANSPOSED`; None: the faster
      here (`few_row_layout`).

  Returns:
    `(outputs [B, T, H], final state [B, H])`.
  """
  if layout is None:
    batch = initial_state.shape[0]
    layout = few_row_layout(batch or 8, recurrent_kernel.shape[0])
  return _GRU_SEQUENCE[layout](inputs, initial_state, kernel, recurrent_kernel, bias)


def _sequence_with_gradient(layout: str):
  """`gru_sequence` in one layout, with its gradient."""

  @tf.custom_gradient
  def sequence(inputs, initial_state, kernel, recurrent_kernel, bias):
    outputs, final, saved = _sequence_forward(inputs, initial_state, kernel, recurrent_kernel, bias,
                                              layout)

    def grad(d_outputs, d_final):
      d_outputs = tf.zeros_like(outputs) if d_outputs is None else d_outputs
      d_final = tf.zeros_like(final) if d_final is None else d_final
      return _sequence_backward(d_outputs, d_final, inputs, kernel, recurrent_kernel, saved, layout)

    return (outputs, final), grad

  return sequence


_GRU_SEQUENCE = {layout: _sequence_with_gradient(layout) for layout in (PLAIN, TRANSPOSED)}


class GRU(tf.keras.layers.GRU):
  """`tf.keras.layers.GRU`, a sequence at a time where it can (see the module docstring).

  The class name keeps Keras's layer names (`gru`, `gru_1`, ...) and so the variables'
  (`gru/gru_cell/kernel`, ...).
  """

  def _takes_whole_sequences(self, mask, training) -> bool:
    del training  # Dropout is 0 wherever this path runs.
    cell = self.cell
    return (mask is None and not cell.reset_after and cell.use_bias and
            cell.activation is tf.keras.activations.tanh and
            cell.recurrent_activation is tf.keras.activations.sigmoid and cell.dropout == 0 and
            cell.recurrent_dropout == 0 and not self.go_backwards and not self.time_major and
            not self.unroll)

  def call(self, inputs, mask=None, training=None, initial_state=None) -> Any:
    if isinstance(inputs, tf.RaggedTensor) or not self._takes_whole_sequences(mask, training):
      return super().call(inputs, mask=mask, training=training, initial_state=initial_state)
    inputs, initial_state, _ = self._process_inputs(inputs, initial_state, None)
    cell = self.cell
    outputs, final = gru_sequence(inputs, initial_state[0], cell.kernel, cell.recurrent_kernel,
                                  cell.bias)
    if self.stateful:
      self.add_update([tf.compat.v1.assign(self.states[0], tf.cast(final, self.states[0].dtype))])
    output = outputs if self.return_sequences else final
    return [output, final] if self.return_state else output
