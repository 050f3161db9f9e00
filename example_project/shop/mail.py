"""An e-mail backend that writes each message to its own ``.eml`` file."""

from __future__ import annotations

import datetime
import os
import uuid
from collections.abc import Sequence

from django.core.mail import EmailMessage
from django.core.mail.backends import filebased


class EmlFileBackend(filebased.EmailBackend):
    """Write every message to ``<file_path>/<timestamp>-<uuid>.eml``.

    Django's file-based backend appends all messages of one connection to a single ``.log``
    file, separated by dashes. One ``.eml`` file per message opens in any mail client, and one
    receipt is one file, so the demo can count them.
    """

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        """Write the messages; return how many were written."""
        written = 0
        for message in email_messages:
            try:
                self._write_eml(message)
            except OSError:
                if not self.fail_silently:
                    raise
            else:
                written += 1
        return written

    def _write_eml(self, message: EmailMessage) -> None:
        timestamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        final = os.path.join(self.file_path, f"{timestamp}-{uuid.uuid4().hex}.eml")
        # Write under a hidden name and rename: a reader that lists *.eml (rundemo counts them
        # while workers run) never sees half a message.
        partial = os.path.join(self.file_path, f".{os.path.basename(final)}.partial")
        with open(partial, "wb") as fh:
            fh.write(message.message().as_bytes())
        os.replace(partial, final)
