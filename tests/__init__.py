"""The test suite. Importing it (pytest does, before ``tests/conftest.py``) turns bytecode caching on.

Python caches the bytecode of what it imports (``__pycache__``, gitignored). A
machine that sets ``PYTHONDONTWRITEBYTECODE`` (the shared development machine
does) made every process the suite starts (the xdist workers, the local S3
server, pail workers and commands, the CDK app) compile pail, boto3, moto and
aws_cdk from source again: 1-5 s of CPU each, hundreds of times a run. So this
process and every child write the cache once and read it after. Nothing under
test depends on it: the Lambda layer's own bytecode is compiled explicitly
(``pail_cdk.bytecode``), the rehearsal's runtime sets the variable itself, and
every asset and image copy leaves ``__pycache__`` out.
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
