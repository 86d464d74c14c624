# The assistant on embedded defaults, or pointed at a Chroma server with CHROMA_HOST (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 GDPRBOT_DATA_DIR=/data GDPR_SOURCE_DIR=/corpus GDPRBOT_LOG_JSON=true

RUN apt-get update && apt-get install -y --no-install-recommends make curl && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 gdprbot && mkdir -p /data /corpus && chown gdprbot /data

WORKDIR /app
# The same install steps as `make`: torch pinned first (the CPU build), then the package.
COPY pyproject.toml README.md ./
COPY bot bot
COPY core core
COPY corpus corpus
COPY adapters adapters
COPY evals evals
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && pip install .

USER gdprbot
VOLUME ["/data"]
EXPOSE 3000 3978
# /healthz answers in the HTTP modes (Slack HTTP and Socket Mode, Teams).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${PORT:-3000}/healthz" || exit 1
# Builds the corpus (from /corpus, or downloaded from the Publications Office) and the index when missing.
ENTRYPOINT ["python", "-m", "bot"]
CMD ["run", "--port", "3000"]
