"""The cluster surfaces' edges: numeric fields of public objects (bools refused, numpy scalars taken), counts that
size a handoff's work bounded, NaN on the command line said as what it is, and one handoff alone priced alike by
every route."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import perfmodel
from perfmodel import Cluster, Link, Transport
from perfmodel._inputs import CLUSTER_BOUNDS, MAX_CLUSTER_TP, MAX_NICS_PER_GPU
from perfmodel.models import ModelShape

# --- numeric fields of public objects: bools refused, numpy scalars taken ---------------------------------------

_BASES = {
    Link: dict(name="x", bandwidth_gb_s=50.0),
    Transport: dict(name="t"),
    Cluster: dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8),
    ModelShape: dict(),
}
#: A valid value of each numeric field (with the fields it needs beside it).
_VALID = {
    (Link, "bandwidth_gb_s"): (1.0, {}), (Link, "latency_ms"): (1.0, {}), (Link, "efficiency"): (1.0, {}),
    (Link, "max_relative_error"): (1.0, {}), (Link, "per_block_ms"): (1.0, {}), (Link, "per_message_ms"): (1.0, {}),
    (Transport, "per_message_ms"): (1.0, {}), (Transport, "per_block_ms"): (1.0, {}),
    (Transport, "setup_ms"): (1.0, {}), (Transport, "efficiency"): (1.0, {}), (Transport, "line_rate_gb_s"): (1.0, {}),
    (Cluster, "nics_per_node"): (1, {}), (Cluster, "gpus_per_node"): (8, {}), (Cluster, "nodes"): (1, {}),
    (Cluster, "nvlink_domain"): (8, {"nvlink": "nvlink4"}),
    (Cluster, "oversubscription"): (1.0, {"fabric": "rail"}), (Cluster, "hop_latency_ms"): (1.0, {}),
    (Cluster, "gpus_per_pcie_switch"): (8, {"pcie_switch_gb_s": 64.0}),
    (Cluster, "pcie_switch_gb_s"): (1.0, {"gpus_per_pcie_switch": 8}),
    (ModelShape, "tp"): (1, {}), (ModelShape, "decode_tp"): (1, {}),
}
_NOT_NUMBERS = {"name", "nic", "transport", "nvlink", "fabric", "fit", "source", "kv_cache_dtype", "scope",
                "kv_layout"}


def _numeric_fields():
    for kind in _BASES:
        for f in dataclasses.fields(kind):
            if f.name not in _NOT_NUMBERS:
                yield kind, f.name


def test_every_numeric_field_is_listed():
    """A new numeric field of a public object must be added to _VALID (so it is covered below)."""
    assert set(_numeric_fields()) == set(_VALID)


@pytest.mark.parametrize("kind, name", sorted(_VALID, key=lambda k: (k[0].__name__, k[1])),
                         ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("boolean", [True, False, np.True_, np.False_], ids=repr)
def test_every_numeric_field_refuses_booleans(kind, name, boolean):
    _, needs = _VALID[(kind, name)]
    with pytest.raises(perfmodel.InputError, match=rf"{name}|boolean"):
        kind(**{**_BASES[kind], **needs, name: boolean})


@pytest.mark.parametrize("kind, name", sorted(_VALID, key=lambda k: (k[0].__name__, k[1])),
                         ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("as_numpy", [np.float32, np.float64, np.int64, np.int32], ids=lambda t: t.__name__)
def test_every_numeric_field_takes_numpy_scalars_as_the_numbers_they_are(kind, name, as_numpy):
    value, needs = _VALID[(kind, name)]
    plain = kind(**{**_BASES[kind], **needs, name: value})
    numpy = kind(**{**_BASES[kind], **needs, name: as_numpy(value)})
    assert numpy == plain
    assert type(getattr(numpy, name)) in (int, float)  # (a Python number, never a numpy scalar)


def test_a_half_efficiency_of_numpy_is_a_half():
    assert Transport(efficiency=np.float32(0.5)).efficiency == 0.5
    assert Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8,
                   transport=Transport(efficiency=np.float32(0.5))).nic_capacity_gb_s == 25.0


# --- counts that size work: bounded ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CLUSTER_BOUNDS))
def test_each_cluster_count_is_bounded_in_one_line_naming_the_bound(name):
    bound, why = CLUSTER_BOUNDS[name]
    fields = {**dict(nic="ib-ndr", nics_per_node=8, gpus_per_node=8), name: bound + 1}
    if name == "nvlink_domain":
        fields["nvlink"] = "nvlink4"
    if name == "gpus_per_pcie_switch":
        fields["pcie_switch_gb_s"] = 64.0
    with pytest.raises(perfmodel.InputError) as error:
        Cluster(**fields)
    text = str(error.value)
    assert "\n" not in text and name in text and f"{bound + 1:,}" in text and f"{bound:,}" in text and why in text


def test_a_million_nics_is_refused_before_any_work():
    with pytest.raises(perfmodel.InputError, match=r"nics_per_node 1,048,576 is above 64"):
        Cluster(nic="ib-ndr", nics_per_node=2**20, gpus_per_node=8)


def test_nics_per_gpu_are_bounded():
    with pytest.raises(perfmodel.InputError, match=rf"more than the {MAX_NICS_PER_GPU}.*Fix: pass nics_per_node <= 8"):
        Cluster(nic="ib-ndr", nics_per_node=16, gpus_per_node=1)
    Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=1)


@pytest.mark.parametrize("name", ["tp", "decode_tp"])
def test_a_tensor_parallel_degree_on_a_cluster_is_bounded(name):
    c = Cluster(nic="ib-ndr", nics_per_node=8, gpus_per_node=8)
    inputs = {**dict(tp=1, decode_tp=1), name: 2 * MAX_CLUSTER_TP}
    for call in (lambda: perfmodel.handoff_delay_ms(1000, c, "llama-3.1-8b", **inputs),
                 lambda: perfmodel.handoff_flows(1000, c, "llama-3.1-8b", **inputs)):
        with pytest.raises(perfmodel.InputError, match=rf"^{name}: 1,152 GPUs per worker.*above 576"):
            call()


def test_a_sweep_over_an_absurd_nic_count_is_refused():
    with pytest.raises(perfmodel.InputError, match="nics_per_node"):
        perfmodel.sweep(num_input_tokens=[1000], cluster="hgx-h100-8x400g", model="llama-3.1-8b",
                        nics_per_node=[8, 2**20])


# --- NaN on the command line -------------------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True)


@pytest.mark.parametrize("flag, said", [
    ("--oversubscription", "pass oversubscription as a number >= 1"),
    ("--hop-latency-ms", "pass hop_latency_ms as a finite number of ms >= 0"),
    ("--latency-ms", "latency is a finite number of milliseconds >= 0"),
    ("--cache-hit", "pass a number in [0, 1]"),
    ("--bandwidth", "pass a number > 0"),
])
def test_nan_on_a_float_flag_is_named_not_a_number_with_its_range(flag, said):
    link = ["--cluster", "hgx-h100-8x400g"] if flag in ("--oversubscription", "--hop-latency-ms") else []
    if flag != "--bandwidth" and not link:
        link = ["--bandwidth", "50"]
    done = _cli("sweep", "--model", "llama-3.1-8b", *link, flag, "nan")
    assert done.returncode != 0
    line = done.stderr.strip()
    assert "\n" not in line and "not a number (NaN)" in line and said in line and "outside" not in line, line
