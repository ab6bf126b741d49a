"""`rlmx providers`: every provider rlmx knows, from the provider records (rlmx.lm.providers): its key
variable(s) and whether a key is set (in the environment or a config file), where it connects, an
example model string. `--markdown` prints the tables docs/providers.md carries (a test keeps the two the
same), `--json` the records' facts for tools."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rlmx.commands import options as opt
from rlmx.commands.run_options import cli_terms

if TYPE_CHECKING:
    from rlmx.lm.providers import ProviderRecord

TABLE_START = "<!-- providers table: `rlmx providers --markdown` writes it; tests compare -->"
QUIRKS_START = "<!-- quirks table: `rlmx providers --markdown` writes it; tests compare -->"
TABLE_END = "<!-- end of generated table -->"


def register(app: typer.Typer) -> None:
    app.command(name="providers")(providers)


def providers(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the tables of docs/providers.md (Markdown).")
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print every provider's record as JSON.")] = False,
    config_file: opt.ConfigFile = None,
) -> None:
    """List every provider: its key variable and whether a key is set, its default base URL, an
    example model string."""
    from rlmx.lm.registry import PROVIDERS

    records = list(PROVIDERS.values())
    if markdown:
        typer.echo(markdown_tables(records))
        return
    keys = key_status(records, os.environ, configured_keys(config_file))
    if json_:
        typer.echo(json.dumps([record_json(r, keys[r.name]) for r in records], indent=2))
        return
    typer.echo(plain_table(records, keys))


def configured_keys(config_file: Any) -> set[str]:
    """The providers with a key in a config file (`api_key` or `api_key_env` that is set)."""
    from rlmx.config import load_config
    from rlmx.errors import ConfigError

    try:
        config = load_config(config_file)
    except ConfigError as exc:  # the listing still helps; say why config keys are not shown
        sys.stderr.write(f"rlmx: config not read ({exc}); keys are shown from the environment only\n")
        return set()
    return {name for name in config.providers if config.api_key(name)}


def key_status(
    records: Iterable[ProviderRecord], environ: Mapping[str, str], in_config: set[str]
) -> dict[str, str]:
    """Per provider: "set (VARIABLE)", "set (config)", "not set", "optional" or "not needed"."""
    status = {}
    for record in records:
        found = record.key_from(environ)
        if found is not None:
            status[record.name] = f"set ({found[0]})"
        elif record.name in in_config:
            status[record.name] = "set (config)"
        elif record.key_required:
            status[record.name] = "not set"
        elif record.key_envs:
            status[record.name] = "optional"
        else:
            status[record.name] = "not needed"
    return status


def key_names(record: ProviderRecord) -> str:
    if record.key_envs:
        return " or ".join(record.key_envs)
    return "LiteLLM's, per route" if record.name == "litellm" else "none"


def plain_table(records: list[ProviderRecord], keys: Mapping[str, str]) -> str:
    rows = [("PROVIDER", "KEY VARIABLE", "KEY", "DEFAULT BASE URL", "EXAMPLE")]
    rows += [(r.name, key_names(r), keys[r.name], cli_terms(r.where), r.example) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def record_json(record: ProviderRecord, key: str) -> dict[str, Any]:
    return {
        "name": record.name,
        "key_envs": list(record.key_envs),
        "key": key,
        "key_required": record.key_required,
        "base_url": record.base_url,
        "where": cli_terms(record.where),
        "base_env": record.base_env,
        "example": record.example,
        "help": cli_terms(record.help),
        "price_id": record.price_id,
        "local": record.local,
        "quirks": asdict(record.quirks),
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def markdown_tables(records: list[ProviderRecord]) -> str:
    """The providers table and the quirks table, as docs/providers.md carries them (each in its place)."""
    return providers_table(records) + "\n\n" + quirks_table(records)


def providers_table(records: list[ProviderRecord]) -> str:
    lines = [
        TABLE_START,
        "| provider | example model string | key variable | default base URL | what it is |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        key = " or ".join(_code(name) for name in r.key_envs) or key_names(r)
        if r.key_envs and not r.key_required:
            key += " (optional)"
        where = _code(r.where) if r.where.startswith("http") else _cell(cli_terms(r.where))
        if r.base_env and r.base_env not in r.where:
            where += f", or `${r.base_env}`"
        lines.append(f"| `{r.name}` | {_code(r.example)} | {key} | {where} | {_cell(cli_terms(r.help))} |")
    lines.append(TABLE_END)
    return "\n".join(lines)


def quirks_table(records: list[ProviderRecord]) -> str:
    lines = [
        QUIRKS_START,
        "| provider | cached tokens read from | what differs | source | not verified here |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        q = r.quirks
        if not (q.sources or q.notes):
            continue
        differs = [q.notes] if q.notes else []
        if q.rejected_params:
            differs.append("answers HTTP 400 to " + ", ".join(_code(p) for p in q.rejected_params))
        if q.unknown_fields_rejected:
            differs.append("rlmx sends only the chat fields (model, messages, output cap, sampling)")
        if q.reasoning_effort:
            differs.append(f"reasoning_effort: {q.reasoning_effort}")
        cached = "usage." + ".".join(q.cached_tokens_at)
        sources = "; ".join(q.sources)
        lines.append(
            f"| `{r.name}` | `{cached}` | {_cell('; '.join(differs))} | {_cell(sources)} | {_cell(q.unverified)} |"
        )
    lines.append(TABLE_END)
    return "\n".join(lines)
