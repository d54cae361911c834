# The deepseek-locust image: Locust master/worker, the CPU simulator and the GPU memory exporter
# (docker-compose.yml and deploy/k8s run it with different commands).
#   docker build -t deepseek-locust:0.1.0 .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false

WORKDIR /app

# Pinned runtime dependencies first (a layer that survives code edits); the test/lint tools stay out.
COPY requirements.txt .
RUN grep -vE '^(pytest|ruff|selenium)==' requirements.txt > /tmp/requirements-runtime.txt \
    && pip install -r /tmp/requirements-runtime.txt \
    && rm /tmp/requirements-runtime.txt

COPY . .

# Locust web UI, master<->worker port, the master's Prometheus exporter, the simulator, the GPU exporter.
EXPOSE 8089 5557 9646 8000 9400

# results/ is where the compose file's locust-master writes --llm-summary-json/--llm-report (a bind mount);
# the image runs as root so that a host folder created by Docker stays writable.
RUN mkdir -p /app/results

CMD ["locust", "-f", "locustfile.py", "--help"]
