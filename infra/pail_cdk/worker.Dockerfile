# The pail worker image: pailq, plus the handler folder of the user's own repository.
#
# `pail_cdk.worker_image(directory)` stages this build context outside the
# user's source tree (and `cdk synth` copies it into the cloud assembly):
#
#   pail/requirements.txt   what installs pailq: the wheel beside it (by default,
#                           built from the pailq installed where `cdk synth` runs),
#                           or the requirement passed as worker_image(pailq=...)
#   app/                    the user's folder: handler modules, and requirements.txt
#                           for their own dependencies if it has one
#
# To keep a Dockerfile in your repository instead, copy this one and lay out the
# same two folders (or replace the first RUN with `pip install "pailq @ <wheel or git URL>"`).
# The task definition sets the command (`pail work-once --handler module:function`).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY pail/ /tmp/pail/
RUN pip install -r /tmp/pail/requirements.txt && rm -rf /tmp/pail

COPY app/ /app/
RUN if [ -f /app/requirements.txt ]; then pip install -r /app/requirements.txt; fi
WORKDIR /app
ENV PYTHONPATH=/app

USER nobody
CMD ["pail", "work-once"]
