"""A small shop that puts real work on jobqueue: receipts by e-mail and partner charges."""
