"""A long-running worker: process every job, polling when the queue is idle."""

import os

from _report import build_report

from pail import Pail

pail = Pail.connect(os.environ["BUCKET"])
print("worker started", flush=True)
pail.work(build_report)
