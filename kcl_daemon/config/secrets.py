"""Masking secrets that can appear in configuration values and in log lines.

An endpoint URL may carry a password (``https://user:secret@host:4566``); it is shown as
``https://user:****@host:4566`` in ``check-config``, in configuration errors and in every log line
(:class:`MaskingFilter` on the CLI's log handler).
"""

from __future__ import annotations

import logging
import re
from typing import Final

#: scheme://user:password@ : the password part, up to the '@' (no '/', whitespace or quote inside)
_URL_PASSWORD: Final = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]*:)[^/\s@'\"]+@")
MASK: Final = "****"


def mask_url_password(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` URL in it replaced by ****."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)


class MaskingFilter(logging.Filter):
    """Masks URL passwords in a record's message (and its arguments) before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_url_password(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:  # formatters use exc_text when it is set
            record.exc_text = mask_url_password(_FORMATTER.formatException(record.exc_info))
        return True


_FORMATTER: Final = logging.Formatter()
