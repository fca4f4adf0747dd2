"""The deploy rehearsal: a user's app, deployed as far as this machine allows.

From a wheel of this repository, installed with its ``[cdk]`` extra into a
fresh virtual environment, a user app (written from ``docs/deploy.md`` into a
temporary folder, outside this checkout) is synthesised by the real CDK CLI.
Its worker and reaper functions then run from the cloud assembly as Lambda
runs them:

* ``assembly``: the template's functions, their code and layers zipped as the
  CDK CLI zips assets (every timestamp 1980-01-01) and unzipped as Lambda does
  (task root, ``/opt``), with the template's environment;
* ``runtime_api``: a small implementation of the Lambda Runtime API on
  127.0.0.1, polled by ``awslambdaric`` (the real runtime interface client)
  in a Python of the layer's version that holds nothing but it;
* ``proxy``: S3 (and Lambda's Invoke) reached through a proxy in front of the
  local S3 server that enforces each role's IAM policy from the template and
  records every request (``iam`` evaluates the policies, ``cfn`` resolves the
  template's references);
* ``toolchain``: the wheel, the virtual environments, the app and the synth.
"""
