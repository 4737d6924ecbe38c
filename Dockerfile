# Loopwatch gateway image. Configuration is by environment (LOOPWATCH_*); see docs/settings.md.
#   docker build -t loopwatch .
#   docker run -p 8787:8787 -v loopwatch-data:/data -e LOOPWATCH_ADMIN_TOKEN=... loopwatch
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 loopwatch \
    && useradd --system --uid 10001 --gid loopwatch --home-dir /app --shell /usr/sbin/nologin loopwatch

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway/ gateway/
COPY web/ web/
# The wheel carries web/ (templates, static) as gateway/web.
RUN pip install --no-cache-dir .

# /data holds the database and the spool of records not yet stored: both must outlive the
# container (an OOM kill or `docker rm` must not take answered records with it).
RUN mkdir -p /data/spool && chown -R loopwatch:loopwatch /data
VOLUME ["/data"]

ENV LOOPWATCH_DATABASE_URL=sqlite:////data/loopwatch.db \
    LOOPWATCH_SPOOL_DIR=/data/spool \
    LOOPWATCH_PORT=8787

# Numeric, so the host and Kubernetes (runAsNonRoot) can verify it is not root.
USER 10001:10001
EXPOSE 8787

HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LOOPWATCH_PORT', '8787'), timeout=2)"]

# Binding 0.0.0.0 makes `serve` refuse to start unless LOOPWATCH_ADMIN_TOKEN is set.
CMD ["loopwatch", "serve", "--host", "0.0.0.0"]
