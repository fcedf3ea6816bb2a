"""What carrying out a decision came to, as the next decision reads it (pure data).

Acting (``controller.act``) never decides: when the API server refuses something it
stops or goes on as the decision's order says, and returns an :class:`ActOutcome`.
Reconcile puts that outcome in ``Inputs.acted`` and decides again, from the top
(``decide``): the refusal is an input of the pass's second decision. Which refusal
it was (a quota, a name another object holds) is classified where the API's answer
is read, in act; decide reads only the typed :class:`Refusal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from controller.decide.draft import ResizeDriver, ScaleExecutors

ActionT = TypeVar("ActionT", ResizeDriver, ScaleExecutors)


class Refusal(StrEnum):
    """Why the API server refused to create a driver's children."""

    QUOTA = "quota"  # a ResourceQuota has no room for the pod: for a warm upgrade, no room for a second driver
    NAME_CONFLICT = "name-conflict"  # a child's name is another object's, which the query never takes over
    OTHER = "other"  # RBAC, admission, no SparkApplication API, or the API server down


@dataclass(frozen=True)
class CreateRefused:
    """The creation of ``driver`` (a CreateDriver's run) was refused; the actions after it were not carried out."""

    driver: str
    reason: Refusal
    message: str  # the API server's own words (or the name conflict's), for the status and the event


@dataclass(frozen=True)
class Refused(Generic[ActionT]):
    """A write to a running driver's pod that the API server refused for good, and its own words why."""

    action: ActionT
    message: str  # for the status and the event


ResizeRefused = Refused[ResizeDriver]  # no resize subresource, not allowed, invalid: it runs on its waiting request
ScaleRefused = Refused[ScaleExecutors]  # a chart without patch on pods, admission: the size stays


@dataclass(frozen=True)
class ActOutcome:
    """What came of carrying out one decision; ``ActOutcome()`` when it all went as decided."""

    refused: CreateRefused | None = None
    ui_taken: tuple[str, ...] = ()  # why each Spark UI Service or Ingress name is another object's
    resized: tuple[ResizeDriver, ...] = ()  # resizes the API server took
    resize_refused: tuple[ResizeRefused, ...] = ()
    scale_refused: tuple[ScaleRefused, ...] = ()

    @property
    def as_decided(self) -> bool:
        """Every action was carried out and nothing happened that the status or the events must say."""
        return self == ActOutcome()
