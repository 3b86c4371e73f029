"""A signal as a person writes it (``TERM``, ``SIGTERM``, ``sigterm``, ``15``) -> its number (pure).

The daemon parses it, not the CLI, so a program on the gRPC API gets the same rules
and the same refusal; the CLI passes the text through.
"""

from __future__ import annotations

import signal

__all__ = ["parse_signal", "signal_name", "signal_names"]


def parse_signal(text: str) -> int:
    """ValueError that lists a few names when ``text`` names no signal of this machine."""
    t = text.strip()
    if t.isdigit():
        if 1 <= int(t) <= signal.SIGRTMAX:
            return int(t)
    else:
        name = t.upper()
        name = name if name.startswith("SIG") else "SIG" + name
        if name in signal.Signals.__members__:
            return int(signal.Signals[name])
    raise ValueError(f"{text[:32]!r} is not a signal: give a name (TERM, SIGUSR1, HUP, KILL, INT) "
                     f"or a number (1-{int(signal.SIGRTMAX)}, `kill -l` lists them)")


def signal_name(sig: int) -> str:
    """``SIGTERM`` for 15; a real-time signal without a name of its own as ``SIG40``."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


def signal_names() -> list[str]:
    """Every name ``parse_signal`` takes, without the SIG prefix (TERM, HUP, USR1, ...), in number
    order: what shell completion offers for ``hwagent signal NAME <TAB>``."""
    return [s.name[3:] for s in sorted(signal.Signals, key=int)]
