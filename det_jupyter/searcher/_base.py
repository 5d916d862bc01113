"""The searcher base: event bookkeeping, seeded trial creation, shutdown and snapshots.

Subclasses implement one search method through the `_on_*` hooks; everything they keep lives in
plain attributes they save in `_method_state()` and load in `_load_method_state()`.
"""

from __future__ import annotations

import math
import random
import uuid
from typing import Any, ClassVar

from ._actions import Action, Create, ExitedReason, SearcherError, Shutdown
from ._hparams import sample

SNAPSHOT_VERSION = 1

# Trial flags, kept as one int per trial so a snapshot of 10k trials stays small.
CREATED = 1  # trial_created was received
STOPPED = 2  # the searcher sent Stop; later validations are ignored
EXITED = 4  # trial_exited_early was received (a second one is ignored, as in Determined)
INVALID = 8  # it exited with INVALID_HP


class Trial:
    """What the searcher remembers about one trial that is not closed yet."""

    __slots__ = ("index", "bracket", "rung", "flags")

    def __init__(self, index: int, bracket: int = 0, rung: int = 0, flags: int = 0) -> None:
        self.index = index  # creation counter value; rungs refer to trials by it
        self.bracket = bracket
        self.rung = rung
        self.flags = flags


def config_int(config: dict[str, Any], key: str, default: int | None, minimum: int) -> int:
    """Read an integer searcher field, or raise naming the field and the constraint."""
    value = config.get(key, default)
    if value is None:
        raise SearcherError(f"searcher.{key} is required for the {config.get('name')} searcher")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SearcherError(f"searcher.{key} must be an integer >= {minimum}, got {value!r}")
    return value


class Searcher:
    """A hyperparameter search: events about trials in, actions out.

    Pure and deterministic: the trial seeds, request ids and hparam samples of the n-th created
    trial derive from (`seed`, n) only, so a searcher restored from `snapshot()` and fed the same
    events emits the same actions. Events about unknown or already closed trials are ignored.
    """

    name: ClassVar[str] = ""

    def __init__(
        self, searcher_config: dict[str, Any], hyperparameters: dict[str, Any], seed: int
    ) -> None:
        self._config = searcher_config
        self._hparams = hyperparameters
        self._seed = int(seed)
        self._started = False
        self._next_index = 0  # trials created so far, and the RNG stream of the next one
        self._requested = 0
        self._closed = 0
        self._failures = 0
        self._canceled = 0  # trials whose user canceled them (killed, or exited USER_CANCELED)
        self._shutdown = False
        self._trials: dict[str, Trial] = {}

    # -- public API -------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """Initial Create actions. Call once when the experiment starts (later calls: [])."""
        if self._started:
            return []
        self._started = True
        actions = self._initial()
        return actions + self._maybe_shutdown()

    def trial_created(self, request_id: str) -> list[Action]:
        """The trial asked for by Create(request_id) now exists."""
        trial = self._trials.get(request_id)
        if trial is not None:
            trial.flags |= CREATED
        return []

    def validation_completed(self, request_id: str, metrics: dict[str, Any]) -> list[Action]:
        """A validation report's metrics arrived; may Stop the trial and Create others.

        Raises SearcherError when a metric the method needs is absent or not a number.
        """
        trial = self._trials.get(request_id)
        if trial is None or trial.flags & (STOPPED | EXITED):
            # A stopped trial may validate once more before its preemption lands; Determined
            # would rank it again, we count each trial once.
            return []
        return self._on_validation(request_id, trial, metrics)

    def trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        """The trial's code gave up (error, user cancel, invalid hparams) before finishing."""
        trial = self._trials.get(request_id)
        if trial is None or trial.flags & EXITED:
            return []
        reason = ExitedReason(reason)
        trial.flags |= EXITED
        if reason is ExitedReason.INVALID_HP:
            trial.flags |= INVALID
        elif reason is ExitedReason.ERRORED:
            self._failures += 1
        elif reason is ExitedReason.USER_CANCELED:
            self._canceled += 1
        return self._on_exited_early(request_id, trial, reason) + self._maybe_shutdown()

    def trial_closed(self, request_id: str) -> list[Action]:
        """The trial reached a terminal state (completed, stopped or errored)."""
        trial = self._trials.pop(request_id, None)
        if trial is None:
            return []
        self._closed += 1
        return self._on_closed(request_id, trial) + self._maybe_shutdown()

    def progress(self) -> float:
        """Experiment progress in [0, 1]; 1.0 once the search has shut down."""
        if self._shutdown and not (self._failed() or self._canceled_search()):
            return 1.0
        value = self._progress()
        if math.isnan(value) or math.isinf(value):
            return 0.0
        return min(max(value, 0.0), 1.0)

    def snapshot(self) -> dict[str, Any]:
        """The whole state as a JSON-serialisable dict (restore with `Searcher.restore`)."""
        return {
            "version": SNAPSHOT_VERSION,
            "searcher": self.name,
            "started": self._started,
            "next_index": self._next_index,
            "requested": self._requested,
            "closed": self._closed,
            "failures": self._failures,
            "canceled": self._canceled,
            "shutdown": self._shutdown,
            "trials": {
                rid: [t.index, t.bracket, t.rung, t.flags] for rid, t in self._trials.items()
            },
            "method": self._method_state(),
        }

    @classmethod
    def restore(
        cls,
        searcher_config: dict[str, Any],
        hyperparameters: dict[str, Any],
        seed: int,
        snapshot: dict[str, Any],
    ) -> Searcher:
        """Rebuild a searcher from the same config, hparams and seed plus a `snapshot()`."""
        from ._factory import make_searcher

        searcher = make_searcher(searcher_config, hyperparameters, seed)
        searcher._load(snapshot)
        return searcher

    # -- for subclasses ---------------------------------------------------------------------

    def _create(self, hparams: dict[str, Any] | None = None, bracket: int = 0) -> Create:
        """Make the next trial; its id, seed and sampled hparams depend on (seed, n) only."""
        index = self._next_index
        # A fresh generator per trial keeps the snapshot free of Mersenne Twister state; string
        # seeds are hashed with SHA-512, so the stream does not depend on PYTHONHASHSEED.
        rng = random.Random(f"{self._seed}:{index}")
        request_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        trial_seed = rng.randrange(2**31)
        if hparams is None:
            hparams = sample(self._hparams, rng)
        self._next_index += 1
        self._requested += 1
        self._trials[request_id] = Trial(index, bracket)
        return Create(request_id=request_id, hparams=hparams, trial_seed=trial_seed)

    def _maybe_shutdown(self) -> list[Action]:
        if self._shutdown or not self._started or self._requested != self._closed:
            return []
        self._shutdown = True
        return [Shutdown(failure=self._failed(), cancel=self._canceled_search())]

    def _failed(self) -> bool:
        """Every trial errored."""
        return self._requested > 0 and self._failures >= self._requested

    def _canceled_search(self) -> bool:
        """0.38.1: an experiment of one trial that its user canceled is canceled, not completed."""
        return self._requested == 1 and self._canceled == 1

    def _initial(self) -> list[Action]:
        raise NotImplementedError

    def _on_validation(
        self, request_id: str, trial: Trial, metrics: dict[str, Any]
    ) -> list[Action]:
        return []

    def _on_exited_early(self, request_id: str, trial: Trial, reason: ExitedReason) -> list[Action]:
        return []

    def _on_closed(self, request_id: str, trial: Trial) -> list[Action]:
        return []

    def _progress(self) -> float:
        raise NotImplementedError

    def _method_state(self) -> dict[str, Any]:
        return {}

    def _load_method_state(self, state: dict[str, Any]) -> None:
        pass

    def _load(self, snapshot: dict[str, Any]) -> None:
        version = snapshot.get("version")
        if version != SNAPSHOT_VERSION:
            raise SearcherError(
                f"searcher snapshot version {version!r} is not supported "
                f"(this master reads version {SNAPSHOT_VERSION})"
            )
        if snapshot.get("searcher") != self.name:
            raise SearcherError(
                f"searcher snapshot is for {snapshot.get('searcher')!r} but the experiment "
                f"config names {self.name!r}; the searcher config must not change on restore"
            )
        try:
            self._started = bool(snapshot["started"])
            self._next_index = int(snapshot["next_index"])
            self._requested = int(snapshot["requested"])
            self._closed = int(snapshot["closed"])
            self._failures = int(snapshot["failures"])
            self._canceled = int(snapshot.get("canceled", 0))
            self._shutdown = bool(snapshot["shutdown"])
            self._trials = {rid: Trial(*map(int, t)) for rid, t in snapshot["trials"].items()}
            self._load_method_state(snapshot["method"])
        except SearcherError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SearcherError(f"searcher snapshot is malformed: {exc!r}") from exc
