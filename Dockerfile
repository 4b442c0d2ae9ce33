# deltaweb image: the web server, Celery worker and beat all run from it.
FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
COPY deltaweb ./deltaweb
COPY tables ./tables
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install --no-cache-dir . gunicorn==23.0.0 && DELTAWEB_SECRET_KEY=build python manage.py collectstatic --noinput
ENV DELTAWEB_ALLOWED_ROOTS=/data
EXPOSE 8000
CMD ["gunicorn", "deltaweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
