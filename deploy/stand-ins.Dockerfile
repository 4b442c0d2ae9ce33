# Stand-ins for docker-compose.yml's third-party images, for machines where docker.io and
# quay.io cannot be reached: Redis and PostgreSQL from Debian's packages, and moto's server
# (S3 and SQS on one port) in MinIO's place. deploy/compose.stand-ins.yml puts it under the
# redis, postgres, minio and minio-setup services:
#   docker-compose -f docker-compose.yml -f deploy/compose.stand-ins.yml up
# The base is the app's own (a Python 3.11 on bookworm), a build argument as in ../Dockerfile.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
# the test suite's moto (pyproject.toml), with the server's own dependencies
RUN pip install --no-cache-dir "moto[server]==5.2.5"
COPY deploy/stand-ins/ /usr/local/bin/
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
