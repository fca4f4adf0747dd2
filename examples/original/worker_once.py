"""Process one job and exit: the shape of a Fargate task or a cron container."""

import os

from _report import build_report

from pail import Pail

pail = Pail.connect(os.environ["BUCKET"])
if pail.work_once(build_report):
    print("processed one job, exiting")
else:
    print("queue empty, nothing to do")
