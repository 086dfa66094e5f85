"""scripts/bench_conformal.py on a tiny problem (no timing assertions: the script is the benchmark): every case is a
row, the weighted one included, the marker block is written in place, and bad sizes are one line."""

from script_loader import load_script


def test_every_case_is_a_row_and_the_block_is_written(tmp_path, capsys):
    out = tmp_path / "performance.md"
    out.write_text("# Performance\n\nbefore\n")
    assert load_script("bench_conformal").main(["--n", "300", "--classes", "4", "--repeats", "1",
                                                "--output", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Performance\n\nbefore\n") and text.count("<!-- bench_conformal: begin -->") == 1
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| score")]
    assert [r.split(" |")[0][2:] for r in rows] == [
        "thr", "aps", "aps, not randomised", "raps", "thr, Mondrian", "aps, Mondrian",
        "aps, weighted (domain classifier + weighted quantiles)"]
    assert all(float(r.split("|")[2]) > 0 for r in rows)
    capsys.readouterr()


def test_bad_sizes_are_one_line(capsys):
    assert load_script("bench_conformal").main(["--n", "5", "--no-write"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "need --n >= 20" in err
