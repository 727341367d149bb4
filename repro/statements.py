"""The paper's statements as data: ``statements.yaml`` loaded into frozen :class:`PaperStatement` rows and validated.

The table holds one entry per checkable sentence of the FedEntOpt paper (v2's abstract, §II to §VI
and captions; v1's large pools and Figs. 4 to 6), with the paper's words and value, the rule that judges it, what it is
computed from (a run group of :data:`repro.tiers.GROUPS` or a label-only function), the tiers that can
judge it, and why a difference is expected, where the paper's text contradicts its own table and where no run group
exists yet.  The YAML file's header documents every field and rule.

:func:`load` returns the statements, :func:`load_table` the whole table (``alpha``, ``margins``, ``statements``);
both validate every field and raise :class:`StatementError`, naming the statement, the field, the value given and
what is allowed.  :func:`normalise` and :func:`quote_in` compare the quoted words with the paper's text;
:func:`unresolved_sources` and :func:`tier_problems` check the sources against the code (they import what they name).
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "PATH",
    "RULES",
    "TIERS",
    "RULE_PARAMS",
    "SETTING_KEYS",
    "StatementError",
    "PaperStatement",
    "StatementTable",
    "load",
    "load_table",
    "validate",
    "normalise",
    "quote_in",
    "paper_excerpt",
    "unresolved_sources",
    "tier_problems",
]

#: The statements table beside this module.
PATH = Path(__file__).with_name("statements.yaml")
#: The rules a statement can name (``not_checkable``: a sentence kept for completeness, with the reason).
RULES = ("best", "direction", "magnitude", "equal_within", "exact", "not_checkable")
#: The columns of the scorecard: label-only (label counts at the paper's scale), then the training tiers.
TIERS = ("label_only", "quick", "subset", "paper")
#: The parameters each rule requires (others may be given: ``threshold``, ``in``, ``one_sided``, ``scope`` ...).
RULE_PARAMS = {
    "best": ("reference", "rivals", "quantity", "settings"),
    "direction": ("quantity", "side", "settings"),
    "magnitude": ("quantity", "relation", "value", "settings"),
    "equal_within": ("quantity", "margin", "settings"),
    "exact": ("quantity", "expected", "settings"),
    "not_checkable": ("reason",),
}
#: The keys over which a rule may be applied setting by setting.
SETTING_KEYS = (
    "model",
    "dataset",
    "partition",
    "method",
    "baseline",
    "scenario",
    "clients_per_round",
    "num_clients",
    "buffer_pct",
    "epsilon",
)
SIDES = ("positive", "negative")
RELATIONS = ("over", "under", "about", "range", "up_to")
ONE_SIDED = ("lower", "upper")

_REQUIRED = (
    "id",
    "section",
    "line",
    "words",
    "paper_value",
    "rule",
    "params",
    "source",
    "tiers",
    "expected_difference",
    "contradicts_paper_table",
    "group_missing",
)
_OPTIONAL = ("contradiction", "needed", "restated_at", "replaces", "note")
_ID = re.compile(r"^[A-Za-z0-9-]+/[a-z0-9_]+$")
_LINE = re.compile(r"^(v1:)?(\d+)(?:-(\d+))?$")
_DOTTED = re.compile(r"^(fedlib|repro)(\.[A-Za-z_][A-Za-z0-9_]*)+$")


class StatementError(ValueError):
    """An entry of the statement table that does not validate."""


def _fail(sid, field: str, value, allowed: str):
    raise StatementError(f"statement {sid!r}: field {field!r} is {value!r}; allowed: {allowed}.")


@dataclass(frozen=True)
class PaperStatement:
    """One statement of the paper (one entry of ``statements.yaml``; see its header for the fields)."""

    id: str
    section: str
    line: str
    words: str
    paper_value: Mapping | None
    rule: str
    params: Mapping
    source: Mapping | None
    tiers: tuple[str, ...]
    expected_difference: str | None
    contradicts_paper_table: bool
    group_missing: bool
    contradiction: str | None = None
    needed: str | None = None
    restated_at: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    note: str | None = None

    @property
    def paper(self) -> str:
        """The version of the paper ("v1" or "v2") whose lines ``line`` names."""
        return "v1" if self.line.startswith("v1:") else "v2"

    @property
    def lines(self) -> tuple[int, int]:
        """First and last line (1-based, inclusive) of the paper's text that hold ``words``."""
        m = _LINE.match(self.line)
        return int(m.group(2)), int(m.group(3) or m.group(2))

    @property
    def groups(self) -> tuple[str, ...]:
        """The run groups it is computed from (empty for a label-only statement or none)."""
        group = (self.source or {}).get("group")
        return () if group is None else (group,) if isinstance(group, str) else tuple(group)

    @property
    def label_only(self) -> str | None:
        """The dotted name of the label-only function it is computed from, or None."""
        return (self.source or {}).get("label_only")

    @property
    def checkable(self) -> bool:
        return self.rule != "not_checkable"


@dataclass(frozen=True)
class StatementTable:
    """The validated table: the one ``alpha`` of every interval, the named ``margins`` and the ``statements``."""

    alpha: float
    margins: Mapping
    statements: tuple[PaperStatement, ...]

    def by_id(self, sid: str) -> PaperStatement:
        """The statement ``sid``, also under an id it ``replaces``; a ``KeyError`` naming the known ids otherwise."""
        for s in self.statements:
            if s.id == sid or sid in s.replaces:
                return s
        raise KeyError(f"no statement {sid!r}; known: {', '.join(s.id for s in self.statements)}")

    def frame(self):
        """One row per statement (pandas): id, section, line, rule, source, tiers, the flags and the words."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "id": s.id,
                    "section": s.section,
                    "line": s.line,
                    "rule": s.rule,
                    "source": ", ".join(s.groups) or s.label_only or "",
                    "tiers": ", ".join(s.tiers),
                    "contradicts_paper_table": s.contradicts_paper_table,
                    "group_missing": s.group_missing,
                    "words": s.words,
                }
                for s in self.statements
            ]
        )


# --------------------------------------------------------------------------------------------------- validation


def _text(sid, field, value, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        _fail(sid, field, value, "a non-empty string" + (" or null" if optional else ""))
    return value.strip()


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _line(sid, field, value) -> str:
    value = str(value) if isinstance(value, int) else value
    m = _LINE.match(value) if isinstance(value, str) else None
    if m is None or int(m.group(2)) < 1 or (m.group(3) and int(m.group(3)) < int(m.group(2))):
        _fail(sid, field, value, 'a line of fedentopt-v2.md ("166"), a range ("160-162") or a line of v1 ("v1:261")')
    return value


def _paper_value(sid, value):
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"value", "unit", "where"} or not {"value", "unit"} <= set(value):
        _fail(sid, "paper_value", value, "null or {value, unit, where (optional)}")
    v = value["value"]
    if not (_is_number(v) or (isinstance(v, list) and v and all(_is_number(x) for x in v))):
        _fail(sid, "paper_value.value", v, "a number or a non-empty list of numbers")
    _text(sid, "paper_value.unit", value["unit"])
    return MappingProxyType(dict(value))


def _relation_values(sid, relation, value):
    def one(rel, val, field):
        if rel not in RELATIONS:
            _fail(sid, "params.relation", rel, ", ".join(RELATIONS))
        if rel == "range":
            if not (isinstance(val, list) and len(val) == 2 and all(map(_is_number, val)) and val[0] <= val[1]):
                _fail(sid, field, val, "[low, high] with low <= high for relation 'range'")
        elif not _is_number(val):
            _fail(sid, field, val, f"a number for relation {rel!r}")

    if isinstance(relation, list):
        if not (isinstance(value, list) and len(value) == len(relation) and relation):
            _fail(sid, "params.value", value, f"a list of {len(relation)} values, one per relation {relation!r}")
        for i, (rel, val) in enumerate(zip(relation, value)):
            one(rel, val, f"params.value[{i}]")
    else:
        one(relation, value, "params.value")


def _params(sid, rule, params, margins):
    if not isinstance(params, Mapping):
        _fail(sid, "params", params, f"a mapping with {', '.join(RULE_PARAMS[rule])}")
    missing = [k for k in RULE_PARAMS[rule] if k not in params]
    if missing:
        _fail(sid, f"params.{missing[0]}", None, f"rule {rule!r} requires {', '.join(RULE_PARAMS[rule])}")
    if rule == "not_checkable":
        _text(sid, "params.reason", params["reason"])
        return MappingProxyType(dict(params))
    settings = params["settings"]
    if not isinstance(settings, list) or any(k not in SETTING_KEYS for k in settings):
        _fail(sid, "params.settings", settings, f"a list of {', '.join(SETTING_KEYS)}")
    if "side" in params and params["side"] not in SIDES:
        _fail(sid, "params.side", params["side"], ", ".join(SIDES))
    if "one_sided" in params and params["one_sided"] not in ONE_SIDED:
        _fail(sid, "params.one_sided", params["one_sided"], ", ".join(ONE_SIDED))
    if "threshold" in params and not _is_number(params["threshold"]):
        _fail(sid, "params.threshold", params["threshold"], "a number")
    if rule == "magnitude":
        _relation_values(sid, params["relation"], params["value"])
    if rule == "equal_within":
        margin = params["margin"]
        if isinstance(margin, str):
            if margin not in margins:
                _fail(sid, "params.margin", margin, f"a number or a name of margins: {', '.join(margins)}")
        elif _is_number(margin) and margin > 0:
            if not isinstance(params.get("margin_from"), str) or not params["margin_from"].strip():
                _fail(sid, "params.margin_from", params.get("margin_from"), "where a numeric margin comes from")
        else:
            _fail(sid, "params.margin", margin, f"a positive number or a name of margins: {', '.join(margins)}")
    return MappingProxyType(dict(params))


def _source(sid, source, groups):
    if source is None:
        return None
    if not isinstance(source, Mapping) or len(source) != 1 or not set(source) <= {"group", "label_only"}:
        _fail(sid, "source", source, "null, {group: <name or list of names>} or {label_only: <dotted function name>}")
    if "group" in source:
        names = [source["group"]] if isinstance(source["group"], str) else source["group"]
        if not isinstance(names, list) or not names:
            _fail(sid, "source.group", source["group"], f"a name or a list of names of {', '.join(groups)}")
        for name in names:
            if name not in groups:
                _fail(sid, "source.group", name, ", ".join(groups) + " (repro.tiers.GROUPS)")
    else:
        name = source["label_only"]
        if not isinstance(name, str) or not _DOTTED.match(name):
            _fail(
                sid,
                "source.label_only",
                name,
                "the dotted name of a fedlib or repro function, e.g. repro.label_studies.function",
            )
    return MappingProxyType(dict(source))


def _tiers(sid, tiers, source):
    if not isinstance(tiers, list) or len(set(map(str, tiers))) != len(tiers):
        _fail(sid, "tiers", tiers, f"a list without repeats of {', '.join(TIERS)}")
    for t in tiers:
        if t not in TIERS:
            _fail(sid, "tiers", t, ", ".join(TIERS))
    if source and "label_only" in source and set(tiers) - {"label_only"}:
        _fail(sid, "tiers", tiers, "[label_only] for a label-only source (the same at the paper's scale in every tier)")
    if source and "group" in source and "label_only" in tiers:
        _fail(sid, "tiers", tiers, f"training tiers ({', '.join(TIERS[1:])}) for a run-group source")
    return tuple(tiers)


def _lines(sid, field, values) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list):
        _fail(sid, field, values, "a list of lines")
    return tuple(_line(sid, field, v) for v in values)


def _statement(entry, margins, groups) -> PaperStatement:
    if not isinstance(entry, Mapping):
        raise StatementError(f"a statement must be a mapping of fields (got {entry!r}).")
    sid = entry.get("id")
    if not isinstance(sid, str) or not _ID.match(sid):
        _fail(sid, "id", sid, '"<section>/<what>", e.g. "V-B3/dir_pronounced" (letters, digits, _ after the /)')
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        _fail(sid, unknown[0], entry[unknown[0]], f"the fields {', '.join(_REQUIRED + _OPTIONAL)}")
    missing = [f for f in _REQUIRED if f not in entry]
    if missing:
        _fail(sid, missing[0], None, f"every statement has {', '.join(_REQUIRED)}")
    rule = entry["rule"]
    if rule not in RULES:
        _fail(sid, "rule", rule, ", ".join(RULES))
    for flag in ("contradicts_paper_table", "group_missing"):
        if not isinstance(entry[flag], bool):
            _fail(sid, flag, entry[flag], "true or false")
    source = _source(sid, entry["source"], groups)
    s = PaperStatement(
        id=sid,
        section=_text(sid, "section", entry["section"]),
        line=_line(sid, "line", entry["line"]),
        words=" ".join(_text(sid, "words", entry["words"]).split()),
        paper_value=_paper_value(sid, entry["paper_value"]),
        rule=rule,
        params=_params(sid, rule, entry["params"], margins),
        source=source,
        tiers=_tiers(sid, entry["tiers"], source),
        expected_difference=_text(sid, "expected_difference", entry["expected_difference"], optional=True),
        contradicts_paper_table=entry["contradicts_paper_table"],
        group_missing=entry["group_missing"],
        contradiction=_text(sid, "contradiction", entry.get("contradiction"), optional=True),
        needed=_text(sid, "needed", entry.get("needed"), optional=True),
        restated_at=_lines(sid, "restated_at", entry.get("restated_at")),
        replaces=tuple(entry.get("replaces") or ()),
        note=_text(sid, "note", entry.get("note"), optional=True),
    )
    if s.contradicts_paper_table != (s.contradiction is not None):
        _fail(sid, "contradiction", s.contradiction, "the table cells when contradicts_paper_table is true, else none")
    if s.group_missing != (s.needed is not None):
        _fail(sid, "needed", s.needed, "what would judge it when group_missing is true, else none")
    if not s.checkable and (s.source is not None or s.tiers or s.group_missing):
        _fail(sid, "source", s.source, "null, with tiers [] and group_missing false, for a not_checkable statement")
    if s.checkable and not s.group_missing and (s.source is None or not s.tiers):
        _fail(sid, "tiers" if s.source else "source", s.tiers if s.source else None, "a source and at least one tier")
    for old in s.replaces:
        if not isinstance(old, str) or not _ID.match(old):
            _fail(sid, "replaces", old, "ids of earlier statements")
    return s


def validate(document: Mapping, groups: Sequence[str] | None = None) -> StatementTable:
    """The table from a parsed ``statements.yaml`` document, every field checked (:class:`StatementError` at the
    first problem).  ``groups``: the run groups a source may name (default :data:`repro.tiers.GROUPS`)."""
    if groups is None:
        from repro.tiers import GROUPS

        groups = tuple(GROUPS)
    if not isinstance(document, Mapping) or not isinstance(document.get("statements"), list):
        raise StatementError("the table must be a mapping with a list 'statements' (and 'alpha', 'margins').")
    alpha = document.get("alpha")
    if not (_is_number(alpha) and 0 < alpha < 1):
        raise StatementError(f"field 'alpha' is {alpha!r}; allowed: a number between 0 and 1 (0.05).")
    margins = document.get("margins") or {}
    for name, m in margins.items():
        if not isinstance(m, Mapping) or not isinstance(m.get("from"), str) or "value" not in m:
            raise StatementError(
                f"margin {name!r} is {m!r}; allowed: {{value, unit, from}} (value may be null "
                "where 'from' says how it is measured)."
            )
    out, seen = [], {}
    for i, entry in enumerate(document["statements"]):
        s = _statement(entry, margins, groups)
        for key in (s.id, *s.replaces):
            if key in seen:
                _fail(s.id, "id", key, f"an id not used before (statement {seen[key]} already has it)")
            seen[key] = i + 1
        out.append(s)
    return StatementTable(float(alpha), MappingProxyType(dict(margins)), tuple(out))


@functools.lru_cache(maxsize=4)
def _load_cached(path: str) -> StatementTable:
    import yaml

    return validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


def load_table(path=None) -> StatementTable:
    """The validated table of ``path`` (default: :data:`PATH`), read once per process."""
    return _load_cached(str(Path(path) if path is not None else PATH))


def load(path=None) -> tuple[PaperStatement, ...]:
    """The validated statements of ``path`` (default: :data:`PATH`)."""
    return load_table(path).statements


# ------------------------------------------------------------------------------------------ quotes and sources

_SYMBOLS = {
    r"\mu": "μ",
    r"\epsilon": "ε",
    r"\approx": "≈",
    r"\leq": "≤",
    r"\geq": "≥",
    r"\times": "×",
    r"\sim": "∼",
    r"\%": "%",
}


def normalise(text: str) -> str:
    """The text as quotes are compared: ``\\text{x}`` read as ``x``, ``$`` dropped, a few TeX symbols as Unicode
    (``\\mu`` as μ, ``\\%`` as %), whitespace collapsed, no space after "(" or before ")", ",", ".", ";", ":"."""
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text).replace("$", "")
    for tex, uni in _SYMBOLS.items():
        text = text.replace(tex, uni)
    text = " ".join(text.split())
    return re.sub(r"\s+([),.;:])", r"\1", re.sub(r"\(\s+", "(", text))


def quote_in(words: str, text: str) -> bool:
    """Whether ``words`` occur in ``text`` after :func:`normalise`; " ... " in ``words`` marks a cut, and the parts
    must then occur in order."""
    text, pos = normalise(text), 0
    for part in re.split(r"\s*(?:\.\.\.|…)\s*", words):
        part = normalise(part)
        if not part:
            continue
        found = text.find(part, pos)
        if found < 0:
            return False
        pos = found + len(part)
    return True


def paper_excerpt(statement: PaperStatement, papers: Mapping[str, str]) -> str:
    """The lines of the paper that ``statement.line`` names, joined; ``papers``: {"v1": text, "v2": text}."""
    first, last = statement.lines
    return "\n".join(papers[statement.paper].splitlines()[first - 1 : last])


def unresolved_sources(statements: Sequence[PaperStatement]) -> list[tuple[str, str]]:
    """(id, name) of every label-only source that does not import (its module or its attribute is missing)."""
    bad = []
    for s in statements:
        name = s.label_only
        if name is None:
            continue
        module, _, attr = name.rpartition(".")
        try:
            getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            bad.append((s.id, name))
    return bad


def tier_problems(statements: Sequence[PaperStatement]) -> list[tuple[str, str, str]]:
    """(id, tier, why) for every training tier a statement lists although that tier cannot judge it with the run
    groups as defined: the tier does not run the group, or runs a setting of it on fewer than two seeds (no
    interval).  Statements with ``group_missing`` are skipped (their tiers are the ones that would judge them)."""
    from repro import tiers as tiers_module

    @functools.lru_cache(maxsize=None)
    def fewest_seeds(tier: str, group: str) -> int:
        if group not in tiers_module.tier_groups(tier):
            return 0
        per = {}
        for run in tiers_module.group_configs(tier, group):
            key = tuple(sorted((k, str(v)) for k, v in run.label.items() if k != "seed"))
            per.setdefault(key, set()).add(run.label.get("seed"))
        return min((len(v) for v in per.values()), default=0)

    out = []
    for s in statements:
        if s.group_missing:
            continue
        for tier in s.tiers:
            if tier == "label_only":
                continue
            for group in s.groups:
                n = fewest_seeds(tier, group)
                if n < 2:
                    why = "does not run it" if n == 0 else "runs it on one seed"
                    out.append((s.id, tier, f"tier {tier!r} {why} (group {group!r})"))
    return out
