"""What looks like a secret: one rule for every layer (standard library only).

A name looks like a secret when one of its words is a secret word (``OPENAI_API_KEY``,
``JUPYTERHUB_API_TOKEN``, ``hfToken``, ``DB_PASSWORD``, ``client_secret``) or ends with one
(``PGPASSWORD``, ``GHTOKEN``). Words are split at non-alphanumerics and at camelCase humps, so
``max_tokens``, ``tokenizer``, ``TOKENIZERS_PARALLELISM`` and ``secretary_name`` are ordinary.

The same rule decides which argument values the action log redacts
(:mod:`betty_jupyter.agent.actions`), which variables the local transport never hands to
Slurm's commands, and which names a job's environment may never carry
(:mod:`betty_jupyter.cluster.job_env`). :func:`blank_secret_text` finds secrets in free text
(a script's ``export OPENAI_API_KEY=…``, a ``--api-key`` argument, a URL's password, a bearer
token, a key of a well-known shape) where no argument name points at them. A private key is
known by its content, whatever the file is called: :func:`blank_private_keys` removes every
PEM, OpenSSH, PGP or PuTTY private key block (:data:`PRIVATE_KEY_HEADER` is the header the
cluster's read step looks for).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Mapping

REDACTED = "[redacted]"
KEY_REMOVED = "[private key removed]"
PRIVATE_KEY_HEADER = "-----BEGIN[ A-Z0-9]*PRIVATE KEY|PuTTY-User-Key-File-"
"""How every private key file begins, as an extended regular expression read case-insensitively (grep -iE)."""

_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "secret", "token", "apikey", "credential",
                           "credentials", "authorization", "cookie", "jwt"})
# A word ending in one of these has it glued on (PGPASSWORD, GHTOKEN); a bare "key" ending is too common to count.
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "credentials")
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
_SHELL_KEEPS = frozenset({"PWD", "OLDPWD"})  # the shell's working directories, not passwords
_NOT_VALUES = frozenset({"", REDACTED, "Bearer", "Basic", "Token", "Digest"})

# Each pattern starts only where a word starts (the look-behinds), so a long output is scanned in linear time.
# The look-ahead skips, cheaply, every name without a hint of a secret in it (most of a log).
_HINT = r"(?=[A-Za-z0-9_.-]*?[pPsStTkKcCaAjJ](?i:ass|wd|ecret|oken|ey|red|uth|ookie|wt))"
_NAME = rf"(?<![A-Za-z0-9_.-]){_HINT}[A-Za-z_][A-Za-z0-9_.-]*"
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&|)]+)"""
_ASSIGNMENT = re.compile(rf"(?P<name>{_NAME})(?P<sep>[\"']?[ \t]*[=:][ \t]*)(?P<value>{_VALUE})")
_OPTION = re.compile(
    rf"(?P<name>(?<![A-Za-z0-9_.-])--?{_HINT}[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=|[ \t]+)(?P<value>{_VALUE})")
_URL_PASSWORD = re.compile(
    r"(?P<head>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:)(?P<value>[^\s/@]+)(?P<tail>@)")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer[ \t]+|(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
                     r"(?:(?:Bearer|Basic|Token|Digest)[ \t]+)?))(?P<value>[A-Za-z0-9._~+/=-]{8,})")
# A block runs from its header to its end line, or to the end of the text when it was cut before that.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-.*?(?:Private-MAC:[^\r\n]*|\Z)", re.I | re.S)
# Keys whose shape alone gives them away: OpenAI, Anthropic, Hugging Face, GitHub, Slack, AWS access key ids.
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
)


@lru_cache(maxsize=4096)  # a long log repeats the same few names thousands of times
def is_secret_name(name: str) -> bool:
    """Whether a variable, argument or option called ``name`` holds a secret."""
    if name in _SHELL_KEEPS:
        return False
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    parts = [part for part in re.split(r"[^a-z0-9]+", words) if part]
    return (any(part in _SECRET_WORDS or part.endswith(_SECRET_ENDINGS) for part in parts)
            or any(pair in _SECRET_PAIRS for pair in zip(parts, parts[1:])))


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables whose names look like secrets."""
    return {name: value for name, value in environ.items() if not is_secret_name(name)}


def holds_private_key(text: str) -> bool:
    """Whether ``text`` holds the start of a private key (PEM, OpenSSH, PGP, PuTTY), in any case."""
    return _PRIVATE_KEY.search(text) is not None


def blank_private_keys(text: str) -> str:
    """``text`` with every private key block, from its header to its end line, replaced by ``"[private key removed]"``."""
    return _PRIVATE_KEY.sub(KEY_REMOVED, text)


def blank_secret_text(text: str) -> str:
    """``text`` with secrets found by their context or shape replaced by ``"[redacted]"``.

    Caught: ``NAME=value`` and ``NAME: value`` where NAME looks like a secret (``export
    OPENAI_API_KEY=sk-…``, ``"password": "…"``), ``--api-key VALUE`` and ``--token=VALUE``, the
    password of ``scheme://user:password@host``, ``Bearer``/``Basic`` credentials and keys of a
    well-known shape (``sk-…``, ``hf_…``, ``ghp_…``, ``AKIA…``) anywhere, and private key blocks
    (:func:`blank_private_keys`).
    """
    text = blank_private_keys(text)
    text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED + m["tail"], text)
    text = _BEARER.sub(lambda m: m["head"] + REDACTED, text)
    for pattern in (_OPTION, _ASSIGNMENT):
        text = pattern.sub(_blank_named_value, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def _blank_named_value(match: re.Match[str]) -> str:
    # An authorization scheme word stays: _BEARER has blanked the credential after it.
    if not is_secret_name(match["name"].lstrip("-")) or match["value"].strip("\"'") in _NOT_VALUES:
        return match[0]
    value = match["value"]
    quote = value[0] if value[0] in "\"'" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{match['name']}{match['sep']}{quote}{REDACTED}{quote}"
