"""``pail demo``: the whole queue on this machine, with no AWS account, in under a minute.

It starts the embedded S3 server, creates a bucket, enqueues a batch of
report and simulation jobs (a few that fail transiently, one poison job),
runs several worker processes and the reaper on a schedule, kills one worker
with SIGKILL in the middle of a long job, and watches the reaper reclaim
that lease and another worker finish the job. It ends with a summary that
accounts for every job, a presigned result URL, the dead letter with its
error, and commands to try. It stops everything it started, on success,
failure, Ctrl-C or SIGTERM. Run it with ``scripts/demo`` or ``pail demo``.

One concept per module, and the arrows point one way (the CLI imports the
demo; the demo never imports the CLI):

* ``jobs``: the job catalogue (the batch and the handler that runs it);
* ``fleet``: the worker processes (start, kill one, stop them all);
* ``display``: the live progress (a Rich panel, or plain lines);
* ``summary``: the end (``DemoReport`` and how it is told);
* ``run``: the orchestration (``DemoOptions``, ``run_demo``).

This module imports none of them, so that a worker process importing
``pail.demo.jobs`` (``pail work --handler pail.demo.jobs:handle``) loads
only the catalogue.
"""
