# The production image: the web app under gunicorn (static files by whitenoise) or a Celery worker.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 EVALSERVER_VAR_DIR=/var/lib/evalserver
WORKDIR /app
COPY pyproject.toml README.md ./
RUN pip install --no-cache-dir -e . && useradd --system --home /app evalserver \
    && mkdir -p /var/lib/evalserver && chown evalserver /var/lib/evalserver
COPY . .
RUN DJANGO_SECRET_KEY=build-only-not-used-at-run-time-xxxxxxxx python manage.py collectstatic --noinput -v 0
USER evalserver
EXPOSE 8000
CMD ["gunicorn", "-c", "gunicorn.conf.py", "evalserver.wsgi"]
