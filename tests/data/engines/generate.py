"""Writes the engine files of this folder (run once: ``python tests/data/engines/generate.py``; README.md says
which source and version each shape follows). The scrapes are written by ``prometheus_client`` itself, the
library SGLang and vLLM expose their metrics with, from the metric names, label names and bucket bounds of the
engines' sources; the observations are chosen by hand so that the tests can compute every figure by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: SGLang's per-stage buckets: exponential_buckets(start=0.001, width=1.62, length=30) (collector.py).
SGLANG_STAGE_BUCKETS = [0.001 * 1.62**i for i in range(30)]
#: SGLang's default TTFT buckets (TokenizerMetricsCollector, collector.py).
SGLANG_TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
#: vLLM's NIXL buckets (NixlPromMetrics, nixl_connector.py): transfer time uses buckets[1:].
NIXL_TIME_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0]
NIXL_BYTES_BUCKETS = [2 ** (10 + i) for i in range(1, 25, 2)]
NIXL_DESC_BUCKETS = [10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000]
#: vLLM's TTFT buckets and its request_latency_buckets (queue, prefill, e2e) (PrometheusStatLogger,
#: vllm/v1/metrics/loggers.py).
VLLM_TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
VLLM_LATENCY_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]

#: The observations (seconds) of the scrapes, by metric (and stage), the same for every label set unless said.
PREFILL_STAGES = {
    "prefill_bootstrap": [0.002, 0.003, 0.004, 0.006],
    "prefill_forward": [0.040, 0.055, 0.080, 0.120],
    "prefill_transfer_kv_cache": [0.011, 0.013, 0.017, 0.029],
}
DECODE_STAGES = {
    "decode_prepare": [0.001, 0.001, 0.002, 0.002],
    "decode_bootstrap": [0.003, 0.004, 0.005, 0.009],
    "decode_transferred": [0.060, 0.075, 0.110, 0.160],
    "decode_waiting": [0.002, 0.002, 0.003, 0.004],
}
SGLANG_TTFT = [0.15, 0.19, 0.25, 0.33]
NIXL_XFER = {"0": [0.004, 0.008, 0.012, 0.030, 0.060, 0.090], "1": [0.020, 0.022, 0.024]}
VLLM_TTFT = {"0": [0.09, 0.12, 0.2, 0.3, 0.45, 0.7], "1": [0.15, 0.2, 0.3]}

SGLANG_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _sglang(path: Path, engine_type: str, stages: dict[str, list[float]], extra: dict[str, float]) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    labels = {"model_name": MODEL, "engine_type": engine_type, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    per_stage = Histogram(
        "sglang:per_stage_req_latency_seconds",
        "The latency of each stage of requests.",
        labelnames=[*SGLANG_LABELS, "stage"],
        buckets=SGLANG_STAGE_BUCKETS,
        registry=registry,
    )
    for stage, values in stages.items():
        for value in values:
            per_stage.labels(**labels, stage=stage).observe(value)
    ttft = Histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        labelnames=["model_name"],
        buckets=SGLANG_TTFT_BUCKETS,
        registry=registry,
    )
    for value in SGLANG_TTFT:
        ttft.labels(model_name=MODEL).observe(value)
    failed = Counter(
        "sglang:num_transfer_failed_reqs",
        "The number of transfer failed requests.",
        labelnames=SGLANG_LABELS,
        registry=registry,
    )
    failed.labels(**labels).inc(0)
    for name, value in extra.items():
        Gauge(name, name, labelnames=SGLANG_LABELS, registry=registry).labels(**labels).set(value)
    header = (
        f"# SGLang {engine_type}-side scrape (curl host:port/metrics), written by prometheus_client from the\n"
        "# names, labels and buckets of sglang python/sglang/srt/metrics/collector.py (commit 00ae9c15);\n"
        "# observations chosen by hand (tests/data/engines/generate.py).\n"
    )
    path.write_text(header + _without_created(generate_latest(registry).decode()))


def _vllm(path: Path) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    names = ["model_name", "engine"]

    def histogram(name: str, doc: str, buckets: list[float]) -> Histogram:
        return Histogram(name, doc, labelnames=names, buckets=buckets, registry=registry)

    xfer = histogram(
        "vllm:nixl_xfer_time_seconds",
        "Histogram of transfer duration for NIXL KV Cache transfers.",
        NIXL_TIME_BUCKETS[1:],
    )
    post = histogram(
        "vllm:nixl_post_time_seconds", "Histogram of transfer post time for NIXL KV Cache transfers.", NIXL_TIME_BUCKETS
    )
    nbytes = histogram(
        "vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.", NIXL_BYTES_BUCKETS
    )
    descs = histogram(
        "vllm:nixl_num_descriptors",
        "Histogram of number of descriptors per NIXL  KV Cache transfers.",
        NIXL_DESC_BUCKETS,
    )
    ttft = histogram(
        "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", VLLM_TTFT_BUCKETS
    )
    queue = histogram(
        "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", VLLM_LATENCY_BUCKETS
    )
    prefill = histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        VLLM_LATENCY_BUCKETS,
    )
    e2e = histogram(
        "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", VLLM_LATENCY_BUCKETS
    )
    failed = Counter(
        "vllm:nixl_num_failed_transfers",
        "Number of failed NIXL KV Cache transfers.",
        labelnames=names,
        registry=registry,
    )
    running = Gauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        labelnames=names,
        registry=registry,
    )
    for engine, times in NIXL_XFER.items():
        labels = {"model_name": MODEL, "engine": engine}
        for t in times:
            xfer.labels(**labels).observe(t)
            post.labels(**labels).observe(0.0004)
            nbytes.labels(**labels).observe(64 * 2**20)  # 64 MiB a transfer
            descs.labels(**labels).observe(512)
        for t in VLLM_TTFT[engine]:
            ttft.labels(**labels).observe(t)
            queue.labels(**labels).observe(0.002)
            prefill.labels(**labels).observe(t / 2)
            e2e.labels(**labels).observe(t + 2.0)
        failed.labels(**labels).inc(1 if engine == "1" else 0)
        running.labels(**labels).set(3)
    header = (
        "# vLLM decode-side scrape with the NIXL connector (curl host:port/metrics), written by prometheus_client\n"
        "# from the names and buckets of vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py\n"
        "# (NixlPromMetrics, NIXL_CONNECTOR_VERSION 2, commit 002a1057) and vllm/v1/metrics/loggers.py\n"
        "# (PrometheusStatLogger, commit a6f0308c); observations chosen by hand (tests/data/engines/generate.py).\n"
    )
    path.write_text(header + _without_created(generate_latest(registry).decode()))


def _without_created(text: str) -> str:
    """The scrape without the ``_created`` samples (their values are the time the file was written)."""
    return "".join(line for line in text.splitlines(keepends=True) if "_created" not in line)


#: One benchmark's requests: (input tokens, output tokens, TTFT s, latency s, send time s, error).
REQUESTS = [
    (1024, 128, 0.120, 1.40, 100.00, ""),
    (2048, 128, 0.180, 1.55, 100.25, ""),
    (4096, 64, 0.310, 1.10, 100.50, ""),
    (8192, 64, 0.560, 1.50, 100.75, ""),
    (512, 256, 0.090, 2.60, 101.00, ""),
    (16384, 32, 1.050, 1.60, 101.25, ""),
    (3000, 0, 0.0, 0.0, 101.50, "Server disconnected"),
    (6000, 128, 0.420, 1.90, 101.75, ""),
]


def _vllm_bench(path: Path) -> None:
    ok = [r for r in REQUESTS if not r[5]]
    result = {
        "date": "20261202-101500",
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": MODEL,
        "tokenizer_id": MODEL,
        "num_prompts": len(REQUESTS),
        "request_rate": 4.0,
        "burstiness": 1.0,
        "max_concurrency": 8,
        "duration": 4.2,
        "completed": len(ok),
        "failed": 1,
        "total_input_tokens": sum(r[0] for r in ok),
        "total_output_tokens": sum(r[1] for r in ok),
        "request_throughput": len(ok) / 4.2,
        "request_goodput": None,
        "input_lens": [r[0] for r in REQUESTS],
        "output_lens": [r[1] for r in REQUESTS],
        "ttfts": [r[2] for r in REQUESTS],
        "itls": [[0.01] * max(r[1] - 1, 0) for r in REQUESTS],
        "latencies": [r[3] for r in REQUESTS],
        "start_times": [r[4] for r in REQUESTS],
        "generated_texts": ["" for _ in REQUESTS],
        "errors": [r[5] for r in REQUESTS],
        "mean_ttft_ms": 1000 * sum(r[2] for r in ok) / len(ok),
    }
    path.write_text(json.dumps(result))


def _sglang_bench(path: Path) -> None:
    lines = []
    for rate, scale in ((2.0, 1.0), (8.0, 1.5)):
        ok = [r for r in REQUESTS if not r[5]]
        result = {
            "backend": "sglang",
            "dataset_name": "random",
            "request_rate": rate,
            "max_concurrency": None,
            "sharegpt_output_len": None,
            "random_input_len": 4096,
            "random_output_len": 128,
            "random_range_ratio": 0.0,
            "duration": 5.0,
            "completed": len(ok),
            "total_input_tokens": sum(r[0] for r in ok),
            "total_output_tokens": sum(r[1] for r in ok),
            "total_output_tokens_retokenized": sum(r[1] for r in ok),
            "mean_ttft_ms": 1000 * scale * sum(r[2] for r in ok) / len(ok),
            "input_lens": [r[0] for r in REQUESTS],
            "output_lens": [r[1] for r in REQUESTS],
            "ttfts": [round(r[2] * scale, 6) for r in REQUESTS],
            "itls": [[0.01] * max(r[1] - 1, 0) for r in REQUESTS],
            "generated_texts": ["" for _ in REQUESTS],
            "errors": [r[5] for r in REQUESTS],
        }
        lines.append(json.dumps(result))
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    _sglang(
        HERE / "sglang_prefill.prom",
        "prefill",
        PREFILL_STAGES,
        {"sglang:kv_transfer_speed_gb_s": 21.5, "sglang:gen_throughput": 0.0},
    )
    _sglang(
        HERE / "sglang_decode.prom",
        "decode",
        DECODE_STAGES,
        {"sglang:num_decode_transfer_queue_reqs": 2, "sglang:gen_throughput": 812.5},
    )
    _vllm(HERE / "vllm_nixl.prom")
    _vllm_bench(HERE / "vllm_bench_serve.json")
    _sglang_bench(HERE / "sglang_bench_serving.jsonl")
