"""pail's AWS Lambda entry points: thin adapters over the runtime, with Powertools.

* ``pail.aws.lambda_worker``: ``handler = lambda_worker(run)``, the worker Lambda template
  (also importable as ``pail.lambda_worker``);
* ``pail.aws.reaper``: ``handler``, the scheduled reaper Lambda (handler string
  ``pail.aws.reaper.handler``);
* ``pail.aws.triggers``: what woke a worker (for its logs);
* ``pail.aws.observability``: the Powertools Logger, EMF metrics and Tracer set-up.

Nothing here is imported by ``import pail``: Powertools is needed only where
these functions run. ``docs/serverless.md`` has the whole story.
"""
