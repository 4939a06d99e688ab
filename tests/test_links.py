"""Links: presets, multiples, transfer times, and fits to measurements."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import LINKS, InputError, Link, fit_link, get_link

EXPECTED_GB_S = {
    "nvlink4": 450,
    "nvlink5": 900,
    "pcie4": 32,
    "pcie5": 64,
    "ib-ndr": 50,
    "ib-xdr": 100,
    "roce-400g": 50,
    "eth-100g": 12.5,
    "ib-hdr": 25,
    "eth-200g": 25,
    "eth-400g": 50,
    "eth-800g": 100,
    "roce-100g": 12.5,
    "roce-200g": 25,
    "roce-800g": 100,
    "efa-100g": 12.5,
    "efa-200g": 25,
}


def test_presets():
    assert {k: v.bandwidth_gb_s for k, v in LINKS.items()} == EXPECTED_GB_S
    assert all(v.latency_ms == 0 and v.efficiency == 1 for v in LINKS.values())


def test_multiples():
    assert get_link("8x ib-ndr") == LINKS["ib-ndr"].times(8)
    assert get_link(" 4X ROCE-400G ").bandwidth_gb_s == 200
    assert LINKS["ib-ndr"].times(8).name == "8x ib-ndr"


def test_transfer_ms():
    link = Link("x", 10.0, latency_ms=0.5, efficiency=0.5)
    np.testing.assert_array_equal(link.transfer_ms([0, 5e9, 1e6]), [0.0, 1000.5, 0.7])


def test_transfer_ms_rejects_negative_bytes():
    with pytest.raises(ValueError, match="nbytes: 1 invalid row; first at row 1: -5"):
        LINKS["pcie5"].transfer_ms([1, -5])


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(bandwidth_gb_s=0), "bandwidth_gb_s"),
        (dict(bandwidth_gb_s=1, latency_ms=-1), "latency_ms"),
        (dict(bandwidth_gb_s=1, efficiency=1.5), "efficiency"),
    ],
)
def test_link_validation(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        Link("bad", **kwargs)


def test_unknown_link_suggests_closest():
    with pytest.raises(ValueError, match="did you mean ib-ndr"):
        get_link("ib-nd")
    with pytest.raises(ValueError, match="unknown link"):
        get_link("3x warp-drive")


def test_fit_recovers_latency_and_bandwidth_from_noisy_data():
    rng = np.random.default_rng(7)
    nbytes = np.geomspace(1e4, 4e9, 60)
    exact = 0.35 + nbytes / (42.0e9) * 1000
    measured = exact * rng.normal(1.0, 0.01, nbytes.size)  # 1% multiplicative noise
    link = fit_link(nbytes, measured, name="rdma")
    assert link.name == "rdma"
    assert link.latency_ms == pytest.approx(0.35, rel=0.03)
    assert link.bandwidth_gb_s == pytest.approx(42.0, rel=0.01)
    assert 0.005 < link.max_relative_error < 0.05


def test_fit_describes_a_real_measurement_where_line_rate_does_not():
    """perftest ib_write_lat on 40 Gb/s InfiniBand (4 GB/s of data), 4 KB to 8 MB."""
    table = pd.read_csv(Path(__file__).parent / "data" / "ib_write_lat_40g.csv", comment="#")
    nbytes, time_ms = table["nbytes"].to_numpy(float), table["t_typical_us"].to_numpy() / 1000
    keep = nbytes >= 4096
    link = fit_link(nbytes[keep], time_ms[keep], name="qdr")
    fitted = link.transfer_ms(nbytes[keep])
    line_rate = Link("qdr line rate", 4.0).transfer_ms(nbytes[keep])
    assert np.max(np.abs(fitted / time_ms[keep] - 1)) < 0.05  # within a few percent
    assert link.max_relative_error < 0.05
    assert np.max(time_ms[keep] / line_rate) > 4  # nominal line rate is off by a factor of several


@pytest.mark.parametrize(
    "nbytes, times, fragment",
    [
        ([1e6], [1.0], "at least two"),
        ([1e6, 2e6], [1.0], "one time per"),
        ([1e6, -2e6], [1.0, 2.0], "nbytes: 1 value not finite and > 0, first at position 1: -2000000.0"),
        ([1e6, 2e6], [1.0, 0.0], "measured_ms: 1 value not finite and > 0"),
        ([1e6, 2e6], [1.0, 2.0, 3.0], "2 sizes but 3 times"),
    ],
)
def test_fit_errors(nbytes, times, fragment):
    """What no term can describe is refused; data a term describes never is (see test_edges)."""
    with pytest.raises(ValueError, match=fragment):
        fit_link(nbytes, times)


@pytest.mark.filterwarnings("ignore:the fit is far:UserWarning", "ignore:the best measured throughput:UserWarning")
def test_fit_never_returns_a_negative_parameter():
    # unconstrained least squares would give a negative latency here; the constrained fit holds it at 0
    link = fit_link([1e6, 2e6, 4e6], [1.0, 3.0, 7.0])
    assert link.latency_ms == 0.0 and link.per_block_ms == 0.0 and link.bandwidth_gb_s > 0
    assert link.fit.points == 3 and link.fit.max_relative_error > 0.1  # and says how poorly it fits


def _reference_fit(nbytes, measured_ms, n_blocks):
    """Brute force: the best non-negative (latency, per-block, ms/byte) on a fine grid around the truth."""
    best = None
    for latency in np.linspace(0, 0.02, 41):
        for per_block in np.linspace(0, 0.004, 41):
            for ms_per_byte in np.linspace(1e-8, 4e-8, 61):
                predicted = latency + n_blocks * per_block + nbytes * ms_per_byte
                error = float(np.sum(((predicted - measured_ms) / measured_ms) ** 2))
                if best is None or error < best[0]:
                    best = (error, latency, per_block, ms_per_byte)
    return best


def test_per_block_fit_recovers_known_parameters_and_beats_a_grid_search():
    rng = np.random.default_rng(5)
    nbytes = np.geomspace(1e5, 1e9, 12)
    n_blocks = np.round(nbytes / rng.choice([16, 64, 256], 12) / 1024) + 1
    truth = 0.01 + n_blocks * 0.002 + nbytes / 40e9 * 1000
    exact = fit_link(nbytes, truth, n_blocks=n_blocks)
    assert (round(exact.latency_ms, 9), round(exact.per_block_ms, 9), round(exact.bandwidth_gb_s, 6)) == (
        0.01,
        0.002,
        40.0,
    )
    noisy = truth * rng.uniform(0.95, 1.05, 12)
    fitted = fit_link(nbytes, noisy, n_blocks=n_blocks)
    error = lambda lat, pb, mpb: float(np.sum(((lat + n_blocks * pb + nbytes * mpb - noisy) / noisy) ** 2))  # noqa: E731
    ours = error(fitted.latency_ms, fitted.per_block_ms, 1e-6 / fitted.bandwidth_gb_s)
    assert ours <= _reference_fit(nbytes, noisy, n_blocks)[0] + 1e-12
    assert fitted.fit.mean_relative_error <= fitted.fit.max_relative_error < 0.06


def test_a_cluster_where_a_link_is_asked_for_is_said_to_be_a_cluster():
    """It was "unknown link 'hgx-h100-8x400g'. Fix: did you mean hgx-h100-8x400g (a cluster preset)"."""
    with pytest.raises(InputError, match="'hgx-h100-8x400g' is a cluster, where one link is asked for.*cluster="):
        perfmodel.sweep(model="llama-3.1-70b", link=["ib-ndr", "hgx-h100-8x400g"], num_input_tokens=1000)
