"""The benchmark families by name, and item generation by (family, size, index, seed, variant)."""

from __future__ import annotations

from rlmx.errors import ConfigError
from rlmx.evals.codeqa import CodeQA
from rlmx.evals.doc_multihop import DocMultihop
from rlmx.evals.items import EvalItem, Family
from rlmx.evals.niah import Niah
from rlmx.evals.oolong import Oolong
from rlmx.evals.oolong_pairs import OolongPairs
from rlmx.evals.receipts import Receipts

# the text families ('all' runs these); the image families' contexts are folders of pictures, so only
# the RLM method runs them (the baselines read text)
FAMILIES: dict[str, Family] = {f.name: f for f in (Niah(), Oolong(), OolongPairs(), DocMultihop(), CodeQA())}
IMAGE_FAMILIES: dict[str, Receipts] = {"receipts": Receipts()}


def family(name: str) -> Family:
    found = FAMILIES.get(name) or IMAGE_FAMILIES.get(name)
    if found is None:
        names = ", ".join([*FAMILIES, *IMAGE_FAMILIES])
        raise ConfigError(f"unknown eval family {name!r}; choose from {names}")
    return found  # type: ignore[return-value]


def check_variant(name: str, variant: str | None) -> str:
    fam = family(name)
    if variant is None:
        return fam.variants[0]
    if variant not in fam.variants:
        raise ConfigError(f"family {name} has no variant {variant!r}; choose from {', '.join(fam.variants)}")
    return variant


def built_variant(name: str, variant: str | None = None) -> str:
    """The variant `name` asked as `variant` is built from on this machine (its fallback when the text
    source of `variant` is not installed): what item ids and records name."""
    return family(name).built(check_variant(name, variant))


def generate_item(
    name: str, size_tokens: int, index: int, seed: int = 0, variant: str | None = None
) -> EvalItem:
    """One item; the same arguments always give the same item (on the same installed text sources)."""
    if name in IMAGE_FAMILIES:
        return IMAGE_FAMILIES[name].generate_sized(size_tokens, index, seed)
    return family(name).generate(size_tokens, index, seed, check_variant(name, variant))


def check_image_methods(suite: tuple[str, ...], methods: tuple[str, ...], terms: dict[str, str]) -> None:
    """Refuse the text baselines for an image family, in one line naming the caller's own terms
    (`terms`: "suite" and "methods" mapped to how the caller calls them)."""
    text_only = [m for m in methods if m != "rlm"]
    pictures = [name for name in suite if name in IMAGE_FAMILIES]
    if pictures and text_only:
        raise ConfigError(
            f"{terms['suite']} {pictures[0]} has image contexts, which {terms['methods']} "
            f"{','.join(text_only)} cannot read: {terms['fix']} (and run the text families apart)"
        )
