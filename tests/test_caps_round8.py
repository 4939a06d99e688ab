"""Round 8 of the hostile review: every cap says how to raise it (the option of perfmodel.set_options)."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.cli import main
from perfmodel.cli._parsing import UsageError, parse_tokens
from perfmodel.errors import InputError


def test_the_token_range_cap_names_its_option():
    with perfmodel.set_options(max_token_values=10), pytest.raises(UsageError) as caught:
        parse_tokens("1:100:1")
    message = str(caught.value)
    assert "100 values, more than 10" in message and "coarser step" in message
    assert "perfmodel.set_options(max_token_values=" in message and "perfmodel.cli.main" in message


def test_the_command_line_says_how_to_raise_the_token_range_cap(tmp_path, capsys):
    assert main(["sweep", "--tokens", "1:2000000:1", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "2,000,000 values, more than 1,000,000" in err and "set_options(max_token_values=" in err


def test_the_synthetic_trace_cap_names_its_option():
    with perfmodel.set_options(max_synthetic_requests=5), pytest.raises(InputError) as caught:
        perfmodel.synthetic_trace(20, 10)
    message = str(caught.value)
    assert message.startswith("n: 20 is above 5.") and "generate a larger one in parts" in message
    assert "raise perfmodel.set_options(max_synthetic_requests=...)" in message
