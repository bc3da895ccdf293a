"""The help the ``siftbus`` command prints: whole one-sentence summaries (never cut off
with "..."), placeholders that read as words (``FILE``, ``HOST:PORT``, ``PROFILE...``,
not ``<path>``, ``<list[str]>`` or ``{config}``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# option and argument names whose value has a better word than their type
_WORDS = {
    "broker": "HOST:PORT", "server": "HOST:PORT", "socket": "HOST:PORT",
    "host": "ADDRESS", "master": "URL", "token": "TOKEN", "webhook": "SUBSCRIBER=URL",
    "name": "NAME", "client": "NAME", "session": "ID", "profile": "PROFILE",
    "profiles": "PROFILE", "event": "JSON", "constraint": "ETCL", "format": "FORMAT",
    "engine": "ENGINE", "strategy": "STRATEGY", "structure": "STRUCTURE",
    "semantics": "SEMANTICS", "kind": "KIND", "scope": "SCOPE", "type": "DOMAIN,TYPE",
    "qos": "JSON", "admin": "JSON", "live": "MODE", "at": "SECONDS", "ttl": "SECONDS",
    "timeout": "SECONDS", "trigger": "SECONDS", "stop_when_idle": "SECONDS",
    "idle_stop": "SECONDS", "speed": "FACTOR", "scale": "FACTOR", "port": "PORT",
    "metrics_port": "PORT", "gateway_port": "PORT", "seed": "N", "count": "N",
    "batch": "N", "driver_memory": "SIZE",
}
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")


def _word(param: Any) -> str:
    name = (param.name or "value").lower()
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    inner = getattr(annotation, "__args__", (annotation,))
    if Path in inner or annotation is Path:
        text = (getattr(param, "help", None) or "").lower()
        if "directory" in text or name.endswith("dir"):
            return "PATH" if "file" in text else "DIR"
        return "FILE"
    if name in _WORDS:
        return _WORDS[name]
    if int in inner:
        return "N"
    if float in inner:
        return "NUMBER"
    return name.upper().replace("_", "-")


def polish(command: Any) -> None:
    """Set short help and metavars on every command under ``command`` (a click group)."""
    for sub in getattr(command, "commands", {}).values():
        polish(sub)
    command.context_settings.setdefault("max_content_width", 100)
    if command.help and not command.short_help:
        first = command.help.strip().split("\n\n")[0].replace("\n", " ")
        end = _SENTENCE_END.search(first)
        command.short_help = first if end is None else first[:end.start() + 1]
    for param in getattr(command, "params", []):
        if param.name == "help" or getattr(param, "is_flag", False) or param.metavar:
            continue
        if param.param_type_name == "argument":
            word = _WORDS.get(param.name or "", (param.name or "value").upper())
            param.metavar = word + ("..." if param.nargs != 1 else "")
            label = param.metavar if param.required else f"[{param.metavar}]"
            param._usage_display_name = lambda label=label: label
            param.display_type = lambda ctx: ""  # the word says it; no "<list[str]>"
        else:
            param.metavar = _word(param)


__all__ = ["polish"]
