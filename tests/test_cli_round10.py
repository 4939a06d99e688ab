"""The command line keeps what it computed and never writes where it should not: a repeated --column is refused,
a foreign file named like perfmodel's manifest and an output inside the installed package are refused, a sweep's
files are in place before its summary is printed, and --link NAME is the preset even beside a column of that name."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import perfmodel
from perfmodel.cli import main

PACKAGE = Path(perfmodel.__file__).resolve().parent
MOONCAKE_LINES = [  # (records 1 and 3 malformed; a blank line between 0 and 1)
    '{"timestamp":0,"input_length":10,"output_length":1}',
    "",
    '{"timestamp":1,"input_length":"x","output_length":1}',
    '{"timestamp":2,"input_length":30,"output_length":1}',
    '{"timestamp":3,"input_length":-1,"output_length":1}',
    '{"timestamp":4,"input_length":50,"output_length":1}',
]


@pytest.fixture
def requests_csv(tmp_path):
    path = tmp_path / "requests.csv"
    path.write_text("num_input_tokens,prompt,ib-ndr,llama-3.1-70b\n1024,2048,1,2\n")
    return path


def test_a_column_given_twice_is_refused(requests_csv, tmp_path, capsys):
    code = main(["delay", str(requests_csv), "--out", str(tmp_path / "o.csv"), "--link", "ib-ndr", "--model",
                 "llama-3.1-70b", "--column", "num_input_tokens=prompt", "--column", "num_input_tokens=ib-ndr"])  # fmt: skip
    said = capsys.readouterr().err
    assert (
        code == 2 and "--column num_input_tokens given twice (num_input_tokens=prompt, num_input_tokens=ib-ndr)" in said
    )
    assert not (tmp_path / "o.csv").exists()


def test_link_and_model_names_are_presets_beside_columns_of_their_names(requests_csv, tmp_path, capsys):
    out = tmp_path / "o.csv"
    code = main(["delay", str(requests_csv), "--out", str(out), "--link", "ib-ndr", "--model", "llama-3.1-70b"])
    assert code == 0, capsys.readouterr().err
    assert out.read_text().splitlines()[1] == "1024,2048,1,2,6.7108864"


@pytest.mark.parametrize("content", ["my own notes\n", '{"mine": true}\n', "[1, 2]\n"])
def test_a_foreign_file_of_the_manifests_name_is_kept_and_refused(tmp_path, capsys, content):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / ".perfmodel-output.json").write_text(content)
    code = main(["sweep", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tokens", "1k", "--out", str(folder)])
    assert code == 2 and "which perfmodel did not write" in capsys.readouterr().err
    assert (folder / ".perfmodel-output.json").read_text() == content
    assert sorted(p.name for p in folder.iterdir()) == [".perfmodel-output.json"]


def test_perfmodels_own_manifest_is_read_again(tmp_path, capsys):
    arguments = [
        "sweep",
        "--model",
        "llama-3.1-70b",
        "--link",
        "ib-ndr",
        "--tokens",
        "1k",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(arguments) == 0 and main(arguments) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "made"),
    [
        (["sweep", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tokens", "1k", "--out"], "round10-out"),
        (["delay", "REQUESTS", "--replace", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--out"], "round10.csv"),
    ],
)
def test_an_output_inside_the_installed_package_is_refused(requests_csv, capsys, arguments, made):
    """(A name no shipped file has: were the refusal gone, nothing shipped would be replaced, and it is removed.)"""
    target = PACKAGE / "data" / made
    try:
        code = main([str(requests_csv) if a == "REQUESTS" else a for a in arguments] + [str(target)])
        assert code == 2 and "lies inside the installed perfmodel package" in capsys.readouterr().err
        assert not target.exists()
    finally:
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_sweep_keeps_its_files_when_its_summary_cannot_be_printed(tmp_path):
    """Its standard output is a full device: the error is said, and the table and figures stand."""
    out = tmp_path / "sweep"
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "perfmodel", "sweep", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--out", str(out)],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=600,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert {"sweep.csv", "delay_vs_tokens.png", "heatmap.png"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("maker", ["mkstemp", "mkdtemp"])
def test_an_unwritable_output_is_said_as_the_output_named(tmp_path, monkeypatch, maker):
    import errno
    import tempfile

    from perfmodel.ground.files import atomic_file, output_folder

    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".hidden.perfmodel-tmp"))

    monkeypatch.setattr(tempfile, maker, refused)
    target = tmp_path / ("o.csv" if maker == "mkstemp" else "out")
    writing = atomic_file(target) if maker == "mkstemp" else output_folder(target, command="sweep")
    with pytest.raises(OSError) as raised, writing:
        pass
    assert raised.value.filename == str(target) and "choose another --out" in raised.value.strerror
    assert "perfmodel-tmp" not in str(raised.value)


def test_delay_says_when_it_replaces_a_column_of_its_result_name(tmp_path):
    from perfmodel.io import delay_file

    (tmp_path / "has.csv").write_text("num_input_tokens,handoff_delay_ms\n1024,999\n")
    with pytest.warns(UserWarning, match="has a column handoff_delay_ms, which the computed handoff_delay_ms replaces"):
        delay_file(tmp_path / "has.csv", tmp_path / "o.csv", kv_bytes_per_token="llama-3.1-70b",
                   kv_transfer_bandwidth="ib-ndr", progress=False)  # fmt: skip
    assert (tmp_path / "o.csv").read_text().splitlines()[1] == "1024,6.7108864"


@pytest.mark.parametrize(
    ("tokens", "columns"),
    [("1k:4k", ["1k", "2k", "4k"]), ("128:128k", ["1k", "8k", "32k", "128k"]), ("1000:9000:1000", ["1000", "4000", "6000", "9000"])],
)  # fmt: skip
def test_the_sweeps_summary_shows_lengths_across_those_asked(tmp_path, capsys, tokens, columns):
    assert (
        main(["sweep", "--model", "llama-3.1-70b", "--link", "ib-ndr", "--tokens", tokens, "--out", str(tmp_path)]) == 0
    )
    header = capsys.readouterr().out.splitlines()[1].split()
    assert header == columns, header


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("s.csv", "arrival_ms,num_input_tokens,req\n0,100,a\n5,-3,b\n\n10,200,c\n11,1,d,9\n12,300,e\n"),
        ("s.jsonl", "\n".join(MOONCAKE_LINES) + "\n"),
    ],
)
def test_a_replays_requests_join_back_to_the_files_records_after_skipped_lines(tmp_path, name, text):
    """They were numbered again from 0 after the lines left out: row 1 of the output was the file's third record."""
    (tmp_path / name).write_text(text)
    with pytest.warns(UserWarning, match="skipped 2 malformed lines of 5"):
        trace = perfmodel.read_trace(tmp_path / name, errors="skip")
    assert trace.index.tolist() == [0, 2, 4]
    assert main(["trace", str(tmp_path / name), "--model", "llama-3.1-8b", "--link", "ib-ndr", "--skip-bad-lines",
                 "--out", str(tmp_path / "out")]) == 0  # fmt: skip
    replay = pd.read_csv(tmp_path / "out" / "replay.csv")
    assert replay["request"].tolist() == [0, 2, 4]


@pytest.mark.parametrize("flag", ["--bandwidth", "--latency-ms"])
def test_a_flag_that_overflows_is_refused_not_read_as_infinity(requests_csv, tmp_path, capsys, flag):
    """--bandwidth 1e400 was a free transfer: 0 ms delays."""
    more = [] if flag == "--bandwidth" else ["--bandwidth", "50"]
    code = main(["delay", str(requests_csv), "--out", str(tmp_path / "o.csv"), "--model", "llama-3.1-70b", flag,
                 "1e400", *more])  # fmt: skip
    assert code == 2 and "'1e400' is beyond a float's range" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()
