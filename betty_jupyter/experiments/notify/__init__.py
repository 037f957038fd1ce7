"""Word when a job ends, where the person chose: e-mail, a webhook (ntfy, Slack, Matrix, Mattermost, plain JSON).

* :mod:`.targets`: the person's targets, in a file of their own (webhook URLs and tokens are secrets);
* :mod:`.message`: what a notification says, built only from the job's id, end state, run time and Betty's
  diagnosis, never from text anyone else wrote (no job names, comments or log lines);
* :mod:`.send`: one delivery to one target, with a timeout;
* :mod:`.outbox`: which ended job each target has been told about, in the experiment ledger, so every
  ended job reaches every target once, also when it ended while no server was running.

The watcher records each job's end in the ledger with its state (:meth:`~..ledger.Ledger.record_states`);
:class:`.outbox.Notifier` delivers from there. ``docs/notifications.md`` is the person's guide.
"""

KINDS = ("email", "ntfy", "slack", "mattermost", "matrix", "webhook")
"""Where word can go: e-mail through the site's relay, or a webhook of one of these shapes."""
