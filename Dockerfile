# deltaweb image: the web server, Celery worker and beat, the SQS listener and the Spark
# master and worker all run from it. Every app in INSTALLED_APPS is copied (a test checks the
# COPY lines against the settings and the wheel against the packages).
# The base is a build argument: where python:3.11-slim-bookworm cannot be pulled, an equivalent
# built from Debian's packages (python3.11 on bookworm) takes its place.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
# the processes run as this user, never root; the volumes' mount points are its own
RUN useradd --system --uid 10001 --create-home --home-dir /home/deltaweb --shell /usr/sbin/nologin deltaweb \
 && mkdir -p /data /results /spark-tls /var/lib/deltaweb && chown deltaweb /data /results /spark-tls /var/lib/deltaweb
WORKDIR /app
COPY pyproject.toml ./
COPY deltaweb ./deltaweb
COPY tables ./tables
COPY alerts ./alerts
COPY credentials ./credentials
COPY templates ./templates
COPY static ./static
COPY manage.py ./
COPY deploy/healthcheck.py /usr/local/bin/deltaweb-healthcheck
RUN pip install --no-cache-dir . \
 && DELTAWEB_SECRET_KEY=build-only python manage.py collectstatic --noinput
# a deployment: the settings refuse to start without DELTAWEB_SECRET_KEY (never a generated one);
# served behind TLS: cookies only over https, HSTS for a year on https requests (set
# DELTAWEB_PROXY_SSL_HEADER for the proxy that ends TLS; DELTAWEB_SECURE_COOKIES=0 for plain http)
ENV DELTAWEB_ALLOWED_ROOTS=/data PYTHONUNBUFFERED=1 DELTAWEB_PRODUCTION=1
ENV DELTAWEB_SECURE_COOKIES=1 DELTAWEB_HSTS_SECONDS=31536000
# the Delta Sharing file-URL key a container keeps when DELTAWEB_SHARING_URL_KEY is not passed
ENV DELTAWEB_SHARING_KEY_DIR=/var/lib/deltaweb
USER deltaweb
EXPOSE 8000
# single words (deploy/healthcheck.py): run as written by every runtime, podman's included
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["deltaweb-healthcheck", "http", "http://127.0.0.1:8000/healthz"]
# threads: a page that starts a data job waits up to DELTAWEB_JOB_SETTLE_SECONDS for it, and a
# sync worker would hold every other request back meanwhile
CMD ["gunicorn", "deltaweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]
