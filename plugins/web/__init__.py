"""``veglia web``: a live view of the profile's workflows and jobs in a browser; and
``veglia report``, one self-contained HTML file of a workflow.

The server (:mod:`.app`) turns each page of :mod:`.pages` into an HTML page, a JSON answer
under ``/api`` and a stream of server-sent events under ``/live``; :mod:`.auth` logs people
in (the printed token, or named users with a role), :mod:`.actions` kills, pauses, plays and
unblocks behind a confirmation, and :mod:`.daemon` lets the daemon serve it too.
"""
