"""Sessions kept by a server (`rlmx serve`, `rlmx mcp`): a caller's questions, one after another, in one
REPL (rlmx.session.AsyncSession).

A caller starts one by asking for `"new"` and continues it with the id it was given: the session's own
id, 128 random bits, so nobody guesses another caller's. A session belongs to the profile it was started
with. Their number is bounded (`max_sessions`: a new one beyond it is refused with 429) and so is their
idle time (`idle_s` without a question: the session closes itself, its REPL and worker processes end,
and its id is unknown from then on: 404). The server closes every one still open when it stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlmx.rlm import RLM
from rlmx.serve.profiles import ServedProfile
from rlmx.session import AsyncSession

NEW = "new"  # what a caller sends to start a session


class SessionRefused(Exception):
    """A session request the server cannot serve: `status` (400, 404, 429) and an error `code`."""

    def __init__(self, message: str, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class HeldSession:
    session: AsyncSession
    profile: ServedProfile
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)  # one question at a time

    @property
    def id(self) -> str:
        return self.session.id

    async def ask(
        self,
        question: str,
        context: Any,
        *,
        on_event: Any,
        limits: Any,
        trace: Any,
        run_id: str,
        output: Any = None,
        context_note: str | None = None,
    ) -> Any:
        """One question of the session, with this request's progress sink, limits and trace file."""
        async with self.turn:
            rlm: Any = self.session.rlm  # the RLM this session was opened with (rlmx.rlm.RLM)
            rlm.on_event, rlm.limits, rlm.trace = on_event, limits, trace
            return await self.session.aask(
                question, context, output=output, run_id=run_id, context_note=context_note
            )


class SessionStore:
    def __init__(self, max_sessions: int, idle_s: float) -> None:
        if max_sessions < 0 or not idle_s > 0:
            raise ValueError("max_sessions must be >= 0 and idle_s > 0")
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.held: dict[str, HeldSession] = {}

    def _prune(self) -> None:
        """Forget the sessions that closed themselves (idle too long): their REPLs are already ending."""
        for sid in [sid for sid, held in self.held.items() if held.session.closed]:
            del self.held[sid]

    @property
    def open_count(self) -> int:
        self._prune()
        return len(self.held)

    def start(self, profile: ServedProfile, make_rlm: Callable[[], RLM]) -> HeldSession:
        self._prune()
        if self.max_sessions == 0:
            raise SessionRefused(
                "this server keeps no sessions (its `max_sessions` is 0)", 400, "sessions_disabled"
            )
        if len(self.held) >= self.max_sessions:
            raise SessionRefused(
                f"too many open sessions ({len(self.held)}, this server's limit is {self.max_sessions}); "
                f"retry later: a session closes after {self.idle_s:g} s without a question",
                429,
                "too_many_sessions",
            )
        session = AsyncSession(make_rlm(), idle_timeout_s=self.idle_s)
        held = HeldSession(session, profile)
        self.held[session.id] = held
        return held

    def find(self, session_id: str, profile: ServedProfile) -> HeldSession:
        self._prune()
        held = self.held.get(session_id)
        if held is None:
            raise SessionRefused(
                f"no open session {session_id!r}: the id is unknown, or the session expired (after "
                f'{self.idle_s:g} s without a question) or was closed; start a new one with "session": "{NEW}"',
                404,
                "session_not_found",
            )
        if held.profile is not profile:
            raise SessionRefused(
                f"session {session_id!r} belongs to the model {held.profile.served_name!r}, not "
                f"{profile.served_name!r}",
                400,
                "session_model_mismatch",
            )
        return held

    def get(self, wanted: str, profile: ServedProfile, make_rlm: Callable[[], RLM]) -> HeldSession:
        """`"new"`: a new session of `profile`; else the open session with that id."""
        return self.start(profile, make_rlm) if wanted == NEW else self.find(wanted, profile)

    async def drop(self, held: HeldSession) -> None:
        self.held.pop(held.id, None)
        await held.session.aclose()

    async def close_all(self) -> None:
        """Close every session (their REPLs and workers): the server is stopping."""
        held, self.held = list(self.held.values()), {}
        await asyncio.gather(*(h.session.aclose() for h in held), return_exceptions=True)
        await asyncio.gather(*(h.session.rlm.aclose() for h in held), return_exceptions=True)
