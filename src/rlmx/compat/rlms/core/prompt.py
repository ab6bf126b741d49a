"""The system prompt and dialect of a compat run: rlmx's `official` prompt (or `custom_system_prompt`,
formatted as the official formats it), its delegation paragraph as the official's `orchestrator`
addendum, and the strict official dialect carrying the limits and the user prologue."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rlmx.engine.dialect import StrictOfficialDialect, TurnLimits
from rlmx.engine.profiles import PromptProfile
from rlmx.errors import InvalidSettings
from rlmx.prompts import load
from rlmx.repl.dialect import OFFICIAL_STRICT

if TYPE_CHECKING:
    from rlmx.tools import ToolSet

DELEGATION_STARTS = "Work in steps:"  # the official.md paragraph that urges delegation


def split_official() -> tuple[str, str]:
    """rlmx's `official` prompt without its delegation paragraph, and that paragraph."""
    text = load("official.md")
    head, mark, tail = text.partition(DELEGATION_STARTS)
    return head.rstrip("\n") + "\n", (mark + tail).strip()


def profile_for(rlm: Any, tools: ToolSet | None, limits: TurnLimits) -> PromptProfile:
    """The prompt profile of `rlm`'s runs."""
    base, delegation = split_official()
    if rlm.system_prompt:
        section = "\n\n{{tools}}" if tools else ""
        try:
            base = rlm.system_prompt.format(custom_tools_section=section)
        except (KeyError, IndexError, ValueError) as exc:
            raise InvalidSettings(
                f"custom_system_prompt is formatted with str.format (its only field is "
                f"{{custom_tools_section}}); it failed on {exc!s}: double any other braces ({{{{ and }}}})"
            ) from exc
    template = f"{base.rstrip()}\n\n{delegation}" if rlm.orchestrator else base
    repl = replace(OFFICIAL_STRICT, lists_history=bool(rlm.compaction))
    dialect = StrictOfficialDialect(repl=repl, limits=limits, user_prologue=rlm.user_prologue)
    return PromptProfile("official-strict", dialect, template)
