"""The loop's hooks: evaluation, releases, checkpoints, progress and the non-finite stop.

Each is a `loop.Hook`; a run passes the ones it wants to `loop.run_rounds`, in order
(evaluation first, so that the others see its results).
"""

import asyncio
import math
from collections.abc import Callable, Sequence
import threading
import time
from typing import Any

import tensorflow_federated as tff

from tff_flare.simulation import checkpoints as checkpoints_lib
from tff_flare.simulation import loop


class Evaluation(loop.Hook):
  """Evaluates every algorithm before the training of rounds `0, every, 2 * every, ...`.

  The authors evaluate at the start of a round, before its training
  (`docs/faithfulness.md` R10), so entry `r` is the model after `r` rounds; the end of the run
  is evaluated too (`after_last_round`). Results go to `row[name].eval`.

  Args:
    evaluate: `model_weights -> {'loss', 'accuracy', ...}`.
    every: evaluate when `round_num % every == 0`.
  """

  def __init__(self, evaluate: loop.EvaluateFn, every: int = 1):
    self._evaluate = evaluate
    self._every = every

  def before_round(self, round_num, runs, row) -> None:
    if round_num % self._every == 0:
      self.after_last_round(round_num, runs, row)

  def after_last_round(self, end_round, runs, row) -> None:
    for run in runs:
      row[run.name].eval = dict(self._evaluate(run.model_weights()))


class TestLossFeedback(loop.Hook):
  """Gives the algorithms that adapt to the test loss (EC-FFL) the loss of their model before
  every round, reusing the round's evaluation when there is one (place it after
  `Evaluation`); evaluates otherwise.

  Args:
    evaluate: `model_weights -> {'loss', ...}` (the runner's test-set evaluation).
  """

  feeds_test_loss = True  # `loop.run_rounds` refuses an adapting run without this hook.

  def __init__(self, evaluate: loop.EvaluateFn):
    self._evaluate = evaluate

  def before_round(self, round_num, runs, row) -> None:
    for run in runs:
      if run.process.uses_test_loss:
        evaluation = row[run.name].eval or self._evaluate(run.model_weights())
        run.record_test_loss(evaluation['loss'])


class CollectRows(loop.Hook):
  """Keeps every row (`rows`), the final one included."""

  def __init__(self):
    self.rows: list[loop.RoundRow] = []

  def after_round(self, round_num, runs, row) -> None:
    self.rows.append(row)

  def after_last_round(self, end_round, runs, row) -> None:
    self.rows.append(row)


class NonFiniteRoundError(RuntimeError):
  """A round in which every client of an algorithm returned non-finite values."""


class NonFiniteEvaluationError(RuntimeError):
  """A model whose test loss or accuracy is not finite (NaN or Inf)."""


class StopOnInterrupt(loop.Hook):
  """Ends the run with `KeyboardInterrupt` once `interrupted` is set (`cleanup.noting_interrupts`:
  a binary's first Ctrl-C, or one that TensorFlow swallowed mid-round): between rounds, once
  the rounds done are checkpointed (`save`, where the run keeps checkpoints), so that a resume
  loses no round. The last hook of the loop, so that a round's row is released and its own
  checkpoint, if due, written first.

  Args:
    interrupted: the event.
    last_checkpoint: `() -> rounds done at the latest checkpoint, or None`.
    save: `(rounds done) -> None`, writes a checkpoint (None: the run keeps none).
    end_round: the run's last round + 1: interrupted in it, the run finishes.
  """

  def __init__(self,
               interrupted: threading.Event,
               last_checkpoint=lambda: None,
               save: Callable[[int], None] | None = None,
               end_round: int | None = None):
    self._interrupted = interrupted
    self._last_checkpoint = last_checkpoint
    self._save = save
    self._end_round = end_round

  def _stop(self, done: int) -> None:
    """Checkpoints the state after `done` rounds (if not yet), then raises."""
    if self._save is not None and done > 0 and self._last_checkpoint() != done:
      self._save(done)
    last = self._last_checkpoint()
    raise KeyboardInterrupt(f'Interrupted at round {done}; called again, the run resumes from ' + (
        'round 0.' if last is None else f'its checkpoint after round {last - 1}.'))

  def before_round(self, round_num, runs, row) -> None:
    if self._interrupted.is_set():
      self._stop(round_num)

  def after_round(self, round_num, runs, row) -> None:
    if self._interrupted.is_set() and round_num + 1 != self._end_round:
      self._stop(round_num + 1)  # (After the last round the run finishes as usual.)


class StopOnNonFiniteRound(loop.Hook):
  """Stops the run after a round in which an algorithm failed: every one of its clients was
  non-finite, or its model evaluates to a non-finite test loss or accuracy.

  A non-finite client sends nothing (`composer`'s non-finite policy), so an algorithm whose
  every client was non-finite did not move; a model whose test loss is NaN has diverged even
  if its clients' updates were finite (too large a learning rate, say). Raising here, after
  the round's row was released but before its checkpoint, ends the run with the message.

  Args:
    last_checkpoint: `() -> the round of the latest checkpoint, or None`, for the message.
  """

  def __init__(self, last_checkpoint=lambda: None):
    self._last_checkpoint = last_checkpoint

  def _resume_advice(self) -> str:
    last = self._last_checkpoint()
    if last is None:
      return 'No checkpoint was written before it.'
    return f'The last checkpoint is from after round {last - 1}.'

  def _check_evaluation(self, round_num, runs, row) -> None:
    for run in runs:
      evaluation = row[run.name].eval
      if evaluation is None:
        continue
      values = (evaluation['loss'], evaluation.get('accuracy', 0.0))
      if not all(math.isfinite(v) for v in values):
        raise NonFiniteEvaluationError(
            f'The model of {run.name} after {round_num} rounds evaluates to test loss '
            f'{values[0]} (accuracy {values[1]}): it has diverged (lower the learning '
            f'rate?). {self._resume_advice()} Set allow_nonfinite_rounds to go on '
            'regardless.')

  def after_round(self, round_num, runs, row) -> None:
    self._check_evaluation(round_num, runs, row)
    for run in runs:
      communication = row[run.name].train['aggregator']['communication']
      bad = int(communication.get('nonfinite_clients_total', 0))
      if bad and bad == int(communication['num_clients_total']):
        raise NonFiniteRoundError(
            f'Round {round_num}: every client of {run.name} ({bad}) returned non-finite values '
            '(NaN or Inf), so the model did not move; it has probably diverged (lower the '
            f'learning rate?). {self._resume_advice()} Set allow_nonfinite_rounds to go '
            'on regardless.')

  def after_last_round(self, end_round, runs, row) -> None:
    self._check_evaluation(end_round, runs, row)


class ReleaseRows(loop.Hook):
  """Releases every row through `tff.program` release managers, keyed by the round.

  Args:
    managers: e.g. a `tff.program.CSVFileReleaseManager` and a `TensorBoardReleaseManager`.
    final_managers: those that also get the end-of-run row (default: all).
  """

  def __init__(self,
               managers: Sequence[tff.program.ReleaseManager],
               final_managers: Sequence[tff.program.ReleaseManager] | None = None):
    self._managers = list(managers)
    self._final = self._managers if final_managers is None else list(final_managers)

  def after_round(self, round_num, runs, row) -> None:
    _release(self._managers, row.released(), round_num)

  def after_last_round(self, end_round, runs, row) -> None:
    _release(self._final, row.released(), end_round)


def _release(managers, value, key: int) -> None:

  async def release_all():
    await asyncio.gather(*[m.release(value, key=key) for m in managers])

  asyncio.run(release_all())


class CheckpointEvery(loop.Hook):
  """Saves the program state after every `every`-th round and after the last one (also when
  a hook ends the run early).

  Args:
    checkpoints: the run's `checkpoints.Checkpoints`.
    every: rounds between checkpoints.
    end_round: the last round to train + 1 (always checkpointed).
  """

  def __init__(self, checkpoints: checkpoints_lib.Checkpoints, every: int, end_round: int):
    self._checkpoints = checkpoints
    self._every = every
    self._end_round = end_round

  def after_round(self, round_num, runs, row) -> None:
    done = round_num + 1
    if done % self._every == 0 or done == self._end_round:
      self._checkpoints.save(done)

  def after_last_round(self, end_round, runs, row) -> None:
    versions = self._checkpoints.versions()
    if end_round < self._end_round and (not versions or versions[-1] != end_round):
      self._checkpoints.save(end_round)  # Ended early by a hook.


class LogProgress(loop.Hook):
  """A line per round: rate, time left, the run's peak memory so far (when it is measured)
  and the test accuracies evaluated this round.

  Args:
    log: where lines go (e.g. `print`).
    start_round, end_round: the rounds of this session.
    peak_bytes: `() -> bytes`, the run's peak memory so far (`memory.PeakSampler`), or None.
  """

  def __init__(self,
               log: Callable[[str], Any],
               start_round: int,
               end_round: int,
               peak_bytes: Callable[[], int] | None = None):
    self._log = log
    self._start_round = start_round
    self._end_round = end_round
    self._peak_bytes = peak_bytes
    self._started = time.perf_counter()

  def after_round(self, round_num, runs, row) -> None:
    done = round_num + 1
    rate = (done - self._start_round) / (time.perf_counter() - self._started)
    accuracies = ''.join(f' | {run.name} acc {row[run.name].eval["accuracy"]:.4f}' for run in runs
                         if 'accuracy' in (row[run.name].eval or {}))
    peak = ('' if self._peak_bytes is None else f' | peak {self._peak_bytes() / 2**30:.2f} GiB')
    self._log(f'round {round_num} | {rate:.2f} rounds/s | ETA '
              f'{(self._end_round - done) / rate:.0f} s{peak}{accuracies}')
